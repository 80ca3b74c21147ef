/* Edge-triggered epoll sees the peer's FIN, then the RST its kernel sends when the process,
 * which had asked for SO_LINGER {1, 0}, is killed: a second edge, with EPOLLHUP and EPOLLERR.
 * usmc-expect: accelerated data */
#include "common.h"

int main(void)
{
    char buf[8];
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    int go[2], shut[2];
    CHECK(pipe(go) == 0 && pipe(shut) == 0);
    pid_t peer = cf_fork();
    if (peer == 0) {
        struct linger lg = {1, 0};
        int fd = cf_connect(AF_INET, port);
        cf_write_all(fd, "data", 4);
        CHECK(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
        CHECK(shutdown(fd, SHUT_WR) == 0);
        CHECK(write(shut[1], "s", 1) == 1);
        CHECK(read(go[0], buf, 1) == 1);
        raise(SIGKILL);
    }
    int s = cf_accept(l);
    cf_read_exact(s, buf, 4);
    CHECK(read(shut[0], buf, 1) == 1);
    int ep = epoll_create1(0);
    CHECK(ep >= 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, 1);
    cf_epoll_report("peer shut down", ep, -1);
    EXPECT_RET("read", read(s, buf, sizeof buf), 0);
    cf_epoll_report("after the end of file", ep, 0);
    CHECK(write(go[1], "k", 1) == 1);
    printf("peer exit status: %d\n", cf_wait_child(peer));
    cf_epoll_report("peer killed", ep, -1);
    cf_epoll_report("again", ep, 0);
    close(s);
    close(ep);
    close(l);
    return 0;
}
