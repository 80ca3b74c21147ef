/* N accelerated connections between two processes, all open at once, each carrying its
 * own message both ways, verified. Prints what they cost per connection (resident memory
 * of each process, shared memory touched and mapped), then shows what happens beyond the
 * limit: the client is left a few descriptors and keeps connecting until socket() fails
 * with EMFILE, as on TCP; every connection it made on the way carries its bytes exactly,
 * accelerated or fallen back for want of descriptors (fallback_memory).
 *
 * usage: many_connections N
 * RLIMIT_NOFILE is raised as needed: an accelerated connection takes two descriptors on
 * each side (the socket and its doorbell end), so N = 10000 needs a hard limit above 20256.
 * Without the right to raise the hard limit (CAP_SYS_RESOURCE), N shrinks to fit and says
 * so; tests/vm runs the full count in a guest, whose root has the right. Elsewhere, raise it
 * beforehand where that right exists (`ulimit -Hn 65536` in a root shell that has it,
 * `docker run --ulimit nofile=65536`, or a limits.conf entry) and run tests/faults/run.sh
 * many_connections. */
#include "faults.h"

#include <poll.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define FDS_PER_CONN 2
#define SPARE_FDS 256
#define EXTRA_FREE 16 /* descriptors left to the client beyond the limit */

struct msg {
    uint32_t index, check;
};

static uint32_t check_of(uint32_t i)
{
    return i * 2654435761u ^ 0x5a5a5a5au;
}

/* Raises RLIMIT_NOFILE to n if it can; returns the limit now in force. */
static rlim_t nofile_raise(rlim_t n)
{
    struct rlimit rl;

    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur >= n)
        return rl.rlim_cur;
    struct rlimit want = {n, rl.rlim_max > n ? rl.rlim_max : n};
    if (setrlimit(RLIMIT_NOFILE, &want) == 0)
        return n;
    want = (struct rlimit){rl.rlim_max, rl.rlim_max};
    setrlimit(RLIMIT_NOFILE, &want);
    getrlimit(RLIMIT_NOFILE, &rl);
    return rl.rlim_cur;
}

/* kB of one line of /proc/<pid>/status. */
static uint64_t status_kb(pid_t pid, const char *key)
{
    char path[64], line[256];
    unsigned long kb = 0;
    size_t kl = strlen(key);

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, key, kl) && line[kl] == ':')
            kb = strtoul(line + kl + 1, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

/* Bytes of arena mapped by pid (virtual: what the arenas reserve). */
static uint64_t arena_bytes(pid_t pid)
{
    char path[64], line[512];
    unsigned long lo, hi;
    uint64_t n = 0;

    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof(line), f))
        if (strstr(line, "/memfd:usmc-arena") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
            n += hi - lo;
    if (f)
        fclose(f);
    return n;
}

struct mem {
    uint64_t rss_kb, shm_kb;
};

static void mem_of(pid_t pid, struct mem *m)
{
    m->rss_kb = status_kb(pid, "VmRSS");
    m->shm_kb = status_kb(pid, "RssShmem");
}

static void echo_message(int fd)
{
    struct msg m;

    if (recv(fd, &m, sizeof(m), MSG_WAITALL) != (ssize_t)sizeof(m))
        FAIL("server recv: %s", fl_errname(errno));
    m.check = ~m.check;
    if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
        FAIL("server send: %s", fl_errname(errno));
}

/* Accepts and answers every connection, keeping them all open, until the channel speaks;
 * then closes them and reports how many it took. */
static _Noreturn void server(int l, struct fl_chan *ch, int max)
{
    int *fds = calloc((size_t)max, sizeof(int)), n = 0;
    struct pollfd pf[2] = {{l, POLLIN, 0}, {ch->fd[ch->side], POLLIN, 0}};

    if (!fds)
        FAIL("calloc");
    for (;;) {
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            FAIL("poll: %s", fl_errname(errno));
        if (pf[0].revents & POLLIN) {
            if (n == max)
                FAIL("more than %d connections", max);
            fds[n] = fl_accept(l);
            echo_message(fds[n++]);
            continue;
        }
        if (pf[1].revents)
            break;
    }
    fl_wait(ch);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    fl_post(ch, (uint64_t)n);
    fl_wait(ch);
    _exit(0);
}

static int client_connect(uint16_t port, uint32_t i)
{
    int fd = fl_try_connect(port);
    struct msg m = {i, check_of(i)};

    if (fd >= 0 && send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
        FAIL("client send on connection %u: %s", i, fl_errname(errno));
    return fd;
}

static void client_verify(int fd, uint32_t i)
{
    struct msg m;

    if (recv(fd, &m, sizeof(m), MSG_WAITALL) != (ssize_t)sizeof(m))
        FAIL("client recv on connection %u: %s", i, fl_errname(errno));
    if (m.index != i || m.check != ~check_of(i))
        FAIL("connection %u got the answer for %u", i, m.index);
}

int main(int argc, char **argv)
{
    struct fl_chan ch;
    struct mem c0, c1, s0, s1;
    uint16_t port;

    fl_start(600);
    int n = argc == 2 ? atoi(argv[1]) : 0;
    if (n <= 0) {
        fprintf(stderr, "usage: many_connections N\n");
        return 2;
    }
    rlim_t lim = nofile_raise((rlim_t)n * FDS_PER_CONN + SPARE_FDS);
    if (lim < (rlim_t)n * FDS_PER_CONN + SPARE_FDS) {
        int fit = (int)((lim - SPARE_FDS) / FDS_PER_CONN);
        printf("RLIMIT_NOFILE is %llu and cannot be raised: %d connections instead of %d "
               "(see the header to run them all)\n",
               (unsigned long long)lim, fit, n);
        n = fit;
    }
    int max = n + (int)lim; /* beyond the limit: no more than the descriptors there are */
    int l = fl_listen(&port);
    /* A server that falls behind (a loaded machine) must not overflow the accept queue:
     * a dropped SYN is retried only a second later, thousands of times over. */
    if (listen(l, SOMAXCONN) < 0)
        FAIL("listen: %s", fl_errname(errno));
    fl_chan_init(&ch);
    pid_t s = fl_fork();
    if (s == 0) {
        fl_chan_side(&ch, 1);
        server(l, &ch, max);
    }
    fl_chan_side(&ch, 0);
    close(l);
    mem_of(getpid(), &c0);
    mem_of(s, &s0);
    /* The connecting side's count: the server, forked after the listener mapped the
     * counters, adds to the same file. */
    enum stat_id client_accel = stat_side_id(SIDE_CLIENT, SIDE_ACCEL);
    uint64_t accel0 = fl_stat_self(client_accel);

    int *fds = calloc((size_t)max, sizeof(int));
    if (!fds)
        FAIL("calloc");
    uint64_t t0 = fl_now_ms();
    for (int i = 0; i < n; i++)
        if ((fds[i] = client_connect(port, (uint32_t)i)) < 0)
            FAIL("connection %d: %s", i, fl_errname(errno));
    for (int i = 0; i < n; i++)
        client_verify(fds[i], (uint32_t)i);
    uint64_t accel = fl_stat_self(client_accel) - accel0;
    mem_of(getpid(), &c1);
    mem_of(s, &s1);
    printf("%d connections open at once, every message verified both ways, %llu accelerated "
           "here, in %llu s\n",
           n, (unsigned long long)accel, (unsigned long long)(fl_now_ms() - t0 + 500) / 1000);
    if (accel != (uint64_t)n)
        FAIL("only %llu of %d connections were accelerated", (unsigned long long)accel, n);
    printf("per connection: client RSS %.1f kB, server RSS %.1f kB, shared memory touched "
           "%.1f kB, arena mapped %.1f kB\n",
           (double)(c1.rss_kb - c0.rss_kb) / n, (double)(s1.rss_kb - s0.rss_kb) / n,
           (double)(c1.shm_kb - c0.shm_kb) / n, (double)arena_bytes(getpid()) / 1024.0 / n);

    /* Beyond the limit: a few descriptors left, then none. */
    struct fl_tally t;
    int more = 0, beyond_accel = 0, beyond_fallback = 0;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    int spare = dup(0);
    close(spare);
    rl.rlim_cur = (rlim_t)(spare + EXTRA_FREE);
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        FAIL("setrlimit: %s", fl_errname(errno));
    for (;; more++) {
        fl_tally(&t);
        int fd = client_connect(port, (uint32_t)(n + more));
        if (fd < 0) {
            if (errno != EMFILE)
                FAIL("beyond the limit, connect failed with %s, not EMFILE", fl_errname(errno));
            break;
        }
        fds[n + more] = fd;
        client_verify(fd, (uint32_t)(n + more));
        const char *how = fl_outcome(&t);
        if (!strcmp(how, "accelerated"))
            beyond_accel++;
        else if (!strcmp(how, "memory"))
            beyond_fallback++;
        else
            FAIL("connection %d beyond the limit: %s", n + more, how);
    }
    printf("beyond the limit: %d more accelerated, %d fell back (fallback_memory), then "
           "socket() failed with EMFILE\n",
           beyond_accel, beyond_fallback);
    if (!beyond_fallback)
        FAIL("no connection fell back for want of descriptors");

    for (int i = 0; i < n + more; i++)
        close(fds[i]);
    fl_post(&ch, 1);
    if (fl_wait(&ch) != (uint64_t)(n + more))
        FAIL("the server did not take every connection");
    fl_post(&ch, 1);
    if (fl_reap(s) != 0)
        FAIL("the server failed");
    return 0;
}
