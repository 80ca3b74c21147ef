/* A thousand connections one after another, each with a few round trips through epoll on
 * both ends, so that each takes over the shared memory and doorbells the one before it left:
 * whatever the connections before left in a doorbell, no wake-up of the next may be lost.
 * Without busy-polling every wait sleeps, so every message rings.
 * usmc-expect: accelerated data
 * usmc-env: USMC_BUSY_POLL_US=0 */
#include "common.h"

#define CONNS 1000
#define ROUNDS 2

static void client(void *arg)
{
    for (uint32_t c = 0; c < CONNS; c++) {
        int fd = cf_connect(AF_INET, *(uint16_t *)arg);
        int ep = epoll_create1(EPOLL_CLOEXEC);
        cf_epoll_watch_in(ep, fd, 1);
        cf_epoll_increments(ep, fd, c * ROUNDS, ROUNDS);
        close(ep);
        close(fd);
    }
    printf("%d connections of %d round trips\n", CONNS, ROUNDS);
}

int main(void)
{
    char buf[4];
    cf_start();
    int l = cf_listen_spawn(client);
    for (int c = 0; c < CONNS; c++) {
        int s = cf_accept(l);
        int ep = epoll_create1(EPOLL_CLOEXEC);
        cf_epoll_watch_in(ep, s, 2);
        for (int i = 0; i < ROUNDS; i++) {
            uint32_t v;
            cf_epoll_read_exact(ep, s, buf, 4);
            memcpy(&v, buf, sizeof(v));
            v++;
            memcpy(buf, &v, sizeof(v));
            cf_write_all(s, buf, 4);
        }
        close(ep);
        close(s);
    }
    close(l);
    cf_join();
    return 0;
}
