/* Scaffolding shared by the conformance programs; see common.h. */
#include "common.h"

#include <stdarg.h>
#include <sys/prctl.h>
#include <time.h>

static void on_watchdog(int sig)
{
    (void)sig;
    FAIL("watchdog: still running after 30 seconds");
}

void cf_start(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* A hung program still shows what it and its peer printed. */
    signal(SIGALRM, on_watchdog);
    alarm(30);
}

static pid_t peer_pid = -1;
static int peer_out = -1;
static int sync_in = -1, sync_out = -1;

static void print_peer_output(void)
{
    char buf[4096];
    size_t have = 0;
    ssize_t r;
    while (have < sizeof buf - 1 && (r = read(peer_out, buf + have, sizeof buf - 1 - have)) > 0)
        have += (size_t)r;
    buf[have] = '\0';
    for (char *line = buf, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        printf("peer: %s\n", line);
        if (!nl)
            break;
    }
    close(peer_out);
    peer_out = -1;
}

void cf_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    printf("FAIL %s:%d: ", file, line);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    /* A peer still running would hide what it already reported: stop it and show that. */
    if (peer_pid > 0 && peer_out >= 0) {
        kill(peer_pid, SIGKILL);
        waitpid(peer_pid, NULL, 0);
        print_peer_output();
    }
    fflush(stdout);
    exit(1);
}

const char *cf_errname(int err)
{
    static char buf[32];
    const char *name = strerrorname_np(err);
    if (name)
        return name;
    snprintf(buf, sizeof buf, "errno%d", err);
    return buf;
}

long cf_report(const char *label, long r, int err)
{
    if (r == -1)
        printf("%s: -1 %s\n", label, cf_errname(err));
    else
        printf("%s: %ld\n", label, r);
    return r;
}

void cf_loopback(int family, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    if (family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)ss;
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port);
        sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        *len = sizeof *sin;
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(port);
        sin6->sin6_addr = in6addr_loopback;
        *len = sizeof *sin6;
    }
}

int cf_listen(int family)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int one = 1;
    int fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0)
        FAIL("socket: %s", cf_errname(errno));
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        FAIL("SO_REUSEADDR: %s", cf_errname(errno));
    cf_loopback(family, 0, &ss, &len);
    if (bind(fd, (struct sockaddr *)&ss, len) < 0)
        FAIL("bind: %s", cf_errname(errno));
    /* Deep enough for the many-connection programs to connect before accepting. */
    if (listen(fd, 2048) < 0)
        FAIL("listen: %s", cf_errname(errno));
    return fd;
}

uint16_t cf_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        FAIL("getsockname: %s", cf_errname(errno));
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

int cf_connect(int family, uint16_t port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0)
        FAIL("socket: %s", cf_errname(errno));
    cf_loopback(family, port, &ss, &len);
    if (connect(fd, (struct sockaddr *)&ss, len) < 0)
        FAIL("connect: %s", cf_errname(errno));
    return fd;
}

int cf_accept(int lfd)
{
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
        FAIL("accept: %s", cf_errname(errno));
    return fd;
}

pid_t cf_fork(void)
{
    pid_t parent = getpid();
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        FAIL("fork: %s", cf_errname(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(3);
        alarm(30);
        /* The parent's peer is not this process's to stop or reap. */
        peer_pid = -1;
        peer_out = -1;
    }
    return pid;
}

int cf_wait_child(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            FAIL("waitpid: %s", cf_errname(errno));
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

void cf_spawn(void (*fn)(void *), void *arg)
{
    int out[2], down[2], up[2];

    CHECK(peer_pid == -1);
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(down, O_CLOEXEC) < 0 || pipe2(up, O_CLOEXEC) < 0)
        FAIL("pipe: %s", cf_errname(errno));
    peer_pid = cf_fork();
    if (peer_pid == 0) {
        if (dup2(out[1], STDOUT_FILENO) < 0)
            _exit(3);
        setvbuf(stdout, NULL, _IOLBF, 0);
        close(out[0]);
        close(out[1]);
        close(down[1]);
        close(up[0]);
        sync_in = down[0];
        sync_out = up[1];
        peer_pid = -1;
        fn(arg);
        exit(0);
    }
    close(out[1]);
    close(down[0]);
    close(up[1]);
    peer_out = out[0];
    sync_in = up[0];
    sync_out = down[1];
}

pid_t cf_peer_pid(void)
{
    return peer_pid;
}

void cf_join(void)
{
    CHECK(peer_pid > 0);
    /* Closing our sync ends first unblocks a peer waiting on us, which then fails visibly. */
    close(sync_out);
    int status = cf_wait_child(peer_pid);
    peer_pid = -1;
    print_peer_output();
    close(sync_in);
    if (status != 0)
        FAIL("peer exited with status %d", status);
}

int cf_listen_spawn(void (*client)(void *port))
{
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    cf_spawn(client, &port);
    return l;
}

int cf_serve_late(void (*client)(void *port), long ms)
{
    int l = cf_listen_spawn(client);
    struct timespec late = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&late, &late) < 0 && errno == EINTR)
        ;
    int s = cf_accept(l);
    close(l);
    return s;
}

int cf_serve(void (*client)(void *port))
{
    return cf_serve_late(client, 0);
}

enum { CUE_CLOSE, CUE_WRITE };

void cf_cued_writer(void *port)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)port);
    while (cf_wait_u64() == CUE_WRITE)
        cf_write_all(fd, "data", 4);
    close(fd);
}

void cf_cue_write(void)
{
    cf_post_u64(CUE_WRITE);
}

void cf_cue_close(void)
{
    cf_post_u64(CUE_CLOSE);
}

void cf_expect_ok(int fd)
{
    char buf[8];
    CHECK(shutdown(fd, SHUT_WR) == 0);
    size_t n = cf_read_full(fd, buf, sizeof buf);
    printf("client got %.*s\n", (int)n, buf);
    CHECK(n == 2 && memcmp(buf, "ok", 2) == 0);
    close(fd);
}

void cf_answer_ok(int fd, const char *want, size_t n)
{
    char buf[256];
    size_t got = cf_read_full(fd, buf, sizeof buf);
    printf("read until EOF: %.*s\n", (int)got, buf);
    CHECK(got == n && memcmp(buf, want, n) == 0);
    cf_write_all(fd, "ok", 2);
    close(fd);
}

void cf_post_u64(uint64_t v)
{
    if (write(sync_out, &v, sizeof v) != (ssize_t)sizeof v)
        FAIL("sync write: %s", cf_errname(errno));
}

uint64_t cf_wait_u64(void)
{
    uint64_t v;
    ssize_t r;
    while ((r = read(sync_in, &v, sizeof v)) < 0 && errno == EINTR)
        ;
    if (r != (ssize_t)sizeof v)
        FAIL("the other process went away");
    return v;
}

void cf_post(void)
{
    cf_post_u64(0);
}

void cf_wait(void)
{
    cf_wait_u64();
}

/* Field 3 of /proc/PID/task/TID/stat is the scheduler state; 'S' is an interruptible sleep. */
static char task_state(pid_t pid, pid_t tid)
{
    char path[64], buf[512];
    ssize_t n;
    int fd;
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        FAIL("open %s: %s", path, cf_errname(errno));
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        FAIL("read %s", path);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        FAIL("unexpected %s", path);
    return p[2];
}

void cf_wait_sleeping(pid_t pid, pid_t tid)
{
    const struct timespec tick = {0, 2000000};
    /* Two consecutive sightings a little apart: a thread passing through a short sleep on its
     * way to the blocking call is unlikely to be caught twice. */
    int seen = 0;
    while (seen < 2) {
        seen = task_state(pid, tid) == 'S' ? seen + 1 : 0;
        nanosleep(&tick, NULL);
    }
    const struct timespec settle = {0, 50000000};
    nanosleep(&settle, NULL);
}

void cf_interrupt_parent(void)
{
    pid_t parent = getppid();
    cf_wait_sleeping(parent, parent);
    if (kill(parent, SIGUSR1) < 0)
        FAIL("kill: %s", cf_errname(errno));
    cf_wait();
}

void cf_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            FAIL("write: %s", r < 0 ? cf_errname(errno) : "returned 0");
        p += r;
        n -= (size_t)r;
    }
}

size_t cf_read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            FAIL("read: %s", cf_errname(errno));
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return got;
}

void cf_read_exact(int fd, void *buf, size_t n)
{
    size_t got = cf_read_full(fd, buf, n);
    if (got != n)
        FAIL("read: EOF after %zu of %zu bytes", got, n);
}

void cf_epoll_read_exact(int ep, int fd, void *buf, size_t n)
{
    size_t got = 0;

    while (got < n) {
        struct epoll_event ev;
        ssize_t k;
        while (got < n && (k = read(fd, (char *)buf + got, n - got)) > 0)
            got += (size_t)k;
        if (got == n)
            break;
        int r = epoll_wait(ep, &ev, 1, 10000);
        if (r != 1)
            FAIL("epoll_wait returned %d after %zu of %zu bytes", r, got, n);
    }
}

void cf_epoll_watch_in(int ep, int fd, uint64_t tag)
{
    cf_set_nonblock(fd, true);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLET, tag);
}

void cf_epoll_increments(int ep, int fd, uint32_t first, uint32_t rounds)
{
    for (uint32_t v = first; v < first + rounds; v++) {
        uint32_t back;
        cf_write_all(fd, &v, sizeof(v));
        cf_epoll_read_exact(ep, fd, &back, sizeof(back));
        if (back != v + 1)
            FAIL("sent %u, got %u back", v, back);
    }
}

void cf_set_nonblock(int fd, bool on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        FAIL("F_GETFL: %s", cf_errname(errno));
    fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
    if (fcntl(fd, F_SETFL, fl) < 0)
        FAIL("F_SETFL: %s", cf_errname(errno));
}

void cf_on_signal(int sig, void (*handler)(int), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) < 0)
        FAIL("sigaction: %s", cf_errname(errno));
}

static void *signaller_main(void *arg)
{
    struct cf_signaller *s = arg;

    while (!s->stop) {
        if (!s->go) {
            sched_yield();
            continue;
        }
        s->go = 0;
        usleep(s->min_us + (s->spread_us ? (unsigned)rand_r(&s->seed) % s->spread_us : 0));
        pthread_kill(s->target, SIGUSR1);
    }
    return NULL;
}

void cf_signaller_start(struct cf_signaller *s, pthread_t target, unsigned min_us,
                        unsigned spread_us)
{
    s->target = target;
    s->min_us = min_us;
    s->spread_us = spread_us;
    s->seed = 1;
    s->go = s->stop = 0;
    if (pthread_create(&s->thread, NULL, signaller_main, s) != 0)
        FAIL("pthread_create");
}

void cf_signal_soon(struct cf_signaller *s)
{
    s->go = 1;
}

void cf_signal_taken(struct cf_signaller *s)
{
    while (s->go)
        sched_yield();
}

void cf_signaller_stop(struct cf_signaller *s)
{
    s->stop = 1;
    pthread_join(s->thread, NULL);
}

void cf_ignore_sigpipe(void)
{
    cf_on_signal(SIGPIPE, SIG_IGN, 0);
}

/* A 64-bit mix of offset and seed; each byte depends on the whole offset so shifted, repeated
 * or dropped ranges never verify. */
static inline uint8_t pattern_byte(uint64_t off, unsigned seed)
{
    uint64_t x = (off >> 3) * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 32;
    return (uint8_t)(x >> ((off & 7) * 8));
}

void cf_fill(void *buf, size_t n, uint64_t off, unsigned seed)
{
    uint8_t *p = buf;
    for (size_t i = 0; i < n; i++)
        p[i] = pattern_byte(off + i, seed);
}

bool cf_verify(const void *buf, size_t n, uint64_t off, unsigned seed)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern_byte(off + i, seed)) {
            fprintf(stderr, "pattern mismatch at stream offset %llu\n",
                    (unsigned long long)(off + i));
            return false;
        }
    return true;
}

void cf_stdio_echo_client(void *port)
{
    enum { TOTAL = 100000 };
    static char buf[TOTAL + 64];
    int fd = cf_connect(AF_INET, *(uint16_t *)port);
    cf_send_pattern(fd, TOTAL, 1 << 14, 61);
    CHECK(shutdown(fd, SHUT_WR) == 0);
    size_t n = cf_read_full(fd, buf, sizeof buf);
    printf("client got back %zu bytes\n", n);
    CHECK(n == TOTAL + strlen(CF_STDIO_LAST));
    CHECK(cf_verify(buf, TOTAL, 0, 61));
    CHECK(memcmp(buf + TOTAL, CF_STDIO_LAST, strlen(CF_STDIO_LAST)) == 0);
    close(fd);
}

union fds_ctl {
    struct cmsghdr h;
    char space[CMSG_SPACE(CF_FDS_MAX * sizeof(int))];
};

void cf_send_fds(int unix_fd, const int *fds, int n)
{
    union fds_ctl ctl;
    struct iovec iov = {"F", 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
                         .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int))};
    CHECK(n > 0 && n <= CF_FDS_MAX);
    memset(&ctl, 0, sizeof ctl);
    struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
    memcpy(CMSG_DATA(h), fds, (size_t)n * sizeof(int));
    EXPECT_RET("sendmsg SCM_RIGHTS", sendmsg(unix_fd, &msg, 0), 1);
}

void cf_recv_fds(int unix_fd, int *fds, int n)
{
    char c;
    union fds_ctl ctl;
    struct iovec iov = {&c, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
                         .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int))};
    CHECK(n > 0 && n <= CF_FDS_MAX);
    CHECK(recvmsg(unix_fd, &msg, 0) == 1);
    struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
    CHECK(h && h->cmsg_type == SCM_RIGHTS && h->cmsg_len == CMSG_LEN((size_t)n * sizeof(int)));
    CHECK(!(msg.msg_flags & MSG_CTRUNC) && !CMSG_NXTHDR(&msg, h));
    memcpy(fds, CMSG_DATA(h), (size_t)n * sizeof(int));
}

void cf_send_pattern(int fd, uint64_t total, size_t chunk, unsigned seed)
{
    uint8_t *buf = malloc(chunk);
    CHECK(buf);
    for (uint64_t off = 0; off < total;) {
        size_t n = total - off < chunk ? (size_t)(total - off) : chunk;
        cf_fill(buf, n, off, seed);
        cf_write_all(fd, buf, n);
        off += n;
    }
    free(buf);
}

static uint64_t recv_pattern(int fd, uint64_t limit, size_t chunk, unsigned seed)
{
    uint8_t *buf = malloc(chunk);
    uint64_t off = 0;
    CHECK(buf);
    while (off < limit) {
        size_t want = limit - off < chunk ? (size_t)(limit - off) : chunk;
        ssize_t r = read(fd, buf, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            FAIL("read at offset %llu: %s", (unsigned long long)off, cf_errname(errno));
        if (r == 0)
            break;
        if (!cf_verify(buf, (size_t)r, off, seed))
            FAIL("data corrupted near offset %llu", (unsigned long long)off);
        off += (uint64_t)r;
    }
    free(buf);
    return off;
}

uint64_t cf_recv_pattern(int fd, size_t chunk, unsigned seed)
{
    return recv_pattern(fd, UINT64_MAX, chunk, seed);
}

void cf_recv_pattern_n(int fd, uint64_t total, size_t chunk, unsigned seed)
{
    uint64_t got = recv_pattern(fd, total, chunk, seed);
    if (got != total)
        FAIL("EOF after %llu of %llu bytes", (unsigned long long)got, (unsigned long long)total);
}

int cf_send_until_error(int fd, int flags, int tries)
{
    /* After tries sends in a row, keep trying at a slower pace for up to 2 s: the error
     * often waits for the peer's RST, which a loaded machine delivers late. */
    for (int i = 0; i < tries + 400; i++) {
        ssize_t r = send(fd, "x", 1, flags);
        if (r < 0 && errno != EINTR)
            return errno;
        CHECK(r != 0);
        if (i >= tries)
            usleep(5000);
    }
    return 0;
}

size_t cf_echo_after_eof(int fd)
{
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    CHECK(buf);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            CHECK(buf);
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            FAIL("echo read: %s", cf_errname(errno));
        if (r == 0)
            break;
        len += (size_t)r;
    }
    cf_write_all(fd, buf, len);
    close(fd);
    free(buf);
    return len;
}

uint64_t cf_echo_client(int fd, uint64_t total, unsigned seed)
{
    cf_send_pattern(fd, total, 1 << 16, seed);
    if (shutdown(fd, SHUT_WR) < 0)
        FAIL("shutdown: %s", cf_errname(errno));
    return cf_recv_pattern(fd, 1 << 16, seed);
}

struct flag_name {
    unsigned bit;
    const char *name;
};

static const char *flags_str(unsigned v, const struct flag_name *names, size_t count)
{
    static char buf[256];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < count; i++)
        if (v & names[i].bit) {
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", len ? "|" : "",
                                    names[i].name);
            v &= ~names[i].bit;
        }
    if (v)
        snprintf(buf + len, sizeof buf - len, "%s0x%x", len ? "|" : "", v);
    else if (len == 0)
        snprintf(buf, sizeof buf, "0");
    return buf;
}

const char *cf_poll_str(int revents)
{
    static const struct flag_name names[] = {
        {POLLIN, "POLLIN"},     {POLLPRI, "POLLPRI"},   {POLLOUT, "POLLOUT"},
        {POLLRDHUP, "POLLRDHUP"}, {POLLERR, "POLLERR"}, {POLLHUP, "POLLHUP"},
        {POLLNVAL, "POLLNVAL"}, {POLLRDNORM, "POLLRDNORM"}, {POLLWRNORM, "POLLWRNORM"},
        {POLLRDBAND, "POLLRDBAND"}, {POLLWRBAND, "POLLWRBAND"},
    };
    return flags_str((unsigned)revents & 0xffff, names, sizeof names / sizeof names[0]);
}

const char *cf_epoll_str(uint32_t events)
{
    static const struct flag_name names[] = {
        {EPOLLIN, "EPOLLIN"},     {EPOLLPRI, "EPOLLPRI"}, {EPOLLOUT, "EPOLLOUT"},
        {EPOLLRDHUP, "EPOLLRDHUP"}, {EPOLLERR, "EPOLLERR"}, {EPOLLHUP, "EPOLLHUP"},
        {EPOLLRDNORM, "EPOLLRDNORM"}, {EPOLLWRNORM, "EPOLLWRNORM"},
        {EPOLLRDBAND, "EPOLLRDBAND"}, {EPOLLWRBAND, "EPOLLWRBAND"},
    };
    return flags_str(events, names, sizeof names / sizeof names[0]);
}

static int by_tag(const void *a, const void *b)
{
    uint64_t x = ((const struct epoll_event *)a)->data.u64;
    uint64_t y = ((const struct epoll_event *)b)->data.u64;
    return x < y ? -1 : x > y;
}

int cf_epoll_report(const char *label, int ep, int timeout)
{
    struct epoll_event ev[64];
    int n;
    while ((n = epoll_wait(ep, ev, 64, timeout)) < 0 && errno == EINTR)
        ;
    if (n < 0)
        FAIL("%s: epoll_wait: %s", label, cf_errname(errno));
    qsort(ev, (size_t)n, sizeof ev[0], by_tag);
    printf("%s: %d", label, n);
    for (int i = 0; i < n; i++)
        printf(" [%llu %s]", (unsigned long long)ev[i].data.u64, cf_epoll_str(ev[i].events));
    printf("\n");
    return n;
}

void cf_epoll_ctl(int ep, int op, int fd, uint32_t events, uint64_t tag)
{
    struct epoll_event ev = {.events = events, .data.u64 = tag};
    if (epoll_ctl(ep, op, fd, &ev) < 0)
        FAIL("epoll_ctl %d: %s", op, cf_errname(errno));
}

uint64_t cf_fill_until_full(int fd, uint64_t off, unsigned seed)
{
    static uint8_t buf[65536];
    cf_set_nonblock(fd, true);
    for (;;) {
        cf_fill(buf, sizeof buf, off, seed);
        ssize_t r = write(fd, buf, sizeof buf);
        if (r > 0) {
            off += (uint64_t)r;
            continue;
        }
        if (r < 0 && errno != EAGAIN)
            FAIL("write: %s", cf_errname(errno));
        CHECK(r != 0);
        /* Acknowledgements still in flight can free room after an EAGAIN. */
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, 0) == 0)
            return off;
    }
}

void cf_fanout_peer(uint16_t port, int n)
{
    int *fds = calloc((size_t)n, sizeof *fds);
    CHECK(fds && n <= 255);
    for (int i = 0; i < n; i++)
        fds[i] = cf_connect(AF_INET, port);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            uint8_t b = (uint8_t)i;
            if ((i % 3 == 0) == (pass == 0))
                cf_write_all(fds[i], &b, 1);
        }
        if (pass == 0) {
            cf_post();
            cf_wait();
        }
    }
    for (int i = 0; i < n; i++) {
        uint8_t b;
        cf_read_exact(fds[i], &b, 1);
        if (b != (uint8_t)(i + 1))
            FAIL("connection %d: got %u back", i, b);
        close(fds[i]);
    }
    printf("all %d replies right\n", n);
    free(fds);
}

void cf_fanout_answer(const int *fds, int *idx, int n)
{
    cf_post();
    for (int i = 0; i < n; i++) {
        uint8_t b;
        if (idx[i] < 0) {
            cf_read_exact(fds[i], &b, 1);
            idx[i] = b;
        }
        b = (uint8_t)(idx[i] + 1);
        cf_write_all(fds[i], &b, 1);
        close(fds[i]);
    }
}

void cf_raise_nofile(rlim_t n)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        FAIL("getrlimit: %s", cf_errname(errno));
    if (rl.rlim_cur >= n)
        return;
    rl.rlim_cur = n;
    if (rl.rlim_max < n)
        rl.rlim_max = n;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        FAIL("setrlimit NOFILE %llu: %s", (unsigned long long)n, cf_errname(errno));
}

void cf_echo_worker(int l, size_t msg, long delay_ms, int gate)
{
    unsigned char *buf = malloc(msg);
    CHECK(buf != NULL);
    for (;;) {
        int s = accept(l, NULL, NULL);
        if (s < 0)
            _exit(1);
        cf_read_exact(s, buf, msg);
        nanosleep(&(struct timespec){delay_ms / 1000, (delay_ms % 1000) * 1000000}, NULL);
        cf_write_all(s, buf, msg);
        close(s);
        if (gate >= 0) {
            close(gate);
            gate = -1;
        }
    }
}

void cf_echo_rounds(uint16_t port, int rounds, int at_once, size_t msg)
{
    unsigned char *buf = malloc(msg);
    int *fd = calloc((size_t)at_once, sizeof(*fd)), ok = 0;
    CHECK(buf != NULL && fd != NULL);
    for (int i = 0; i < rounds; i++) {
        for (int k = 0; k < at_once; k++) {
            fd[k] = cf_connect(AF_INET, port);
            cf_fill(buf, msg, 0, (unsigned)(at_once * i + k));
            cf_write_all(fd[k], buf, msg);
        }
        for (int k = 0; k < at_once; k++) {
            memset(buf, 0, msg);
            cf_read_exact(fd[k], buf, msg);
            ok += cf_verify(buf, msg, 0, (unsigned)(at_once * i + k));
            close(fd[k]);
        }
    }
    printf("client: %d of %d round trips intact\n", ok, rounds * at_once);
    CHECK(ok == rounds * at_once);
    free(fd);
    free(buf);
}

static void echo_once_client(void *port)
{
    cf_echo_rounds(*(uint16_t *)port, 1, 1, 100);
}

void cf_echo_once(int l)
{
    unsigned char buf[100];
    uint16_t port = cf_port(l);

    cf_spawn(echo_once_client, &port);
    int s = cf_accept(l);
    cf_read_exact(s, buf, sizeof buf);
    cf_write_all(s, buf, sizeof buf);
    close(s);
    cf_join();
}

void cf_show_urgent(int fd, const char *when)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLPRI};
    int mark = -1, queued = -1;

    CHECK(poll(&p, 1, 0) >= 0);
    if (ioctl(fd, SIOCATMARK, &mark) < 0 || ioctl(fd, FIONREAD, &queued) < 0)
        FAIL("SIOCATMARK or FIONREAD: %s", cf_errname(errno));
    printf("%s: %s, at mark %d, %d queued\n", when, cf_poll_str(p.revents), mark, queued);
}

long cf_recv_oob(int fd, const char *label, int flags)
{
    char c = 0;
    long r = recv(fd, &c, 1, MSG_OOB | flags);
    int e = errno;

    if (r == 1)
        printf("%s: '%c'\n", label, c);
    else
        cf_report(label, r, e);
    return r;
}

volatile sig_atomic_t cf_urgent_signals;
int cf_urgent_ack = -1;

static void on_sigurg(int sig)
{
    (void)sig;
    cf_urgent_signals++;
    if (cf_urgent_ack >= 0 && write(cf_urgent_ack, "!", 1) != 1)
        _exit(1);
}

void cf_catch_sigurg(void)
{
    cf_on_signal(SIGURG, on_sigurg, SA_RESTART);
}

void cf_wait_sigurg(int want, int ms)
{
    for (int i = 0; i < ms && cf_urgent_signals < want; i++)
        usleep(1000);
}

void cf_urgent_sender(void *port)
{
    char c;
    int fd = cf_connect(AF_INET, *(uint16_t *)port);
    while (cf_wait_u64()) {
        EXPECT_RET("urgent send", send(fd, "u", 1, MSG_OOB), 1);
        cf_post();
    }
    CHECK(shutdown(fd, SHUT_WR) == 0);
    while (read(fd, &c, 1) > 0)
        ;
    close(fd);
}

void cf_read_some_then_reset(void (*client)(void *port), unsigned seed)
{
    char buf[1024];
    int small = 1024;
    int s = cf_serve(client);
    CHECK(setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0);
    cf_post();
    cf_read_exact(s, buf, sizeof buf);
    CHECK(cf_verify(buf, sizeof buf, 0, seed));
    /* Let the writer block on the full buffers first. */
    usleep(100000);
    close(s);
    cf_join();
}

void cf_recv_filled(int s, unsigned seed)
{
    uint64_t filled = cf_wait_u64();
    cf_recv_pattern_n(s, filled, 4096, seed);
    printf("all of it arrived intact\n");
    EXPECT_RET("then EOF", read(s, &(char){0}, 1), 0);
    close(s);
    cf_join();
}
