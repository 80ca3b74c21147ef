/* EPOLLONESHOT: one event, then silence whatever arrives, until EPOLL_CTL_MOD re-arms it; a
 * re-armed registration reports data already queued.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    for (int i = 0; i < 3; i++) {
        cf_wait();
        cf_write_all(fd, "abcd", 4);
        cf_post();
    }
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[16];
    cf_start();
    int s = cf_serve(client);
    int ep = epoll_create1(0);
    CHECK(ep >= 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLONESHOT, 5);
    cf_post();
    cf_wait();
    CHECK(cf_epoll_report("first data", ep, -1) == 1);
    CHECK(cf_epoll_report("disarmed, data unread", ep, 0) == 0);
    cf_post();
    cf_wait();
    CHECK(cf_epoll_report("disarmed, more data", ep, 0) == 0);
    cf_epoll_ctl(ep, EPOLL_CTL_MOD, s, EPOLLIN | EPOLLONESHOT, 6);
    CHECK(cf_epoll_report("re-armed", ep, 0) == 1);
    EXPECT_RET("read", read(s, buf, sizeof buf), 8);
    cf_epoll_ctl(ep, EPOLL_CTL_MOD, s, EPOLLIN | EPOLLONESHOT, 7);
    CHECK(cf_epoll_report("re-armed, nothing queued", ep, 0) == 0);
    cf_post();
    cf_wait();
    CHECK(cf_epoll_report("new data", ep, -1) == 1);
    CHECK(cf_epoll_report("disarmed again", ep, 0) == 0);
    EXPECT_RET("read", read(s, buf, sizeof buf), 4);
    cf_post();
    close(s);
    close(ep);
    cf_join();
    return 0;
}
