/* Prefork: one listening socket inherited by two workers, each waiting for it in its own
 * epoll set, as nginx's workers do. The kernel hands a connection to either worker, while
 * its client's proposal reaches the one that took the client's control channel.
 *
 * usage: prefork alternate|stopped
 *   alternate  the workers take turns: worker 0 accepts the first connection (and with it
 *              the client's channel), worker 1 every second one after that. Each connection
 *              echoes a stream of its own, exactly, accelerated on both sides: worker 1 gets
 *              each proposal handed over by worker 0 (run.sh counts the handoffs).
 *   stopped    the same with worker 0 stopped (SIGSTOP) while worker 1 accepts: nobody hands
 *              the proposals over, yet each connection carries its bytes exactly, as plain
 *              TCP, within the bounded waits; once worker 0 runs again, handoffs resume. */
#include "faults.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define STREAM 20000u
#define TURNS 40

/* A worker sleeps in its epoll set, listening socket or not, until told to accept one
 * connection; then it echoes that connection to its end and says so. */
static _Noreturn void worker(int lfd, struct fl_chan *ch)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ch->fd[1]};
    char buf[65536];

    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd[1], &ev) < 0)
        FAIL("epoll: %s", fl_errname(errno));
    /* In the set once, as a worker starts: the set then answers siblings' asks. */
    ev = (struct epoll_event){.events = EPOLLIN, .data.fd = lfd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0 || epoll_ctl(ep, EPOLL_CTL_DEL, lfd, NULL) < 0)
        FAIL("epoll_ctl listener: %s", fl_errname(errno));
    for (;;) {
        int n = epoll_wait(ep, &ev, 1, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 1)
            FAIL("epoll_wait: %d %s", n, fl_errname(errno));
        if (ev.data.fd == ch->fd[1]) {
            fl_wait(ch);
            ev = (struct epoll_event){.events = EPOLLIN, .data.fd = lfd};
            if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
                FAIL("epoll_ctl: %s", fl_errname(errno));
            continue;
        }
        int c = accept(lfd, NULL, NULL);
        if (c < 0 && errno == EAGAIN)
            continue;
        if (c < 0)
            FAIL("accept: %s", fl_errname(errno));
        epoll_ctl(ep, EPOLL_CTL_DEL, lfd, NULL);
        ssize_t r;
        while ((r = read(c, buf, sizeof(buf))) > 0)
            if (write(c, buf, (size_t)r) != r)
                FAIL("echo write: %s", fl_errname(errno));
        if (r < 0)
            FAIL("echo read: %s", fl_errname(errno));
        close(c);
        fl_post(ch, 1);
    }
}

/* One connection taken by worker w: its stream comes back exactly. */
static void turn(struct fl_chan *ch, uint16_t port, unsigned i)
{
    fl_post(ch, 1);
    int fd = fl_connect(port);
    fl_send_stream(fd, false, 0, STREAM, i);
    if (shutdown(fd, SHUT_WR) < 0)
        FAIL("shutdown: %s", fl_errname(errno));
    fl_recv_stream(fd, false, 0, STREAM, i);
    fl_expect_eof(fd, false);
    close(fd);
    fl_wait(ch);
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "alternate") && strcmp(argv[1], "stopped")))
        FAIL("usage: prefork alternate|stopped");
    bool stopped = !strcmp(argv[1], "stopped");
    uint16_t port;
    int lfd = fl_listen(&port);
    struct fl_chan ch[2];
    pid_t w[2];

    if (fcntl(lfd, F_SETFL, O_NONBLOCK) < 0)
        FAIL("fcntl: %s", fl_errname(errno));
    for (int k = 0; k < 2; k++) {
        fl_chan_init(&ch[k]);
        if ((w[k] = fl_fork()) == 0) {
            fl_chan_side(&ch[k], 1);
            worker(lfd, &ch[k]);
        }
        fl_chan_side(&ch[k], 0);
    }
    close(lfd);

    turn(&ch[0], port, 0);
    if (stopped) {
        if (kill(w[0], SIGSTOP) < 0)
            FAIL("SIGSTOP: %s", fl_errname(errno));
        uint64_t t0 = fl_now_ms();
        for (unsigned i = 1; i <= 3; i++)
            turn(&ch[1], port, i);
        printf("3 connections beside a stopped sibling in %llu ms\n",
               (unsigned long long)(fl_now_ms() - t0));
        if (kill(w[0], SIGCONT) < 0)
            FAIL("SIGCONT: %s", fl_errname(errno));
    }
    for (unsigned i = 1; i < TURNS; i++)
        turn(&ch[i % 2], port, 100 + i);
    printf("%u connections, every stream exact\n", TURNS + (stopped ? 3 : 0));
    for (int k = 0; k < 2; k++) {
        kill(w[k], SIGKILL);
        fl_reap(w[k]);
    }
    return 0;
}
