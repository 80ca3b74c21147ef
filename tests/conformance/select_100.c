/* select over 100 connections marks exactly the 34 readable ones, and all 100 writable.
 * usmc-expect: accelerated data */
#include "common.h"

#include <sys/select.h>

#define N 100

static void peer(void *arg)
{
    cf_fanout_peer(*(uint16_t *)arg, N);
}

int main(void)
{
    int fds[N], idx[N], sum = 0, maxfd = 0;
    fd_set rd, wr;
    cf_start();
    int l = cf_listen_spawn(peer);
    FD_ZERO(&rd);
    for (int i = 0; i < N; i++) {
        fds[i] = cf_accept(l);
        CHECK(fds[i] < FD_SETSIZE);
        FD_SET(fds[i], &rd);
        maxfd = fds[i] > maxfd ? fds[i] : maxfd;
    }
    wr = rd;
    cf_wait();
    int ready = (int)SHOW("select readable", select(maxfd + 1, &rd, NULL, NULL, NULL));
    for (int i = 0; i < N; i++) {
        uint8_t b;
        idx[i] = -1;
        if (!FD_ISSET(fds[i], &rd))
            continue;
        cf_read_exact(fds[i], &b, 1);
        idx[i] = b;
        sum += b;
    }
    printf("readable connections carry indexes summing to %d\n", sum);
    CHECK(ready == 34 && sum == 1683);
    struct timeval zero = {0, 0};
    EXPECT_RET("select writable", select(maxfd + 1, NULL, &wr, NULL, &zero), N);
    cf_fanout_answer(fds, idx, N);
    cf_join();
    return 0;
}
