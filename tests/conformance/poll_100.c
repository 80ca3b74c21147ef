/* poll over 100 connections reports exactly the 34 with data, each with POLLIN alone; POLLOUT
 * on all of them.
 * usmc-expect: accelerated data */
#include "common.h"

#define N 100

static void peer(void *arg)
{
    cf_fanout_peer(*(uint16_t *)arg, N);
}

int main(void)
{
    struct pollfd p[N];
    int fds[N], idx[N], sum = 0;
    cf_start();
    int l = cf_listen_spawn(peer);
    for (int i = 0; i < N; i++) {
        fds[i] = cf_accept(l);
        p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    }
    cf_wait();
    int ready = (int)SHOW("poll POLLIN", poll(p, N, -1));
    for (int i = 0; i < N; i++) {
        uint8_t b;
        idx[i] = -1;
        if (!p[i].revents)
            continue;
        if (p[i].revents != POLLIN)
            FAIL("revents %s", cf_poll_str(p[i].revents));
        cf_read_exact(fds[i], &b, 1);
        idx[i] = b;
        sum += b;
    }
    printf("ready connections carry indexes summing to %d\n", sum);
    CHECK(ready == 34 && sum == 1683);
    for (int i = 0; i < N; i++)
        p[i].events = POLLOUT;
    EXPECT_RET("poll POLLOUT", poll(p, N, 0), N);
    cf_fanout_answer(fds, idx, N);
    cf_join();
    return 0;
}
