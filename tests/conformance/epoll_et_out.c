/* Edge-triggered EPOLLOUT: one event when registered writable, none while nothing changes or
 * while full, one when the peer's reading makes room.
 * usmc-expect: accelerated data */
#include "common.h"

static void server(void *arg)
{
    int s = cf_accept(*(int *)arg);
    cf_post(); /* accepted: the client may fill the connection (cf_fill_until_full) */
    cf_wait();
    uint64_t n = cf_recv_pattern(s, 1 << 16, 37);
    CHECK(n == cf_wait_u64());
    printf("server received everything\n");
    close(s);
}

int main(void)
{
    cf_start();
    int l = cf_listen(AF_INET);
    cf_spawn(server, &l);
    int fd = cf_connect(AF_INET, cf_port(l));
    cf_wait();
    int ep = epoll_create1(0);
    CHECK(ep >= 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, fd, EPOLLOUT | EPOLLET, 4);
    CHECK(cf_epoll_report("registered", ep, 0) == 1);
    CHECK(cf_epoll_report("nothing changed", ep, 0) == 0);
    uint64_t off = cf_fill_until_full(fd, 0, 37);
    CHECK(cf_epoll_report("full", ep, 0) == 0);
    cf_post();
    CHECK(cf_epoll_report("peer draining", ep, -1) == 1);
    close(fd);
    close(ep);
    cf_post_u64(off);
    cf_join();
    return 0;
}
