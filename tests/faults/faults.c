#define _XOPEN_SOURCE 700 /* nftw */
#include "faults.h"
#include "socktab.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned watchdog;

void fl_start(unsigned seconds)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    watchdog = seconds;
    alarm(seconds);
}

void fl_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    printf("[%d] %s:%d: ", (int)getpid(), file, line);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    _exit(1);
}

const char *fl_errname(int err)
{
    const char *n = strerrorname_np(err);
    return n ? n : "E?";
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    if (remove(path) < 0)
        FAIL("removing %s: %s", path, fl_errname(errno));
    return 0;
}

void fl_remove_tree(const char *path)
{
    if (nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
        FAIL("removing %s: %s", path, fl_errname(errno));
}

uint64_t fl_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void fl_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ------------------------------------------------------------------ TCP */

static void loopback(uint16_t port, struct sockaddr_in *sin)
{
    memset(sin, 0, sizeof(*sin));
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

uint16_t fl_local_port(int fd)
{
    struct sockaddr_in sin;
    socklen_t l = sizeof(sin);

    if (getsockname(fd, (struct sockaddr *)&sin, &l) < 0)
        FAIL("getsockname: %s", fl_errname(errno));
    return ntohs(sin.sin_port);
}

int fl_listen(uint16_t *port)
{
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    loopback(0, &sin);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 64) < 0)
        FAIL("listen: %s", fl_errname(errno));
    *port = fl_local_port(fd);
    return fd;
}

int fl_try_connect(uint16_t port)
{
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    loopback(port, &sin);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int fl_connect(uint16_t port)
{
    int fd = fl_try_connect(port);

    if (fd < 0)
        FAIL("connect: %s", fl_errname(errno));
    return fd;
}

int fl_accept(int lfd)
{
    int fd;

    do
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        FAIL("accept: %s", fl_errname(errno));
    return fd;
}

int fl_raw_socket(void)
{
    int fd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        FAIL("socket: %s", fl_errname(errno));
    return fd;
}

int fl_raw_connect(int fd, uint16_t port, uint16_t local_port)
{
    struct sockaddr_in sin;
    int one = 1;

    if (local_port) {
        loopback(local_port, &sin);
        if (syscall(SYS_setsockopt, fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            syscall(SYS_bind, fd, &sin, sizeof(sin)) < 0)
            FAIL("bind to port %u: %s", local_port, fl_errname(errno));
    }
    loopback(port, &sin);
    if (syscall(SYS_connect, fd, &sin, sizeof(sin)) < 0)
        FAIL("connect: %s", fl_errname(errno));
    return fd;
}

uint16_t fl_free_port(void)
{
    uint16_t port;
    int l = fl_listen(&port);

    close(l);
    return port;
}

static void loopback_up(void)
{
    struct ifreq ifr = {0};
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        FAIL("lo: %s", fl_errname(errno));
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        FAIL("bringing lo up: %s", fl_errname(errno));
    close(s);
}

int fl_netns_twin(uint16_t port, uint16_t local_port)
{
    if (unshare(CLONE_NEWNET) < 0)
        FAIL("unshare(CLONE_NEWNET): %s", fl_errname(errno));
    loopback_up();
    int l = fl_raw_socket();
    struct sockaddr_in sin;
    loopback(port, &sin);
    if (syscall(SYS_bind, l, &sin, sizeof(sin)) < 0 || syscall(SYS_listen, l, 1) < 0)
        FAIL("twin listener: %s", fl_errname(errno));
    return fl_raw_connect(fl_raw_socket(), port, local_port);
}

static ssize_t io(int fd, bool raw, bool out, void *buf, size_t n)
{
    if (raw)
        return out ? syscall(SYS_sendto, fd, buf, n, MSG_NOSIGNAL, NULL, 0)
                   : syscall(SYS_recvfrom, fd, buf, n, 0, NULL, NULL);
    return out ? send(fd, buf, n, MSG_NOSIGNAL) : recv(fd, buf, n, 0);
}

unsigned char fl_stream_byte(uint64_t off, unsigned seed)
{
    uint64_t x = (off + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed << 32 | seed);

    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return (unsigned char)('a' + x % 26);
}

void fl_send_stream(int fd, bool raw, uint64_t off, size_t n, unsigned seed)
{
    unsigned char buf[65536];

    while (n) {
        size_t k = n < sizeof(buf) ? n : sizeof(buf);
        for (size_t i = 0; i < k; i++)
            buf[i] = fl_stream_byte(off + i, seed);
        for (size_t done = 0; done < k;) {
            ssize_t r = io(fd, raw, true, buf + done, k - done);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                FAIL("send at stream offset %llu: %s", (unsigned long long)(off + done),
                     r < 0 ? fl_errname(errno) : "returned 0");
            done += (size_t)r;
        }
        off += k;
        n -= k;
    }
}

void fl_recv_stream(int fd, bool raw, uint64_t off, size_t n, unsigned seed)
{
    unsigned char buf[65536];

    while (n) {
        ssize_t r = io(fd, raw, false, buf, n < sizeof(buf) ? n : sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            FAIL("recv at stream offset %llu: %s", (unsigned long long)off,
                 r < 0 ? fl_errname(errno) : "EOF");
        for (ssize_t i = 0; i < r; i++)
            if (buf[i] != fl_stream_byte(off + (uint64_t)i, seed))
                FAIL("byte %llu of the stream is wrong", (unsigned long long)(off + (uint64_t)i));
        off += (uint64_t)r;
        n -= (size_t)r;
    }
}

int fl_send_until_error(int fd, _Atomic uint64_t *off, unsigned seed)
{
    unsigned char buf[65536];

    for (;;) {
        uint64_t o = atomic_load(off);
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = fl_stream_byte(o + i, seed);
        for (size_t done = 0; done < sizeof(buf);) {
            ssize_t r = send(fd, buf + done, sizeof(buf) - done, MSG_NOSIGNAL);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return r < 0 ? errno : EIO;
            done += (size_t)r;
            atomic_fetch_add(off, (uint64_t)r);
        }
    }
}

int fl_recv_until_end(int fd, _Atomic uint64_t *off, unsigned seed)
{
    unsigned char buf[65536];

    for (;;) {
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? errno : 0;
        uint64_t o = atomic_load(off);
        for (ssize_t i = 0; i < r; i++)
            if (buf[i] != fl_stream_byte(o + (uint64_t)i, seed))
                FAIL("byte %llu of the stream is wrong", (unsigned long long)(o + (uint64_t)i));
        atomic_fetch_add(off, (uint64_t)r);
    }
}

void fl_expect_eof(int fd, bool raw)
{
    char c;
    ssize_t r;

    do
        r = io(fd, raw, false, &c, 1);
    while (r < 0 && errno == EINTR);
    if (r != 0)
        FAIL("expected EOF, got %zd %s", r, r < 0 ? fl_errname(errno) : "");
}

bool fl_readable(int fd, unsigned ms)
{
    struct pollfd pf = {fd, POLLIN, 0};
    int n;

    do
        n = poll(&pf, 1, (int)ms);
    while (n < 0 && errno == EINTR);
    return n == 1;
}

void fl_expect_readable(int fd, unsigned ms, const char *what)
{
    if (!fl_readable(fd, ms))
        FAIL("%s: nothing within %u ms", what, ms);
}

void fl_probe_plain(uint16_t port, size_t n)
{
    int fd = fl_raw_connect(fl_raw_socket(), port, 0);

    fl_send_stream(fd, true, 0, n, 77);
    fl_expect_readable(fd, 10000, "echo to a plain probe connection (is the server stuck?)");
    fl_recv_stream(fd, true, 0, n, 77);
    close(fd);
}

void fl_probe_accelerated(uint16_t port, size_t n)
{
    struct fl_arena a;
    int fd = fl_connect(port);

    fl_send_stream(fd, false, 0, n, 78);
    fl_expect_readable(fd, 10000, "echo to an accelerated probe connection");
    fl_recv_stream(fd, false, 0, n, 78);
    fl_arena_find(&a);
    fl_seg_of(&a, fd, n, n);
    close(fd);
}

/* ------------------------------------------------------------------ processes */

pid_t fl_fork(void)
{
    pid_t parent = getpid(), pid;

    fflush(stdout);
    pid = fork();
    if (pid < 0)
        FAIL("fork: %s", fl_errname(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        alarm(watchdog);
    }
    return pid;
}

pid_t fl_fork_orphanable(void)
{
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid < 0)
        FAIL("fork: %s", fl_errname(errno));
    if (pid == 0)
        alarm(watchdog);
    return pid;
}

void fl_adopt_orphans(void)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        FAIL("PR_SET_CHILD_SUBREAPER: %s", fl_errname(errno));
}

int fl_reap(pid_t pid)
{
    int st;

    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            FAIL("waitpid: %s", fl_errname(errno));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

bool fl_alive(pid_t pid)
{
    char path[64], buf[512];
    FILE *f;
    bool alive = false;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "re");
    if (f) {
        /* A zombie has died; only its exit status is left. */
        char *p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
        alive = p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
        fclose(f);
    }
    return alive;
}

static char task_state(pid_t pid, pid_t tid)
{
    char path[96], buf[512];
    FILE *f;
    char st = '?';

    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    f = fopen(path, "re");
    if (!f)
        FAIL("%s: %s", path, fl_errname(errno));
    if (fgets(buf, sizeof(buf), f)) {
        char *p = strrchr(buf, ')');
        if (p && p[1])
            st = p[2];
    }
    fclose(f);
    return st;
}

void fl_wait_sleeping(pid_t pid, pid_t tid)
{
    int seen = 0;

    while (seen < 2) {
        seen = task_state(pid, tid) == 'S' ? seen + 1 : 0;
        fl_sleep_ms(5);
    }
}

int fl_count_fds(pid_t pid)
{
    char path[64];
    struct dirent *d;
    int n = 0;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *dir = opendir(path);
    if (!dir)
        FAIL("%s: %s", path, fl_errname(errno));
    while ((d = readdir(dir)))
        if (d->d_name[0] != '.')
            n++;
    closedir(dir);
    return n;
}

void fl_list_fds(pid_t pid)
{
    char path[64], link[400], target[256];
    struct dirent *d;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *dir = opendir(path);
    while (dir && (d = readdir(dir))) {
        if (d->d_name[0] == '.')
            continue;
        snprintf(link, sizeof(link), "%s/%s", path, d->d_name);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        printf("  process %d fd %s -> %.*s\n", (int)pid, d->d_name, n > 0 ? (int)n : 0, target);
    }
    if (dir)
        closedir(dir);
}

void fl_chan_init(struct fl_chan *c)
{
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, c->fd) < 0)
        FAIL("socketpair: %s", fl_errname(errno));
    c->side = -1;
}

void fl_chan_side(struct fl_chan *c, int side)
{
    close(c->fd[!side]);
    c->side = side;
}

void fl_post(struct fl_chan *c, uint64_t v)
{
    if (send(c->fd[c->side], &v, sizeof(v), MSG_NOSIGNAL) != sizeof(v))
        FAIL("post: %s", fl_errname(errno));
}

uint64_t fl_wait(struct fl_chan *c)
{
    uint64_t v;
    ssize_t r;

    do
        r = recv(c->fd[c->side], &v, sizeof(v), 0);
    while (r < 0 && errno == EINTR);
    if (r != sizeof(v))
        FAIL("wait: the other process is gone (%s)", r < 0 ? fl_errname(errno) : "EOF");
    return v;
}

void fl_actor_start(struct fl_actor *a, void (*act)(void *), void *arg)
{
    fl_chan_init(&a->ch);
    if ((a->pid = fl_fork()) == 0) {
        fl_chan_side(&a->ch, 1);
        act(arg);
        fl_post(&a->ch, 1);
        fl_wait(&a->ch);
        _exit(0);
    }
    fl_chan_side(&a->ch, 0);
    fl_wait(&a->ch);
}

void fl_actor_end(struct fl_actor *a)
{
    fl_post(&a->ch, 1);
    if (fl_reap(a->pid) != 0)
        FAIL("the process acting beside the test failed");
}

void fl_echo_server(int lfd)
{
    struct pollfd pf[64];
    static char buf[65536];
    int n = 1;

    pf[0] = (struct pollfd){lfd, POLLIN, 0};
    for (;;) {
        if (poll(pf, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            FAIL("poll: %s", fl_errname(errno));
        }
        for (int i = n - 1; i >= 1; i--) {
            if (!pf[i].revents)
                continue;
            ssize_t r = read(pf[i].fd, buf, sizeof(buf));
            if (r > 0) {
                for (ssize_t done = 0, w; done < r; done += w) {
                    w = send(pf[i].fd, buf + done, (size_t)(r - done), MSG_NOSIGNAL);
                    if (w <= 0)
                        break;
                }
                continue;
            }
            if (r < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            close(pf[i].fd);
            pf[i] = pf[--n];
        }
        if ((pf[0].revents & POLLIN) && n < 64) {
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0)
                pf[n++] = (struct pollfd){fd, POLLIN, 0};
        }
    }
}

void fl_echo_fd(int fd)
{
    static char buf[65536];

    for (;;) {
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            _exit(0);
        if (r < 0)
            FAIL("echo: %s", fl_errname(errno));
        for (ssize_t done = 0, w; done < r; done += w)
            if ((w = send(fd, buf + done, (size_t)(r - done), MSG_NOSIGNAL)) <= 0)
                FAIL("echo: %s", fl_errname(errno));
    }
}

/* ------------------------------------------------------------------ library state */

const char *fl_rundir(void)
{
    const char *d = getenv("USMC_RUNDIR");

    if (!d || !*d)
        FAIL("USMC_RUNDIR is not set: run under `usmc run --rundir DIR`");
    return d;
}

/* Finds "<prefix>..." in dir; returns 1 and the full path in buf when exactly one matches. */
static int find_one(const char *dir, const char *prefix, const char *suffix, char *buf,
                    size_t len)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;

    if (!d)
        return 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name), s = strlen(suffix);
        if (strncmp(e->d_name, prefix, strlen(prefix)) || l < s || strcmp(e->d_name + l - s, suffix))
            continue;
        snprintf(buf, len, "%s/%s", dir, e->d_name);
        found++;
    }
    closedir(d);
    return found == 1;
}

uint64_t fl_stat(pid_t pid, enum stat_id id)
{
    char dir[4096], prefix[32], path[4400];
    struct stats_file sf;

    snprintf(dir, sizeof(dir), "%s/stats", fl_rundir());
    snprintf(prefix, sizeof(prefix), "%d-", (int)pid);
    if (!find_one(dir, prefix, "", path, sizeof(path)))
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t r = pread(fd, &sf, sizeof(sf), 0);
    close(fd);
    if (r != (ssize_t)sizeof(sf) || sf.magic != STATS_MAGIC)
        return 0;
    return stat_value(&sf, id);
}

uint64_t fl_stat_self(enum stat_id id)
{
    /* Found once: the mapping stays where it is, and looking needs a descriptor the
     * caller may not have. */
    static struct stats_file *mine;
    char prefix[4200], line[4600];
    unsigned long lo;

    if (!mine) {
        FILE *f = fopen("/proc/self/maps", "re");
        if (!f)
            FAIL("/proc/self/maps: %s", fl_errname(errno));
        /* A forked child counts into its parent's file. */
        snprintf(prefix, sizeof(prefix), "%s/stats/", fl_rundir());
        while (fgets(line, sizeof(line), f)) {
            char *path = strchr(line, '/');
            if (path && !strncmp(path, prefix, strlen(prefix)) && sscanf(line, "%lx-", &lo) == 1 &&
                ((struct stats_file *)lo)->magic == STATS_MAGIC)
                mine = (struct stats_file *)lo;
        }
        fclose(f);
    }
    return mine ? stat_value(mine, id) : 0;
}

void fl_tally(struct fl_tally *t)
{
    /* The connecting side's counters: a server forked from this process after its
     * listener mapped the file counts its own side into the same file. */
    t->accel = fl_stat_self(stat_side_id(SIDE_CLIENT, SIDE_ACCEL));
    for (int r = 0; r < DECL_MAX; r++)
        t->fallback[r] = fl_stat_self(stat_side_id(SIDE_CLIENT, (enum side_stat)(SIDE_REASON + r)));
}

const char *fl_outcome(const struct fl_tally *before)
{
    struct fl_tally now;

    fl_tally(&now);
    if (now.accel > before->accel)
        return "accelerated";
    for (int r = 0; r < DECL_MAX; r++)
        if (now.fallback[r] > before->fallback[r])
            return decline_name((enum decline)r);
    return "nothing";
}

int fl_rundir_leftovers(pid_t pid)
{
    char prefix[32], path[4400], target[4096];
    DIR *d = opendir(fl_rundir());
    struct dirent *e;
    int n = 0;

    if (!d)
        return 0;
    snprintf(prefix, sizeof(prefix), "c-%d-", (int)pid);
    while ((e = readdir(d))) {
        snprintf(path, sizeof(path), "%s/%s", fl_rundir(), e->d_name);
        ssize_t l = readlink(path, target, sizeof(target) - 1);
        target[l > 0 ? l : 0] = 0;
        if (!strncmp(e->d_name, prefix, strlen(prefix)) || !strncmp(target, prefix, strlen(prefix))) {
            printf("left in the run directory: %s%s%s\n", e->d_name, l > 0 ? " -> " : "", target);
            n++;
        }
    }
    closedir(d);
    return n;
}

void fl_footprint(pid_t pid, struct fl_footprint *f)
{
    char path[64], line[512];

    f->fds = fl_count_fds(pid);
    f->arenas = 0;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *m = fopen(path, "re");
    if (!m)
        FAIL("%s: %s", path, fl_errname(errno));
    while (fgets(line, sizeof(line), m))
        f->arenas += strstr(line, "/memfd:usmc-arena") != NULL;
    fclose(m);
}

void fl_expect_footprint(pid_t pid, const struct fl_footprint *before, const char *when)
{
    struct fl_footprint now;

    /* What a closing connection gives back may still be on its way (a peer's close is
     * seen a moment later): allow it a second. */
    for (int i = 0; i < 50; i++) {
        fl_footprint(pid, &now);
        if (now.fds == before->fds && now.arenas == before->arenas)
            return;
        fl_sleep_ms(20);
    }
    fl_list_fds(pid);
    FAIL("%s: process %d holds %d descriptors and %d arena mappings, %d and %d before", when,
         (int)pid, now.fds, now.arenas, before->fds, before->arenas);
}

void fl_ctl_path(pid_t pid, char *buf, size_t len)
{
    char prefix[32];

    snprintf(prefix, sizeof(prefix), "c-%d-", (int)pid);
    if (!find_one(fl_rundir(), prefix, ".sock", buf, len))
        FAIL("no control socket of process %d in %s", (int)pid, fl_rundir());
}

void fl_arena_find(struct fl_arena *a)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    unsigned long lo, hi;

    memset(a, 0, sizeof(*a));
    if (!f)
        FAIL("/proc/self/maps: %s", fl_errname(errno));
    while (fgets(line, sizeof(line), f)) {
        if (!strstr(line, "/memfd:usmc-arena") || sscanf(line, "%lx-%lx", &lo, &hi) != 2)
            continue;
        if (a->base)
            FAIL("more than one arena mapped");
        a->base = (unsigned char *)lo;
        a->size = hi - lo;
        snprintf(a->file, sizeof(a->file), "/proc/self/map_files/%lx-%lx", lo, hi);
    }
    fclose(f);
    if (!a->base)
        FAIL("no usmc arena in /proc/self/maps: the connection is not accelerated");
}

static bool carried(struct ring_shared *r, uint64_t n)
{
    uint64_t prod = atomic_load(&r->prod);

    return prod == n || (atomic_load(&r->prod_skip) && prod > n);
}

/* Where this process's socket table says fd's segment is; -1 without a table (its run
 * directory was taken away). */
static int64_t seg_off_of(const struct fl_arena *a, int fd)
{
    char dir[4096], prefix[32], path[4400];
    struct socktab_slot sl;

    snprintf(dir, sizeof(dir), "%s/socks", fl_rundir());
    snprintf(prefix, sizeof(prefix), "%d-", (int)getpid());
    if (!find_one(dir, prefix, "", path, sizeof(path)))
        return -1;
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0 || pread(f, &sl, sizeof(sl), (off_t)(sizeof(struct socktab_hdr) +
                                                   (size_t)fd * sizeof(sl))) != sizeof(sl))
        FAIL("%s: slot of descriptor %d: %s", path, fd, fl_errname(errno));
    close(f);
    /* Pending: the client has not looked since the server attached. */
    if ((sl.state != SOCKTAB_SHM && sl.state != SOCKTAB_PENDING) ||
        sl.seg_off > a->size - SEG_HDR_SIZE)
        FAIL("descriptor %d: not an accelerated connection (state %u)", fd, sl.state);
    return (int64_t)sl.seg_off;
}

struct seg_hdr *fl_seg_of(const struct fl_arena *a, int fd, uint64_t c2s, uint64_t s2c)
{
    int64_t at = seg_off_of(a, fd);
    /* Segments are carved from the start of the arena; without the table, the first ones
     * are all we look at: reading further would only make the kernel allocate pages. */
    size_t limit = at >= 0 || a->size < (16u << 20) ? a->size : (16u << 20);

    for (size_t off = at < 0 ? 0 : (size_t)at; off + SEG_HDR_SIZE <= limit; off += SEG_HDR_SIZE) {
        struct seg_hdr *h = (struct seg_hdr *)(a->base + off);
        if (h->magic == SEG_MAGIC && atomic_load(&h->state) == SEG_ATTACHED &&
            carried(&h->ring[0], c2s) && carried(&h->ring[1], s2c))
            return h;
        if (at >= 0)
            break;
    }
    FAIL("descriptor %d: no attached segment carried %llu bytes to the server and %llu back",
         fd, (unsigned long long)c2s, (unsigned long long)s2c);
}

/* ------------------------------------------------------------------ forged messages */

void fl_forge_init(struct fl_forge *f, const char *ctl_path, uint64_t arena_size,
                   uint64_t seg_off, uint64_t ring, uint64_t conn_id)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};

    memset(f, 0, sizeof(*f));
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", ctl_path);
    f->ctl = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (f->ctl < 0 || connect(f->ctl, (struct sockaddr *)&sun, sizeof(sun)) < 0)
        FAIL("connect to %s: %s", ctl_path, fl_errname(errno));
    /* Sealed at its size, as the library's own arenas are: an unsealed one is refused
     * before anything else about the proposal is looked at. */
    f->memfd = memfd_create("forged-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f->memfd < 0 || ftruncate(f->memfd, (off_t)arena_size) < 0 ||
        fcntl(f->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        FAIL("memfd: %s", fl_errname(errno));
    f->arena_size = arena_size;
    f->base = mmap(NULL, arena_size, PROT_READ | PROT_WRITE, MAP_SHARED, f->memfd, 0);
    if (f->base == MAP_FAILED)
        FAIL("mmap: %s", fl_errname(errno));
    if (seg_off + SEG_HDR_SIZE <= arena_size) {
        struct seg_hdr *h = (struct seg_hdr *)(f->base + seg_off);
        h->magic = SEG_MAGIC;
        atomic_store(&h->state, SEG_PENDING);
    }
    if ((f->bell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        FAIL("eventfd: %s", fl_errname(errno));
    f->p.hdr = (struct clc_hdr){CLC_EYECATCHER, CLC_PROPOSAL, CLC_VERSION, sizeof(f->p)};
    f->p.flags = CLC_F_NEW_ARENA;
    f->p.arena_id = 1;
    f->p.arena_size = arena_size;
    f->p.conn_id = conn_id;
    f->p.seg_off = seg_off;
    f->p.seg_size = SEG_HDR_SIZE + 2 * ring;
    f->p.ring_size[0] = f->p.ring_size[1] = ring;
}

void fl_forge_close(struct fl_forge *f)
{
    munmap(f->base, f->arena_size);
    close(f->memfd);
    close(f->ctl);
    close(f->bell);
}

int fl_forge_fds(const struct fl_forge *f, int tcp, int *fds)
{
    fds[CLC_FD_TCP] = tcp;
    fds[CLC_FD_BELL] = f->bell;
    fds[CLC_FD_ARENA] = f->memfd;
    return (f->p.flags & CLC_F_NEW_ARENA) ? CLC_FD_ARENA + 1 : CLC_FD_ARENA;
}

void fl_forge_expect_pending(const struct fl_forge *f, const char *when)
{
    struct seg_hdr *h = (struct seg_hdr *)(f->base + f->p.seg_off);

    if (atomic_load(&h->state) != SEG_PENDING || atomic_load(&h->ring[1].prod) != 0)
        FAIL("%s, the forged segment was attached: state %u, %llu bytes produced into it", when,
             atomic_load(&h->state), (unsigned long long)atomic_load(&h->ring[1].prod));
}

void fl_forge_send(const struct fl_forge *f, int tcp)
{
    int fds[CLC_FD_MAX];

    fl_ctl_send(f->ctl, &f->p, sizeof(f->p), fds, fl_forge_fds(f, tcp, fds));
}

void fl_ctl_send(int ctl, const void *msg, size_t len, const int *fds, int nfds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * 16)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {(void *)msg, len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

    if (nfds > 16)
        FAIL("at most 16 descriptors");
    if (nfds > 0) {
        memset(&u, 0, sizeof(u));
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    if (sendmsg(ctl, &mh, MSG_NOSIGNAL) != (ssize_t)len)
        FAIL("sendmsg on the control socket: %s", fl_errname(errno));
}

ssize_t fl_ctl_recv(int ctl, void *buf, size_t len, unsigned ms)
{
    struct pollfd pf = {ctl, POLLIN, 0};

    if (poll(&pf, 1, (int)ms) != 1)
        return -1;
    return recv(ctl, buf, len, MSG_DONTWAIT);
}
