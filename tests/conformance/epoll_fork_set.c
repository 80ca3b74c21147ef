/* An epoll set made and filled before fork(): the child waits in it and is told of the
 * accelerated socket's bytes, with the data the parent registered; back in the parent, the
 * set still reports the socket's next bytes.
 * usmc-expect: accelerated data */
#include "common.h"

int main(void)
{
    char buf[16];
    cf_start();
    int s = cf_serve(cf_cued_writer);
    cf_set_nonblock(s, true);
    int ep = epoll_create1(0), p[2];
    CHECK(ep >= 0 && pipe(p) == 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 42);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN, 1);
    pid_t child = cf_fork();
    if (child == 0) {
        cf_cue_write();
        cf_epoll_report("child", ep, 5000);
        EXPECT_RET("child read", read(s, buf, sizeof buf), 4);
        cf_epoll_report("child again", ep, 0);
        _exit(0);
    }
    CHECK(cf_wait_child(child) == 0);
    cf_cue_write();
    cf_epoll_report("parent", ep, 5000);
    EXPECT_RET("parent read", read(s, buf, sizeof buf), 4);
    cf_cue_close();
    close(s);
    close(ep);
    cf_join();
    return 0;
}
