/* epoll reports EPOLLPRI for pending urgent data, level-triggered until the byte is read,
 * edge-triggered once per arrival, and wakes a wait for EPOLLPRI alone.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    usleep(50000);
    EXPECT_RET("urgent send", send(fd, "u", 1, MSG_OOB), 1);
    cf_wait();
    EXPECT_RET("urgent send", send(fd, "v", 1, MSG_OOB), 1);
    cf_post();
    cf_wait();
    cf_write_all(fd, "n", 1);
    close(fd);
}

int main(void)
{
    cf_start();
    int s = cf_serve(client);
    int lt = epoll_create1(0), et = epoll_create1(0), pri = epoll_create1(0);
    cf_epoll_ctl(lt, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLPRI, 1);
    cf_epoll_ctl(et, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLPRI | EPOLLET, 2);
    cf_epoll_ctl(pri, EPOLL_CTL_ADD, s, EPOLLPRI, 3);
    cf_post();
    cf_epoll_report("waiting for EPOLLPRI", pri, 10000);
    cf_epoll_report("level-triggered", lt, 0);
    cf_epoll_report("again", lt, 0);
    cf_epoll_report("edge-triggered", et, 0);
    cf_epoll_report("again", et, 0);
    cf_recv_oob(s, "urgent read", 0);
    cf_epoll_report("level-triggered after it", lt, 0);
    cf_epoll_report("EPOLLPRI alone after it", pri, 0);
    cf_post();
    cf_wait();
    cf_epoll_report("edge-triggered, the next", et, 0);
    cf_epoll_report("EPOLLPRI alone, the next", pri, 0);
    cf_post();
    char buf[4];
    long n = EXPECT_RET("read past the mark", cf_read_full(s, buf, sizeof buf), 1);
    printf("read '%.*s'\n", (int)n, buf);
    close(s);
    cf_join();
    return 0;
}
