/* epoll after the peer reset the connection: EPOLLERR|EPOLLHUP with the rest, SO_ERROR gives
 * ECONNRESET once and is then cleared.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    struct linger lg = {1, 0};
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "data", 4);
    cf_wait();
    CHECK(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    close(fd);
    cf_post();
}

int main(void)
{
    char buf[8];
    int err = -1;
    socklen_t len = sizeof err;
    cf_start();
    int s = cf_serve(client);
    cf_read_exact(s, buf, 4);
    int ep = epoll_create1(0);
    CHECK(ep >= 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, 1);
    cf_epoll_report("before", ep, 0);
    cf_post();
    cf_wait();
    cf_epoll_report("peer reset", ep, -1);
    EXPECT_RET("SO_ERROR", getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len), 0);
    printf("error: %s\n", err ? cf_errname(err) : "0");
    CHECK(err == ECONNRESET);
    EXPECT_RET("SO_ERROR again", getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len), 0);
    printf("error: %d\n", err);
    EXPECT_RET("read", read(s, buf, sizeof buf), 0);
    close(s);
    close(ep);
    cf_join();
    return 0;
}
