/* An epoll_wait blocked on an idle connection wakes when the peer shuts down writing, with
 * EPOLLIN|EPOLLRDHUP.
 * usmc-expect: accelerated */
#include "common.h"

static void client(void *arg)
{
    char c;
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    cf_wait_sleeping(getppid(), getppid());
    CHECK(shutdown(fd, SHUT_WR) == 0);
    CHECK(read(fd, &c, 1) == 0);
    close(fd);
}

int main(void)
{
    char c;
    cf_start();
    int s = cf_serve(client);
    int ep = epoll_create1(0);
    CHECK(ep >= 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLRDHUP, 9);
    cf_post();
    CHECK(cf_epoll_report("blocked epoll_wait", ep, -1) == 1);
    EXPECT_RET("read", read(s, &c, 1), 0);
    close(s);
    close(ep);
    cf_join();
    return 0;
}
