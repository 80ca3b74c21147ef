/* Edge-triggered EPOLLIN fires once per arrival: it wakes a blocked epoll_wait, is not repeated
 * for data left unread, and fires again when more data arrives.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    cf_wait_sleeping(getppid(), getppid());
    cf_write_all(fd, "0123456789", 10);
    cf_wait();
    cf_write_all(fd, "abc", 3);
    cf_post();
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
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLET, 7);
    cf_epoll_report("empty", ep, 0);
    cf_post();
    CHECK(cf_epoll_report("blocked wait, data arrived", ep, -1) == 1);
    CHECK(cf_epoll_report("no new data", ep, 0) == 0);
    EXPECT_RET("read 4", read(s, buf, 4), 4);
    CHECK(cf_epoll_report("6 bytes left, no new data", ep, 0) == 0);
    cf_post();
    cf_wait();
    CHECK(cf_epoll_report("more data arrived", ep, -1) == 1);
    CHECK(cf_epoll_report("no new data", ep, 0) == 0);
    EXPECT_RET("read all", read(s, buf, sizeof buf), 9);
    CHECK(memcmp(buf, "456789abc", 9) == 0);
    cf_epoll_report("all read", ep, 0);
    cf_post();
    cf_epoll_report("peer closed", ep, -1);
    close(s);
    close(ep);
    cf_join();
    return 0;
}
