/* Level-triggered EPOLLIN is reported for as long as unread data remains, and stops once it is
 * all read.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    cf_write_all(fd, "0123456789", 10);
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[16];
    cf_start();
    int s = cf_serve(client);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 1);
    cf_epoll_report("empty", ep, 0);
    cf_post();
    cf_wait();
    cf_epoll_report("data arrived", ep, -1);
    cf_epoll_report("again, nothing read", ep, 0);
    EXPECT_RET("read 4", read(s, buf, 4), 4);
    cf_epoll_report("6 bytes left", ep, 0);
    EXPECT_RET("read rest", read(s, buf, sizeof buf), 6);
    CHECK(cf_epoll_report("all read", ep, 0) == 0);
    cf_post();
    cf_epoll_report("peer closed", ep, -1);
    close(s);
    close(ep);
    cf_join();
    return 0;
}
