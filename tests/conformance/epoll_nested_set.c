/* An epoll set holding an accelerated socket, itself registered in a second set: the outer
 * set reports the inner one readable when the socket's bytes come (level-triggered and
 * edge-triggered), and the inner set then reports the socket; once the bytes are read and
 * the inner set looked at, the outer one reports nothing.
 * usmc-expect: accelerated data */
#include "common.h"

int main(void)
{
    char buf[16];
    cf_start();
    int s = cf_serve(cf_cued_writer);
    cf_set_nonblock(s, true);
    int inner = epoll_create1(0), outer = epoll_create1(0);
    CHECK(inner >= 0 && outer >= 0);
    cf_epoll_ctl(inner, EPOLL_CTL_ADD, s, EPOLLIN, 42);
    cf_epoll_ctl(outer, EPOLL_CTL_ADD, inner, EPOLLIN, 7);
    cf_epoll_report("outer, nothing yet", outer, 0);
    cf_cue_write();
    cf_epoll_report("outer", outer, 5000);
    cf_epoll_report("inner", inner, 0);
    cf_epoll_report("outer again", outer, 0);
    EXPECT_RET("read", read(s, buf, sizeof buf), 4);
    /* As a loop does once it read what its inner set reported (the library's set stays
     * readable to the outer one until a wait in it looks again). */
    cf_epoll_report("inner after read", inner, 0);
    cf_epoll_report("outer after read", outer, 0);

    cf_epoll_ctl(outer, EPOLL_CTL_MOD, inner, EPOLLIN | EPOLLET, 8);
    cf_epoll_ctl(inner, EPOLL_CTL_MOD, s, EPOLLIN | EPOLLET, 43);
    cf_cue_write();
    cf_epoll_report("outer, edge", outer, 5000);
    cf_epoll_report("inner, edge", inner, 0);
    EXPECT_RET("read", read(s, buf, sizeof buf), 4);
    cf_cue_close();
    close(s);
    close(inner);
    close(outer);
    cf_join();
    return 0;
}
