/* EPOLLRDHUP reports the peer's shutdown(SHUT_WR) together with EPOLLIN, stays reported (level
 * triggered) after the data and the EOF were read, and comes without EPOLLHUP.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char c;
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "x", 1);
    EXPECT_RET("shutdown SHUT_WR", shutdown(fd, SHUT_WR), 0);
    cf_post();
    cf_read_exact(fd, &c, 1);
    close(fd);
}

int main(void)
{
    char buf[4];
    cf_start();
    int s = cf_serve(client);
    int ep = epoll_create1(0);
    CHECK(ep >= 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLRDHUP, 2);
    cf_wait();
    cf_epoll_report("peer shut down writing", ep, -1);
    EXPECT_RET("read", read(s, buf, sizeof buf), 1);
    EXPECT_RET("read EOF", read(s, buf, sizeof buf), 0);
    cf_epoll_report("after reading", ep, 0);
    cf_epoll_ctl(ep, EPOLL_CTL_MOD, s, EPOLLIN | EPOLLRDHUP | EPOLLOUT, 2);
    cf_epoll_report("with EPOLLOUT", ep, 0);
    cf_write_all(s, "y", 1);
    close(s);
    close(ep);
    cf_join();
    return 0;
}
