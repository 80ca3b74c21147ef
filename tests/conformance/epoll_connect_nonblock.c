/* A nonblocking connect watched through epoll, as event loops do: registered for EPOLLOUT
 * while the connect is in progress, level-triggered in one set and edge-triggered in
 * another (registered before and after connect()), each reports the end of the connect once
 * (the edge-triggered one only once), then the request and the answer flow.
 * usmc-expect: accelerated data */
#include "common.h"

static void server(void *arg)
{
    char buf[4];
    int s = cf_accept(*(int *)arg);
    cf_read_exact(s, buf, 4);
    CHECK(memcmp(buf, "ping", 4) == 0);
    cf_write_all(s, "pong", 4);
    CHECK(cf_read_full(s, buf, sizeof(buf)) == 0);
    close(s);
}

int main(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    char buf[4];

    cf_start();
    int l = cf_listen(AF_INET);
    cf_loopback(AF_INET, cf_port(l), &ss, &len);
    cf_spawn(server, &l);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(fd >= 0);
    int lt = epoll_create1(0), et = epoll_create1(0), early = epoll_create1(0);
    CHECK(lt >= 0 && et >= 0 && early >= 0);
    cf_epoll_ctl(early, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT | EPOLLET, 3);
    int r = connect(fd, (struct sockaddr *)&ss, len);
    CHECK(r == 0 || errno == EINPROGRESS);
    cf_epoll_ctl(lt, EPOLL_CTL_ADD, fd, EPOLLOUT, 1);
    cf_epoll_ctl(et, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT | EPOLLET, 2);
    CHECK(cf_epoll_report("level-triggered, connected", lt, -1) == 1);
    CHECK(cf_epoll_report("level-triggered, again", lt, 0) == 1);
    CHECK(cf_epoll_report("edge-triggered, connected", et, -1) == 1);
    CHECK(cf_epoll_report("edge-triggered, nothing new", et, 0) == 0);
    CHECK(cf_epoll_report("registered before connect", early, -1) == 1);
    int err = -1;
    socklen_t elen = sizeof(err);
    EXPECT_RET("getsockopt SO_ERROR", getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen), 0);
    printf("SO_ERROR: %d\n", err);
    cf_epoll_ctl(lt, EPOLL_CTL_MOD, fd, EPOLLIN, 1);
    EXPECT_RET("write", write(fd, "ping", 4), 4);
    CHECK(cf_epoll_report("answer, level-triggered", lt, -1) == 1);
    CHECK(cf_epoll_report("answer, edge-triggered", et, -1) == 1);
    CHECK(cf_epoll_report("answer, registered before connect", early, -1) == 1);
    EXPECT_RET("read", read(fd, buf, 4), 4);
    CHECK(memcmp(buf, "pong", 4) == 0);
    printf("client got pong\n");
    close(fd);
    close(lt);
    close(et);
    close(early);
    cf_join();
    return 0;
}
