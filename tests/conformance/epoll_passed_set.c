/* An epoll set passed (SCM_RIGHTS) to another program after an accelerated socket was
 * registered in it: whatever a wait there returns carries data the application registered,
 * never anything of the library's. (That program does not hold the socket's shared-memory
 * state, so whether it hears of the socket's bytes is not compared: only the pipe's.)
 * usmc-expect: accelerated data */
#include "common.h"

static int sp[2];

/* The other program: waits in the set it is sent until the pipe is reported, for 5 s at most. */
static int receive(int unix_fd)
{
    int ep, unknown = 0, pipe_seen = 0;
    struct epoll_event ev[8];
    struct timespec start, now;

    cf_recv_fds(unix_fd, &ep, 1);
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        int n = epoll_wait(ep, ev, 8, 50);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 == 1)
                pipe_seen = 1;
            else if (ev[i].data.u64 != 42)
                unknown++;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (!pipe_seen && now.tv_sec - start.tv_sec < 5);
    printf("receiver: pipe reported %d, unknown data %d\n", pipe_seen, unknown);
    return 0;
}

int main(int argc, char **argv)
{
    char buf[16], arg[16];

    if (argc == 3 && !strcmp(argv[1], "receive"))
        return receive(atoi(argv[2]));
    cf_start();
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
    int s = cf_serve(cf_cued_writer);
    int ep = epoll_create1(EPOLL_CLOEXEC), p[2];
    CHECK(ep >= 0 && pipe(p) == 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 42);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN, 1);
    pid_t child = cf_fork();
    if (child == 0) {
        snprintf(arg, sizeof arg, "%d", sp[1]);
        execl("/proc/self/exe", argv[0], "receive", arg, (char *)NULL);
        _exit(127);
    }
    /* Two waits that find nothing: the library, were it asked, would now watch the socket
     * for good, and its bytes ring while only the other program waits in the set. */
    cf_epoll_report("parent, nothing yet", ep, 50);
    cf_epoll_report("parent, nothing yet", ep, 50);
    cf_send_fds(sp[0], &ep, 1);
    cf_cue_write();
    usleep(300000);
    CHECK(write(p[1], "p", 1) == 1);
    CHECK(cf_wait_child(child) == 0);
    cf_epoll_report("parent", ep, 5000);
    EXPECT_RET("read", read(s, buf, sizeof buf), 4);
    cf_cue_close();
    close(s);
    close(ep);
    cf_join();
    return 0;
}
