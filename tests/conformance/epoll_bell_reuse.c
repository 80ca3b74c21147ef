/* Connections one after another through the same epoll sets on both ends, so that each
 * takes over the doorbell end, and the set's watch of it, that the one before left. The
 * server serves every fifth connection with blocking reads, outside any set, so that the
 * watch its set keeps of that doorbell end hears rings meant for no registration; and every
 * seventh through a second set, so that the end is watched from there while the first set
 * still keeps it. No wake-up may be lost, and every byte arrives exactly.
 * usmc-expect: accelerated data
 * usmc-env: USMC_BUSY_POLL_US=0 */
#include "common.h"

#define CONNS 300
#define ROUNDS 8

static void client(void *arg)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);

    for (uint32_t c = 0; c < CONNS; c++) {
        int fd = cf_connect(AF_INET, *(uint16_t *)arg);
        cf_epoll_watch_in(ep, fd, c);
        cf_epoll_increments(ep, fd, c * ROUNDS, ROUNDS);
        close(fd);
    }
    close(ep);
    printf("%d connections of %d round trips\n", CONNS, ROUNDS);
}

int main(void)
{
    char buf[4];
    cf_start();
    int l = cf_listen_spawn(client);
    int sets[2] = {epoll_create1(EPOLL_CLOEXEC), epoll_create1(EPOLL_CLOEXEC)};
    for (int c = 0; c < CONNS; c++) {
        int s = cf_accept(l);
        int ep = c % 5 == 4 ? -1 : sets[c % 7 == 6];
        if (ep >= 0)
            cf_epoll_watch_in(ep, s, (uint64_t)c);
        for (int i = 0; i < ROUNDS; i++) {
            uint32_t v;
            if (ep >= 0)
                cf_epoll_read_exact(ep, s, buf, 4);
            else
                cf_read_exact(s, buf, 4);
            memcpy(&v, buf, sizeof(v));
            if (v != (uint32_t)(c * ROUNDS + i))
                FAIL("connection %d, round %d: got %u", c, i, v);
            v++;
            memcpy(buf, &v, sizeof(v));
            cf_write_all(s, buf, 4);
        }
        /* The client closes first: its last rings come while we still watch. */
        if (ep >= 0) {
            struct epoll_event ev;
            if (epoll_wait(ep, &ev, 1, 10000) != 1)
                FAIL("connection %d: its end went unreported", c);
        }
        if (read(s, buf, 1) != 0)
            FAIL("connection %d: no end of stream", c);
        close(s);
    }
    close(sets[0]);
    close(sets[1]);
    close(l);
    cf_join();
    return 0;
}
