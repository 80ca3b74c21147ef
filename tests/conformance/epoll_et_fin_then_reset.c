/* epoll sees the peer's FIN, then its RST: edge-triggered, each is an edge of its own, the
 * second with EPOLLHUP and EPOLLERR; level-triggered, the RST adds those two at once.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    struct linger lg = {1, 0};
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "data", 4);
    cf_wait();
    CHECK(shutdown(fd, SHUT_WR) == 0);
    cf_wait();
    CHECK(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    close(fd);
    cf_post();
}

int main(void)
{
    char buf[8];
    cf_start();
    int s = cf_serve(client);
    cf_read_exact(s, buf, 4);
    int ep = epoll_create1(0);
    int lt = epoll_create1(0);
    CHECK(ep >= 0 && lt >= 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, 1);
    cf_epoll_ctl(lt, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLRDHUP, 2);
    cf_epoll_report("before", ep, 0);
    cf_post();
    cf_epoll_report("peer shut down", ep, -1);
    EXPECT_RET("read", read(s, buf, sizeof buf), 0);
    cf_epoll_report("after the end of file", ep, 0);
    cf_epoll_report("level-triggered", lt, 0);
    cf_post();
    cf_wait();
    cf_epoll_report("level-triggered, peer reset", lt, -1);
    cf_epoll_report("peer reset", ep, -1);
    cf_epoll_report("again", ep, 0);
    close(s);
    close(ep);
    close(lt);
    cf_join();
    return 0;
}
