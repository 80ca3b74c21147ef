/* Prefork: one listening socket inherited by two workers, each waiting for it in its own
 * epoll set, as nginx's workers do. The kernel hands a connection to either worker, while
 * its client's proposal reaches the one that took the client's control channel.
 *
 * usage: prefork alternate|nobody|poll|epoll|stopped|foreign|crowd|holder_exits|plain
 *   alternate  the workers take turns: worker 0 accepts the first connection (and with it
 *              the client's channel), worker 1 every second one after that. Each connection
 *              echoes a stream of its own, exactly, accelerated on both sides: worker 1 gets
 *              each proposal handed over by worker 0 (run.sh counts the handoffs).
 *   nobody     the same with workers that become nobody before they start, as nginx's do
 *              (as root; otherwise it exits 77: skipped), and a run directory inside one
 *              only root may enter (the program runs itself again so): they can no longer
 *              even look it up, and still hand proposals to each other. It checks the
 *              counts itself, since the counters live there.
 *   poll       the same with workers that wait in poll(), the listening socket always in
 *              the set (asking for nothing while it is not their turn).
 *   epoll      the same with workers that serve each connection through their epoll set,
 *              edge-triggered: worker 1 watches each handed-over connection's doorbell end,
 *              received anew and likely under the descriptor of the one before, from the
 *              set that watched that one.
 *   stopped    the same with worker 0 stopped (SIGSTOP) while worker 1 accepts: nobody hands
 *              the first proposal over, and worker 1 marks the port; that connection and
 *              every later one (the mark lasts longer than the test) carry their bytes
 *              exactly as plain TCP, the first after a wait bounded by the handoff's.
 *   foreign    while worker 0 holds the proposal of a connection nobody accepted yet, a
 *              process that does not accept on the port asks worker 0 for it, naming the
 *              right 4-tuple: it is told "not here" and gets no descriptor, and the
 *              connection, accepted by worker 1 afterwards, is handed over and accelerated.
 *   crowd      before worker 1 first asks, a process that accepts nothing opens more
 *              connections to worker 0's handoff socket than it keeps for its siblings, and
 *              never asks on them: worker 1's connection still gets in, and the alternation
 *              goes on as above, every connection handed over and accelerated.
 *   holder_exits worker 1 takes a connection handed over by worker 0, which is then killed:
 *              its client's channel hangs up while the client waits (past the 200 ms it
 *              takes to look) for worker 1's echo, which worker 1 sends late. The connection
 *              lives on with worker 1, exactly, through shared memory, both ways: what the
 *              client sends afterwards still reaches worker 1.
 *   twin       worker 0 holds a forged proposal whose socket lives in a network namespace
 *              of its own, where it has the 4-tuple of the next connection, one from a plain
 *              client that worker 1 accepts: no client counted a proposal to the port that
 *              is not settled (the forger sent its own on the channel), so worker 1 asks
 *              nobody and takes it as plain; it stays plain and exact and the forged
 *              segment pending; the next accelerated connection worker 1 takes is handed
 *              over as ever. (A forger that also moved the count would be asked about,
 *              and worker 0's check of the asker's namespace hands nothing over.)
 *   plain      once each worker took an accelerated connection (worker 1's handed over) and
 *              no client proposed for longer than a client waits for its attach (run.sh
 *              shortens that wait), worker 1 takes connections from plain clients (system
 *              calls only) without asking worker 0 about them; then an accelerated client
 *              comes again, and worker 1 asks for its proposal again and is handed it. */
#include "faults.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clc.h"

#define STREAM 20000u
#define TURNS 40
/* More than a worker keeps of its siblings' connections (handoff.c's IN_MAX). */
#define CROWD 80

/* plain: connections from plain clients, and how long no client proposes before them
 * (longer than run.sh's USMC_HANDSHAKE_TIMEOUT_MS). */
#define PLAIN_CONNS 10
#define PLAIN_QUIET_MS 500

/* twin: the forged segment's rings. */
#define TWIN_RING 4096u

/* holder_exits: how long worker 1 keeps a connection waiting before it echoes. */
static unsigned echo_delay_ms;
/* epoll: workers echo through their epoll set. */
static bool echo_in_set;

/* Echoes connection c to its end. */
static void echo(int c)
{
    char buf[65536];
    ssize_t r;

    if (echo_delay_ms)
        fl_sleep_ms(echo_delay_ms);
    while ((r = read(c, buf, sizeof(buf))) > 0)
        if (write(c, buf, (size_t)r) != r)
            FAIL("echo write: %s", fl_errname(errno));
    if (r < 0)
        FAIL("echo read: %s", fl_errname(errno));
    close(c);
}

/* Echoes connection c to its end, waiting for it in ep (edge-triggered). */
static void echo_epoll(int ep, int c)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.fd = c};
    char buf[65536];
    ssize_t r;

    if (fcntl(c, F_SETFL, O_NONBLOCK) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) < 0)
        FAIL("watching the connection: %s", fl_errname(errno));
    while ((r = read(c, buf, sizeof(buf))) != 0) {
        if (r > 0) {
            if (write(c, buf, (size_t)r) != r)
                FAIL("echo write: %s", fl_errname(errno));
            continue;
        }
        if (errno != EAGAIN)
            FAIL("echo read: %s", fl_errname(errno));
        int n = epoll_wait(ep, &ev, 1, 10000);
        if (n != 1 || ev.data.fd != c)
            FAIL("waiting for the connection: %d %s", n, n < 0 ? fl_errname(errno) : "");
    }
    close(c);
}

/* The connection waiting on the listener, or -1 when the sibling took it first. */
static int take(int lfd)
{
    int c = accept(lfd, NULL, NULL);

    if (c < 0 && errno != EAGAIN)
        FAIL("accept: %s", fl_errname(errno));
    return c;
}

/* The same worker waiting in poll(). */
static _Noreturn void poll_worker(int lfd, struct fl_chan *ch)
{
    struct pollfd pf[2] = {{ch->fd[1], POLLIN, 0}, {lfd, 0, 0}};

    for (;;) {
        int n = poll(pf, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            FAIL("poll: %d %s", n, fl_errname(errno));
        if (pf[0].revents) {
            fl_wait(ch);
            pf[1].events = POLLIN;
            continue;
        }
        int c = take(lfd);
        if (c < 0)
            continue;
        pf[1].events = 0;
        echo(c);
        fl_post(ch, 1);
    }
}

/* A worker sleeps in its epoll set, listening socket or not, until told to accept one
 * connection; then it echoes that connection to its end and says so. */
static _Noreturn void worker(int lfd, struct fl_chan *ch)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ch->fd[1]};

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
        int c = take(lfd);
        if (c < 0)
            continue;
        epoll_ctl(ep, EPOLL_CTL_DEL, lfd, NULL);
        if (echo_in_set)
            echo_epoll(ep, c);
        else
            echo(c);
        fl_post(ch, 1);
    }
}

/* Kills and reaps the n processes at pids. */
static void stop(const pid_t *pids, int n)
{
    for (int k = 0; k < n; k++) {
        kill(pids[k], SIGKILL);
        fl_reap(pids[k]);
    }
}

/* The stream of connection fd, taken by the worker behind ch, comes back exactly. */
static void exchange(struct fl_chan *ch, int fd, unsigned i)
{
    fl_send_stream(fd, false, 0, STREAM, i);
    if (shutdown(fd, SHUT_WR) < 0)
        FAIL("shutdown: %s", fl_errname(errno));
    fl_recv_stream(fd, false, 0, STREAM, i);
    fl_expect_eof(fd, false);
    close(fd);
    fl_wait(ch);
}

/* One connection taken by the worker behind ch. */
static void turn(struct fl_chan *ch, uint16_t port, unsigned i)
{
    fl_post(ch, 1);
    exchange(ch, fl_connect(port), i);
}

/* A connection to worker w's handoff socket (named after the run directory and its pid). */
static int handoff_connect(pid_t w)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the run directory's path */

    for (const char *p = fl_rundir(); *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1, "usmc-h-%016llx-%d",
             (unsigned long long)h, (int)w);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&sun, sizeof(sun)) < 0)
        FAIL("connecting to worker 0's handoff socket: %s", fl_errname(errno));
    return s;
}

/* A process that accepts nothing asks worker w for the proposal of the connection from
 * client_port to port. */
static void foreign_ask(pid_t w, uint16_t port, uint16_t client_port)
{
    struct clc_ask a = {.hdr = {CLC_EYECATCHER, CLC_ASK, CLC_VERSION, sizeof(a)}, .family = 4,
                        .server_port = port, .client_port = client_port, .seq = 1};
    union clc_msg m;
    char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    struct iovec iov = {&m, sizeof(m)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                        .msg_controllen = sizeof(cbuf)};

    a.server_ip[0] = a.client_ip[0] = 127;
    a.server_ip[3] = a.client_ip[3] = 1;
    int s = handoff_connect(w);
    if (send(s, &a, sizeof(a), 0) != (ssize_t)sizeof(a))
        FAIL("ask: %s", fl_errname(errno));
    ssize_t n = recvmsg(s, &mh, 0);
    if (n > 0 && (m.hdr.type != CLC_HANDOFF || m.handoff.found))
        FAIL("a process accepting nothing was handed a proposal");
    if (mh.msg_controllen)
        FAIL("a process accepting nothing was sent descriptors");
    printf("foreign ask: %s\n", n > 0 ? "answered \"not here\"" : "no answer");
    close(s);
}

struct twin_attack {
    const struct fl_forge *f;
    uint16_t port, victim_port;
};

static void twin_propose(void *arg)
{
    const struct twin_attack *at = arg;

    fl_forge_send(at->f, fl_netns_twin(at->port, at->victim_port));
}

/* twin, once worker 0 took this process's channel: see the top of the file. */
static void twin(pid_t *w, struct fl_chan *ch, uint16_t port)
{
    struct fl_actor attacker;
    struct fl_forge f;
    char ctl[4400];
    uint16_t victim_port = fl_free_port();

    /* The workers inherited the control socket of this process's listener. */
    fl_ctl_path(getpid(), ctl, sizeof(ctl));
    fl_forge_init(&f, ctl, 1 << 20, 0, TWIN_RING, 1);
    struct twin_attack at = {&f, port, victim_port};
    fl_actor_start(&attacker, twin_propose, &at);
    /* Worker 0 reads its channels, the forged one among them, as it accepts. */
    fl_post(&ch[0], 1);
    fl_probe_plain(port, 100);
    fl_wait(&ch[0]);
    fl_post(&ch[1], 1);
    int v = fl_raw_connect(fl_raw_socket(), port, victim_port);
    fl_send_stream(v, true, 0, STREAM, 7);
    if (shutdown(v, SHUT_WR) < 0)
        FAIL("shutdown: %s", fl_errname(errno));
    fl_recv_stream(v, true, 0, STREAM, 7);
    fl_expect_eof(v, true);
    close(v);
    fl_wait(&ch[1]);
    fl_forge_expect_pending(&f, "once the victim's connection ended");
    printf("the victim stayed plain and exact, the forged segment pending\n");
    fl_actor_end(&attacker);
    turn(&ch[1], port, 8);
    printf("then worker 1 was handed an accelerated connection, exact\n");
    stop(w, 2);
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "alternate") && strcmp(argv[1], "poll") &&
                      strcmp(argv[1], "stopped") && strcmp(argv[1], "foreign") &&
                      strcmp(argv[1], "epoll") &&
                      strcmp(argv[1], "crowd") &&
                      strcmp(argv[1], "holder_exits") && strcmp(argv[1], "nobody") &&
                      strcmp(argv[1], "plain") && strcmp(argv[1], "twin")))
        FAIL("usage: prefork alternate|nobody|poll|epoll|stopped|foreign|crowd|holder_exits|plain|"
             "twin");
    bool nobody = !strcmp(argv[1], "nobody");
    if (nobody && geteuid() != 0) {
        printf("not root: cannot make workers nobody\n");
        return 77;
    }
    if (nobody && !strstr(fl_rundir(), "/root-only/")) {
        char dir[4096], rd[4200];
        snprintf(dir, sizeof(dir), "%s/root-only", fl_rundir());
        snprintf(rd, sizeof(rd), "%s/rd", dir);
        if (mkdir(dir, 0700) < 0 || setenv("USMC_RUNDIR", rd, 1) < 0)
            FAIL("%s: %s", dir, fl_errname(errno));
        execv("/proc/self/exe", argv);
        FAIL("exec: %s", fl_errname(errno));
    }
    bool stopped = !strcmp(argv[1], "stopped");
    echo_in_set = !strcmp(argv[1], "epoll");
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
            if (k == 1 && !strcmp(argv[1], "holder_exits"))
                echo_delay_ms = 600;
            if (!strcmp(argv[1], "nobody") &&
                (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
                 setresuid(65534, 65534, 65534) < 0))
                FAIL("becoming nobody: %s", fl_errname(errno));
            if (!strcmp(argv[1], "poll"))
                poll_worker(lfd, &ch[k]);
            worker(lfd, &ch[k]);
        }
        fl_chan_side(&ch[k], 0);
    }
    close(lfd);

    turn(&ch[0], port, 0);
    if (!strcmp(argv[1], "holder_exits")) {
        /* Told before the connection: both workers are forked already. */
        fl_post(&ch[1], 1);
        int fd = fl_connect(port);
        /* The workers count in the file they share with us. */
        uint64_t give_up = fl_now_ms() + 5000;
        while (!fl_stat_self(STAT_HANDOFFS) && fl_now_ms() < give_up)
            fl_sleep_ms(1);
        if (!fl_stat_self(STAT_HANDOFFS))
            FAIL("worker 1 was not handed the connection");
        if (kill(w[0], SIGKILL) < 0 || fl_reap(w[0]) != 128 + SIGKILL)
            FAIL("killing worker 0");
        uint64_t t0 = fl_now_ms();
        fl_send_stream(fd, false, 0, STREAM, 1);
        fl_recv_stream(fd, false, 0, STREAM, 1);
        printf("worker 0 gone; worker 1 echoed after %llu ms, exact\n",
               (unsigned long long)(fl_now_ms() - t0));
        fl_send_stream(fd, false, STREAM, STREAM, 1);
        if (shutdown(fd, SHUT_WR) < 0)
            FAIL("shutdown: %s", fl_errname(errno));
        fl_recv_stream(fd, false, STREAM, STREAM, 1);
        fl_expect_eof(fd, false);
        close(fd);
        fl_wait(&ch[1]);
        printf("and echoed what came after, exact\n");
        stop(&w[1], 1);
        return 0;
    }
    if (!strcmp(argv[1], "plain")) {
        turn(&ch[1], port, 1);
        fl_sleep_ms(PLAIN_QUIET_MS);
        for (unsigned i = 0; i < PLAIN_CONNS; i++) {
            fl_post(&ch[1], 1);
            fl_probe_plain(port, 1000);
            fl_wait(&ch[1]);
        }
        printf("%u plain connections to worker 1, exact\n", PLAIN_CONNS);
        turn(&ch[1], port, 2);
        printf("then an accelerated one, exact\n");
        stop(w, 2);
        return 0;
    }
    if (!strcmp(argv[1], "twin")) {
        twin(w, ch, port);
        return 0;
    }
    if (!strcmp(argv[1], "foreign")) {
        /* Forked first: a fork settles a connection still waiting for its attach. */
        struct fl_chan fch;
        fl_chan_init(&fch);
        pid_t f = fl_fork();
        if (f == 0) {
            fl_chan_side(&fch, 1);
            foreign_ask(w[0], port, (uint16_t)fl_wait(&fch));
            fflush(stdout);
            _exit(0);
        }
        fl_chan_side(&fch, 0);
        int fd = fl_connect(port);
        fl_post(&fch, fl_local_port(fd));
        if (fl_reap(f) != 0)
            FAIL("the foreign asker failed");
        fl_post(&ch[1], 1);
        exchange(&ch[1], fd, 1);
        printf("then worker 1 took the connection, exact\n");
        stop(w, 2);
        return 0;
    }
    pid_t crowd = -1;
    if (!strcmp(argv[1], "crowd")) {
        struct fl_chan cch;
        fl_chan_init(&cch);
        if ((crowd = fl_fork()) == 0) {
            fl_chan_side(&cch, 1);
            for (int i = 0; i < CROWD; i++)
                handoff_connect(w[0]);
            fl_post(&cch, 1);
            pause();
            _exit(0);
        }
        fl_chan_side(&cch, 0);
        fl_wait(&cch);
        printf("%d silent connections to worker 0's handoff socket\n", CROWD);
    }
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
    if (crowd > 0)
        stop(&crowd, 1);
    printf("%u connections, every stream exact\n", TURNS + (stopped ? 3 : 0));
    if (nobody && (fl_stat_self(STAT_HANDOFFS) != TURNS / 2 ||
                   fl_stat_self(stat_side_id(SIDE_CLIENT, SIDE_ACCEL)) != TURNS))
        FAIL("%llu handoffs and %llu connections accelerated, expected %d and %d",
             (unsigned long long)fl_stat_self(STAT_HANDOFFS),
             (unsigned long long)fl_stat_self(stat_side_id(SIDE_CLIENT, SIDE_ACCEL)), TURNS / 2,
             TURNS);
    stop(w, 2);
    return 0;
}
