/* An event loop that modifies its registration for every message it writes (wrk and redis's
 * ae do: writable on, writable off) while its peer writes: each wait finds the byte there,
 * so no wait sleeps, and nothing may ask the peer to ring.
 * usmc-expect: accelerated data
 * usmc-doorbells-at-most: 0 */
#include "common.h"

#define ROUNDS 200

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);

    for (int i = 0; i < ROUNDS; i++) {
        cf_wait();
        cf_write_all(fd, "m", 1);
        cf_post();
    }
    cf_wait();
    close(fd);
}

int main(void)
{
    cf_start();
    int s = cf_serve(client), ep = epoll_create1(EPOLL_CLOEXEC), got = 0;
    struct epoll_event in = {.events = EPOLLIN, .data.u32 = 1};
    struct epoll_event inout = {.events = EPOLLIN | EPOLLOUT, .data.u32 = 1};

    CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, s, &in) == 0);
    for (int i = 0; i < ROUNDS; i++) {
        struct epoll_event ev;
        char c;

        CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s, &inout) == 0);
        CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s, &in) == 0);
        cf_post(); /* the peer's next byte */
        cf_wait();
        CHECK(epoll_wait(ep, &ev, 1, 10000) == 1 && ev.events == EPOLLIN);
        CHECK(read(s, &c, 1) == 1 && c == 'm');
        got++;
    }
    printf("bytes read after a wait: %d\n", got);
    close(s);
    cf_post();
    cf_join();
    return 0;
}
