/* A process is killed (SIGKILL: its library cleans nothing up) in the middle of transfers on
 * an accelerated connection. The survivor must learn it as TCP would tell it, within a
 * bound, and end up as it was before the connection: the same descriptors and arena
 * mappings, and nothing of the dead process left in the run directory once the survivor
 * has looked for it again. Its other connection, to a third process, works throughout.
 *
 * usage: killed_peer client|server|fork_parent|fork_child
 *   client       the client is killed while both sides stream both ways; the survivor (the
 *                server) reads a prefix of the client's stream then EOF or ECONNRESET, and
 *                its writes fail with EPIPE or ECONNRESET
 *   server       the same with the server killed; the survivor's next connect to the dead
 *                port is refused, as TCP refuses it
 *   fork_parent  the client forks while it holds the connection; one of the pair streams
 *   fork_child   to the server and is killed in the middle (the parent, or the child), the
 *                other carries on with the connection: the server reads a prefix of the
 *                first stream, then exactly the heir's bytes, then its EOF, and the heir
 *                reads the server's answer
 * BOUND_MS is generous (a hang is what it catches, not a slow answer). */
/* threads */
#include "faults.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define BOUND_MS 2000u
#define IN_FLIGHT (4u << 20)  /* each way before the kill */
#define HEIR_BYTES (1u << 20) /* what the heir of a forked pair sends after the kill */
#define ANSWER 100000u
enum { C2S = 1, S2C = 2, ANSWER_SEED = 3, HEIR_SEED = 4, BYSTANDER_SEED = 5 };

struct flow {
    int fd;
    unsigned tx_seed, rx_seed;
    _Atomic uint64_t sent, rcvd;
    int send_err, recv_err;
    _Atomic uint64_t send_end_ms, recv_end_ms;
};

static void *sender(void *arg)
{
    struct flow *f = arg;

    f->send_err = fl_send_until_error(f->fd, &f->sent, f->tx_seed);
    atomic_store(&f->send_end_ms, fl_now_ms());
    return NULL;
}

static void *receiver(void *arg)
{
    struct flow *f = arg;

    f->recv_err = fl_recv_until_end(f->fd, &f->rcvd, f->rx_seed);
    atomic_store(&f->recv_end_ms, fl_now_ms());
    return NULL;
}

/* The victim's side: both ways until it dies. */
static _Noreturn void stream_forever(int fd, unsigned tx, unsigned rx)
{
    static struct flow f;
    pthread_t t;

    f = (struct flow){.fd = fd, .tx_seed = tx, .rx_seed = rx};
    CHECK(pthread_create(&t, NULL, sender, &f) == 0);
    receiver(&f);
    FAIL("the survivor ended the stream first: %s", f.recv_err ? fl_errname(f.recv_err) : "EOF");
}

static bool reset_or_eof(int e)
{
    return e == 0 || e == ECONNRESET;
}

static bool reset_or_pipe(int e)
{
    return e == EPIPE || e == ECONNRESET;
}

/* The survivor's side: both ways until IN_FLIGHT went each way, then the victim is killed;
 * both directions must end the way TCP ends them, within the bound. */
static void stream_until_killed(int fd, pid_t victim, unsigned tx, unsigned rx)
{
    static struct flow f;
    pthread_t ts, tr;

    f = (struct flow){.fd = fd, .tx_seed = tx, .rx_seed = rx};
    CHECK(pthread_create(&ts, NULL, sender, &f) == 0);
    CHECK(pthread_create(&tr, NULL, receiver, &f) == 0);
    while (atomic_load(&f.sent) < IN_FLIGHT || atomic_load(&f.rcvd) < IN_FLIGHT) {
        if (atomic_load(&f.send_end_ms) || atomic_load(&f.recv_end_ms))
            FAIL("the stream ended before the kill: send %s, receive %s",
                 fl_errname(f.send_err), f.recv_err ? fl_errname(f.recv_err) : "EOF");
        fl_sleep_ms(1);
    }
    uint64_t t0 = fl_now_ms();
    if (kill(victim, SIGKILL) < 0)
        FAIL("kill: %s", fl_errname(errno));
    CHECK(pthread_join(tr, NULL) == 0);
    CHECK(pthread_join(ts, NULL) == 0);
    uint64_t rt = atomic_load(&f.recv_end_ms) - t0, st = atomic_load(&f.send_end_ms) - t0;
    printf("after %llu MB each way: receive ended with %s after %s, send with %s after %s\n",
           (unsigned long long)(IN_FLIGHT >> 20), f.recv_err ? fl_errname(f.recv_err) : "EOF",
           rt < BOUND_MS ? "under 2 s" : "too long", fl_errname(f.send_err),
           st < BOUND_MS ? "under 2 s" : "too long");
    if (!reset_or_eof(f.recv_err) || !reset_or_pipe(f.send_err))
        FAIL("expected EOF or ECONNRESET reading, EPIPE or ECONNRESET writing");
    if (rt >= BOUND_MS || st >= BOUND_MS)
        FAIL("the survivor learnt of the death after %llu ms (receive) and %llu ms (send)",
             (unsigned long long)rt, (unsigned long long)st);
    int e = fl_reap(victim);
    if (e != 128 + SIGKILL)
        FAIL("the victim ended with status %d before it was killed", e);
}

/* The survivor's other connection still carries verified data both ways (its peer echoes). */
static void bystander_round_trip(int fd, uint64_t *off)
{
    fl_send_stream(fd, false, *off, 100000, BYSTANDER_SEED);
    fl_recv_stream(fd, false, *off, 100000, BYSTANDER_SEED);
    *off += 100000;
}

/* The new connection brought one arena with it: its own link group's. */
static void expect_accelerated(const struct fl_footprint *before)
{
    struct fl_footprint now;

    fl_footprint(getpid(), &now);
    if (now.arenas != before->arenas + 1)
        FAIL("%d arenas mapped with the connection, %d before: not accelerated?", now.arenas,
             before->arenas);
}

/* A connection the library cannot attach (made with system calls) to our own listener: the
 * accept that takes it reads every control channel, and so buries link groups whose
 * process died. */
static void accept_plain(int l, uint16_t port)
{
    int c = fl_raw_connect(fl_raw_socket(), port, 0);
    int s = fl_accept(l);

    close(s);
    close(c);
}

/* In a forked process: the survivor's connection and listener are not its business.
 * (Holding them would make the survivor's connection shared with it.) */
static void drop_inherited(int b, int l)
{
    close(b);
    if (l >= 0)
        close(l);
}

/* ------------------------------------------------------------ one side killed */

static void killed(bool client_dies)
{
    struct fl_chan wch, vch;
    struct fl_footprint before;
    uint64_t boff = 0;
    uint16_t port = 0, vport;
    int l = -1, b, a;

    fl_chan_init(&wch);
    if (client_dies)
        l = fl_listen(&port);
    pid_t w = fl_fork();
    if (w == 0) {
        fl_chan_side(&wch, 1);
        if (client_dies)
            fl_echo_fd(fl_connect(port));
        int wl = fl_listen(&port);
        fl_post(&wch, port);
        fl_echo_server(wl);
    }
    fl_chan_side(&wch, 0);
    b = client_dies ? fl_accept(l) : fl_connect((uint16_t)fl_wait(&wch));
    bystander_round_trip(b, &boff);

    fl_chan_init(&vch);
    pid_t v = fl_fork();
    if (v == 0) {
        fl_chan_side(&vch, 1);
        drop_inherited(b, l);
        if (client_dies) {
            fl_post(&vch, 0);
            fl_wait(&vch);
            a = fl_connect(port);
        } else {
            int vl = fl_listen(&vport);
            fl_post(&vch, vport);
            a = fl_accept(vl);
        }
        stream_forever(a, client_dies ? C2S : S2C, client_dies ? S2C : C2S);
    }
    fl_chan_side(&vch, 0);
    vport = (uint16_t)fl_wait(&vch);
    fl_footprint(getpid(), &before);
    if (client_dies) {
        fl_post(&vch, 1);
        a = fl_accept(l);
    } else {
        a = fl_connect(vport);
    }
    bystander_round_trip(b, &boff);
    expect_accelerated(&before);
    stream_until_killed(a, v, client_dies ? S2C : C2S, client_dies ? C2S : S2C);
    bystander_round_trip(b, &boff);
    CHECK(close(a) == 0);
    fl_expect_footprint(getpid(), &before, "once the connection to the dead process closed");

    if (client_dies) {
        accept_plain(l, port);
    } else {
        /* Nobody listens there any more: refused, as on TCP, and the dead listener's
         * entries go on the way. */
        EXPECT_ERRNO(fl_try_connect(vport), ECONNREFUSED);
    }
    fl_expect_footprint(getpid(), &before, "after a new connection");
    if (fl_rundir_leftovers(v))
        FAIL("the dead process's entries stayed in the run directory");
    bystander_round_trip(b, &boff);
    close(b);
    kill(w, SIGKILL);
    fl_reap(w);
    if (l >= 0)
        close(l);
    printf("%s killed: the survivor and its other connection lived on\n",
           client_dies ? "client" : "server");
}

/* ------------------------------------------------------------ one of a forked pair killed */

static unsigned char heir_byte(uint64_t off)
{
    return (unsigned char)('0' + fl_stream_byte(off, HEIR_SEED) % 10);
}

static void heir_send(int fd)
{
    unsigned char buf[4096];

    for (uint64_t off = 0; off < HEIR_BYTES; off += sizeof(buf)) {
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = heir_byte(off + i);
        for (size_t done = 0; done < sizeof(buf);) {
            ssize_t r = send(fd, buf + done, sizeof(buf) - done, MSG_NOSIGNAL);
            if (r <= 0 && errno != EINTR)
                FAIL("heir: send: %s", fl_errname(errno));
            done += r > 0 ? (size_t)r : 0;
        }
    }
}

/* The heir of the connection, once the server says the other one is dead. */
static _Noreturn void heir(int fd, struct fl_chan *ch, pid_t child)
{
    fl_wait(ch);
    heir_send(fd);
    fl_recv_stream(fd, false, 0, ANSWER, ANSWER_SEED);
    CHECK(shutdown(fd, SHUT_WR) == 0);
    fl_expect_eof(fd, false);
    CHECK(close(fd) == 0);
    if (child > 0 && fl_reap(child) != 128 + SIGKILL)
        FAIL("the killed child did not die by SIGKILL");
    _exit(0);
}

/* The server's side: a prefix of the victim's stream, the kill once IN_FLIGHT arrived,
 * then exactly the heir's bytes and its EOF. */
static void take_over(int fd, pid_t victim, struct fl_chan *heir_ch)
{
    static unsigned char buf[65536];
    uint64_t first = 0, second = 0, t0 = 0;

    while (second < HEIR_BYTES) {
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            FAIL("after %llu bytes of the first writer and %llu of the heir: %s",
                 (unsigned long long)first, (unsigned long long)second,
                 r < 0 ? fl_errname(errno) : "EOF");
        for (ssize_t i = 0; i < r; i++) {
            if (!second && buf[i] == fl_stream_byte(first, C2S))
                first++;
            else if (t0 && buf[i] == heir_byte(second))
                second++;
            else
                FAIL("byte %llu of the stream (%llu of the first writer, %llu of the heir) is "
                     "wrong",
                     (unsigned long long)(first + second), (unsigned long long)first,
                     (unsigned long long)second);
        }
        if (!t0 && first >= IN_FLIGHT) {
            t0 = fl_now_ms();
            if (kill(victim, SIGKILL) < 0)
                FAIL("kill: %s", fl_errname(errno));
            fl_post(heir_ch, 1);
        }
    }
    uint64_t took = fl_now_ms() - t0;
    printf("the first writer's stream stopped after at least %u MB; the heir's %u MB arrived "
           "exactly %s\n",
           IN_FLIGHT >> 20, HEIR_BYTES >> 20, took < BOUND_MS ? "within 2 s" : "too late");
    if (took >= BOUND_MS)
        FAIL("the heir's bytes took %llu ms after the kill", (unsigned long long)took);
    fl_send_stream(fd, false, 0, ANSWER, ANSWER_SEED);
    fl_expect_eof(fd, false);
}

static void fork_pair(bool parent_dies)
{
    struct fl_chan wch, pch, cch;
    struct fl_footprint before;
    uint64_t boff = 0;
    uint16_t port;
    int l = fl_listen(&port);

    fl_adopt_orphans();
    fl_chan_init(&wch);
    pid_t w = fl_fork();
    if (w == 0) {
        fl_chan_side(&wch, 1);
        fl_echo_fd(fl_connect(port));
    }
    fl_chan_side(&wch, 0);
    int b = fl_accept(l);
    bystander_round_trip(b, &boff);

    fl_chan_init(&pch);
    fl_chan_init(&cch);
    pid_t p = fl_fork();
    if (p == 0) {
        drop_inherited(b, l);
        fl_chan_side(&pch, 1);
        fl_post(&pch, 0);
        int fd = fl_connect(port);
        static _Atomic uint64_t off;
        pid_t c = fl_fork_orphanable();
        if (c == 0) {
            fl_chan_side(&cch, 1);
            if (parent_dies)
                heir(fd, &cch, 0);
            fl_send_until_error(fd, &off, C2S);
            FAIL("the victim's stream ended before it was killed");
        }
        fl_post(&pch, (uint64_t)c);
        if (!parent_dies)
            heir(fd, &pch, c);
        fl_send_until_error(fd, &off, C2S);
        FAIL("the victim's stream ended before it was killed");
    }
    fl_chan_side(&pch, 0);
    fl_chan_side(&cch, 0);
    fl_wait(&pch);
    fl_footprint(getpid(), &before);
    int a = fl_accept(l);
    pid_t c = (pid_t)fl_wait(&pch);
    bystander_round_trip(b, &boff);
    expect_accelerated(&before);
    take_over(a, parent_dies ? p : c, parent_dies ? &cch : &pch);
    bystander_round_trip(b, &boff);
    CHECK(close(a) == 0);
    int ps = fl_reap(p), cs = parent_dies ? fl_reap(c) : 0;
    if (ps != (parent_dies ? 128 + SIGKILL : 0) || cs != 0)
        FAIL("the forked pair ended with status %d (parent) and %d (child)", ps, cs);

    accept_plain(l, port);
    fl_expect_footprint(getpid(), &before, "once the forked pair was gone");
    bystander_round_trip(b, &boff);
    close(b);
    kill(w, SIGKILL);
    fl_reap(w);
    close(l);
    printf("%s of the forked pair killed: the other carried the connection on\n",
           parent_dies ? "parent" : "child");
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"client", "server", "fork_parent", "fork_child"};
    int v = -1;

    fl_start(50);
    for (int i = 0; argc == 2 && i < 4; i++)
        if (!strcmp(argv[1], names[i]))
            v = i;
    if (v < 0) {
        fprintf(stderr, "usage: killed_peer client|server|fork_parent|fork_child\n");
        return 2;
    }
    if (v < 2)
        killed(v == 0);
    else
        fork_pair(v == 2);
    return 0;
}
