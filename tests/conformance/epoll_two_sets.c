/* One socket in two epoll sets, level-triggered in one and edge-triggered in the other: both
 * report an arrival; removing it from one leaves the other working.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    for (int i = 0; i < 2; i++) {
        cf_wait();
        cf_write_all(fd, "data", 4);
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
    int lt = epoll_create1(0), et = epoll_create1(0);
    CHECK(lt >= 0 && et >= 0);
    cf_epoll_ctl(lt, EPOLL_CTL_ADD, s, EPOLLIN, 1);
    cf_epoll_ctl(et, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLET, 2);
    cf_post();
    cf_wait();
    cf_epoll_report("level set", lt, -1);
    cf_epoll_report("edge set", et, -1);
    cf_epoll_report("level set again", lt, 0);
    cf_epoll_report("edge set again", et, 0);
    EXPECT_RET("read", read(s, buf, sizeof buf), 4);
    cf_epoll_ctl(lt, EPOLL_CTL_DEL, s, 0, 0);
    cf_post();
    cf_wait();
    cf_epoll_report("level set after DEL", lt, 0);
    cf_epoll_report("edge set", et, -1);
    EXPECT_RET("read", read(s, buf, sizeof buf), 4);
    cf_post();
    close(s);
    close(lt);
    close(et);
    cf_join();
    return 0;
}
