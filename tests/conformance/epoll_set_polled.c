/* An epoll set holding an accelerated socket, waited for with poll() and select() as an
 * event loop embedded in another does: both report the set readable once the socket's bytes
 * come, and the set then reports the socket.
 * usmc-expect: accelerated data */
#include "common.h"

#include <sys/select.h>

int main(void)
{
    char buf[16];
    cf_start();
    int s = cf_serve(cf_cued_writer);
    cf_set_nonblock(s, true);
    int ep = epoll_create1(0);
    CHECK(ep >= 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 42);

    struct pollfd pf = {ep, POLLIN, 0};
    EXPECT_RET("poll, nothing yet", poll(&pf, 1, 0), 0);
    cf_cue_write();
    EXPECT_RET("poll", poll(&pf, 1, 5000), 1);
    printf("revents: %s\n", cf_poll_str(pf.revents));
    cf_epoll_report("set", ep, 0);
    EXPECT_RET("read", read(s, buf, sizeof buf), 4);
    cf_epoll_report("set after read", ep, 0);

    fd_set r;
    struct timeval tv = {0, 0};
    FD_ZERO(&r);
    FD_SET(ep, &r);
    EXPECT_RET("select, nothing yet", select(ep + 1, &r, NULL, NULL, &tv), 0);
    cf_cue_write();
    FD_ZERO(&r);
    FD_SET(ep, &r);
    tv.tv_sec = 5;
    EXPECT_RET("select", select(ep + 1, &r, NULL, NULL, &tv), 1);
    printf("set readable: %d\n", FD_ISSET(ep, &r) != 0);
    cf_epoll_report("set", ep, 0);
    EXPECT_RET("read", read(s, buf, sizeof buf), 4);
    cf_cue_close();
    close(s);
    close(ep);
    cf_join();
    return 0;
}
