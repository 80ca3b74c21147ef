/* SO_RCVLOWAT: poll and epoll report input only once that many bytes are there, a blocking
 * read waits for that many (or as many as it asked for, if fewer), a non-blocking one returns
 * what there is, and the end of the stream ends the wait.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char buf[100];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_fill(buf, sizeof buf, 0, 4);
    cf_write_all(fd, buf, 10);
    cf_post();
    cf_wait();
    cf_write_all(fd, buf + 10, 90);
    cf_post();
    cf_wait();
    /* A blocking read takes the first piece and waits for more. (TCP wakes it only
     * once SO_RCVLOWAT bytes more came: the second piece brings them.) */
    cf_write_all(fd, buf, 60);
    usleep(50000);
    cf_write_all(fd, buf, 100);
    cf_wait();
    cf_write_all(fd, buf, 30);
    cf_post();
    cf_wait();
    cf_write_all(fd, buf, 30);
    cf_post();
    cf_wait();
    cf_write_all(fd, buf, 20);
    usleep(50000);
    close(fd);
}

static void show(int s, int ep, const char *when)
{
    struct pollfd p = {.fd = s, .events = POLLIN};
    CHECK(poll(&p, 1, 0) >= 0);
    printf("%s: poll %s, ", when, cf_poll_str(p.revents));
    cf_epoll_report("epoll", ep, 0);
}

int main(void)
{
    char buf[200];
    int lowat = 100, got = 0;
    socklen_t len = sizeof got;
    cf_start();
    int s = cf_serve(client);
    CHECK(setsockopt(s, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat) == 0);
    CHECK(getsockopt(s, SOL_SOCKET, SO_RCVLOWAT, &got, &len) == 0);
    printf("SO_RCVLOWAT %d\n", got);
    int ep = epoll_create1(0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 1);
    cf_wait();
    show(s, ep, "10 bytes");
    cf_post();
    cf_wait();
    show(s, ep, "100 bytes");
    EXPECT_RET("read", read(s, buf, sizeof buf), 100);
    cf_post();
    EXPECT_RET("blocking read of 60, then 100", read(s, buf, sizeof buf), 160);
    cf_post();
    cf_wait();
    cf_set_nonblock(s, true);
    EXPECT_RET("non-blocking read of 30", read(s, buf, sizeof buf), 30);
    cf_set_nonblock(s, false);
    cf_post();
    cf_wait();
    EXPECT_RET("blocking read asking for 30", read(s, buf, 30), 30);
    cf_post();
    EXPECT_RET("blocking read that EOF ends", read(s, buf, sizeof buf), 20);
    EXPECT_RET("EOF", read(s, buf, sizeof buf), 0);
    close(s);
    cf_join();
    return 0;
}
