/* Many thousands of wake-ups through epoll on both ends, level-triggered on one side and
 * edge-triggered on the other, with epoll_ctl churn in between as event loops do: no wake-up
 * may be lost, however many came before.
 * usmc-expect: accelerated data */
#include "common.h"

#define ROUNDS 20000

/* Waits for fd to be readable through ep, then reads exactly n bytes (nonblocking). */
static void epoll_read(int ep, int fd, char *buf, size_t n)
{
    size_t got = 0;

    while (got < n) {
        struct epoll_event ev;
        int r = epoll_wait(ep, &ev, 1, 10000);
        if (r != 1)
            FAIL("epoll_wait returned %d after %zu of %zu bytes", r, got, n);
        ssize_t k;
        while (got < n && (k = read(fd, buf + got, n - got)) > 0)
            got += (size_t)k;
    }
}

static void client(void *arg)
{
    char buf[8];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    cf_epoll_watch_in(ep, fd, 1);
    for (uint32_t i = 0; i < ROUNDS; i++) {
        memcpy(buf, &i, sizeof(i));
        cf_write_all(fd, buf, 4);
        epoll_read(ep, fd, buf, 4);
        uint32_t back;
        memcpy(&back, buf, sizeof(back));
        if (back != i + 1)
            FAIL("round %u: got %u back", i, back);
    }
    close(fd);
    close(ep);
}

int main(void)
{
    char buf[8];
    cf_start();
    int s = cf_serve(client);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    cf_set_nonblock(s, true);
    for (uint32_t i = 0; i < ROUNDS; i++) {
        /* Register, wait, deregister: the churn of a loop that only watches what it needs. */
        cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 2);
        epoll_read(ep, s, buf, 4);
        cf_epoll_ctl(ep, EPOLL_CTL_DEL, s, 0, 0);
        uint32_t v;
        memcpy(&v, buf, sizeof(v));
        v++;
        memcpy(buf, &v, sizeof(v));
        cf_write_all(s, buf, 4);
    }
    printf("%d round trips\n", ROUNDS);
    close(s);
    close(ep);
    cf_join();
    return 0;
}
