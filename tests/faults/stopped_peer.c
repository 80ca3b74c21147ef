/* The reader of two accelerated connections is stopped (SIGSTOP) while the writer fills
 * them. A blocking writer must block without burning CPU, a nonblocking one must get EAGAIN
 * and see no POLLOUT; once the reader continues (SIGCONT) everything flows and the reader
 * gets exactly what was written.
 *
 * usage: stopped_peer
 * The blocked writer's thread may use at most CPU_MAX_MS of CPU time over STOPPED_MS: a
 * writer that spins uses all of it. */
/* threads */
#include "faults.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STOPPED_MS 1000u
#define CPU_MAX_MS 100u
#define BLOCKING_BYTES (8u << 20) /* far more than a ring holds */
#define AFTER_CONT (1u << 20)
enum { BLOCKING_SEED = 1, NONBLOCKING_SEED = 2 };

struct writer {
    int fd;
    _Atomic bool done;
};

static void *blocking_writer(void *arg)
{
    struct writer *w = arg;

    fl_send_stream(w->fd, false, 0, BLOCKING_BYTES, BLOCKING_SEED);
    atomic_store(&w->done, true);
    return NULL;
}

static uint64_t thread_cpu_ms(pthread_t t)
{
    clockid_t c;
    struct timespec ts;

    if (pthread_getcpuclockid(t, &c) != 0 || clock_gettime(c, &ts) < 0)
        FAIL("thread CPU clock: %s", fl_errname(errno));
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    FILE *f;
    char st = '?';

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "re"))) {
        char *p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
        if (p && p[1])
            st = p[2];
        fclose(f);
    }
    return st;
}

/* Fills a nonblocking connection until EAGAIN; returns how much went in. */
static uint64_t fill(int fd)
{
    static char buf[65536];
    uint64_t n = 0;

    for (;;) {
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = (char)fl_stream_byte(n + i, NONBLOCKING_SEED);
        ssize_t r = send(fd, buf, sizeof(buf), MSG_NOSIGNAL);
        if (r < 0 && errno == EAGAIN)
            return n;
        if (r <= 0)
            FAIL("nonblocking send: %s", r < 0 ? fl_errname(errno) : "0");
        n += (uint64_t)r;
        if (n > (64u << 20))
            FAIL("64 MB went into a stopped reader's connection without EAGAIN");
    }
}

static _Noreturn void reader(struct fl_chan *ch)
{
    uint16_t port;
    int l = fl_listen(&port);

    fl_post(ch, port);
    int blocking = fl_accept(l), nonblocking = fl_accept(l);
    fl_recv_stream(blocking, false, 0, 1, 0);
    fl_recv_stream(nonblocking, false, 0, 1, 0);
    fl_post(ch, 1); /* attached: now the writer stops us */
    uint64_t filled = fl_wait(ch);
    fl_recv_stream(nonblocking, false, 0, filled + AFTER_CONT, NONBLOCKING_SEED);
    fl_recv_stream(blocking, false, 0, BLOCKING_BYTES, BLOCKING_SEED);
    fl_expect_eof(nonblocking, false);
    fl_expect_eof(blocking, false);
    _exit(0);
}

int main(void)
{
    struct fl_chan ch;
    struct writer w = {0};
    pthread_t t;

    fl_start(50);
    fl_chan_init(&ch);
    pid_t r = fl_fork();
    if (r == 0) {
        fl_chan_side(&ch, 1);
        reader(&ch);
    }
    fl_chan_side(&ch, 0);
    uint16_t port = (uint16_t)fl_wait(&ch);
    int blocking = fl_connect(port), nonblocking = fl_connect(port);
    fl_send_stream(blocking, false, 0, 1, 0);
    fl_send_stream(nonblocking, false, 0, 1, 0);
    fl_wait(&ch);
    if (kill(r, SIGSTOP) < 0)
        FAIL("SIGSTOP: %s", fl_errname(errno));
    while (proc_state(r) != 'T')
        fl_sleep_ms(1);

    CHECK(fcntl(nonblocking, F_SETFL, O_NONBLOCK) == 0);
    uint64_t filled = fill(nonblocking);
    EXPECT_ERRNO(send(nonblocking, "x", 1, MSG_NOSIGNAL), EAGAIN);
    struct pollfd pf = {nonblocking, POLLOUT, 0};
    CHECK(poll(&pf, 1, 0) == 0);

    w.fd = blocking;
    CHECK(pthread_create(&t, NULL, blocking_writer, &w) == 0);
    fl_sleep_ms(50); /* the writer fills the ring and goes to sleep */
    uint64_t cpu0 = thread_cpu_ms(t);
    fl_sleep_ms(STOPPED_MS);
    uint64_t cpu = thread_cpu_ms(t) - cpu0;
    if (atomic_load(&w.done))
        FAIL("8 MB went into a stopped reader's connection without blocking");
    if (cpu > CPU_MAX_MS)
        FAIL("the blocked writer used %llu ms of CPU in %u ms", (unsigned long long)cpu,
             STOPPED_MS);
    printf("nonblocking: EAGAIN after %llu bytes, no POLLOUT; blocking: asleep, %llu ms of "
           "CPU in %u ms\n",
           (unsigned long long)filled, (unsigned long long)cpu, STOPPED_MS);

    fl_post(&ch, filled);
    if (kill(r, SIGCONT) < 0)
        FAIL("SIGCONT: %s", fl_errname(errno));
    pf.revents = 0;
    if (poll(&pf, 1, 10000) != 1 || !(pf.revents & POLLOUT))
        FAIL("no POLLOUT within 10 s of SIGCONT");
    CHECK(fcntl(nonblocking, F_SETFL, 0) == 0);
    fl_send_stream(nonblocking, false, filled, AFTER_CONT, NONBLOCKING_SEED);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(shutdown(nonblocking, SHUT_WR) == 0);
    CHECK(shutdown(blocking, SHUT_WR) == 0);
    if (fl_reap(r) != 0)
        FAIL("the reader failed");
    close(blocking);
    close(nonblocking);
    printf("after SIGCONT both streams arrived exactly\n");
    return 0;
}
