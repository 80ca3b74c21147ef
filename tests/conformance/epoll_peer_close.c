/* epoll after the peer closed: EPOLLIN|EPOLLRDHUP (and EPOLLOUT), no EPOLLHUP until this side
 * shuts down writing too; EPOLLHUP is reported even when not asked for.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "last", 4);
    close(fd);
    cf_post();
}

int main(void)
{
    char buf[8];
    cf_start();
    int s = cf_serve(client);
    int all = epoll_create1(0), none = epoll_create1(0);
    CHECK(all >= 0 && none >= 0);
    cf_epoll_ctl(all, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 1);
    cf_epoll_ctl(none, EPOLL_CTL_ADD, s, 0, 2);
    cf_wait();
    cf_epoll_report("peer closed", all, -1);
    cf_epoll_report("nothing asked", none, 0);
    EXPECT_RET("read", read(s, buf, sizeof buf), 4);
    EXPECT_RET("read EOF", read(s, buf, sizeof buf), 0);
    cf_epoll_report("after EOF", all, 0);
    EXPECT_RET("shutdown SHUT_WR", shutdown(s, SHUT_WR), 0);
    cf_epoll_report("both directions closed", all, 0);
    cf_epoll_report("nothing asked", none, 0);
    close(s);
    close(all);
    close(none);
    cf_join();
    return 0;
}
