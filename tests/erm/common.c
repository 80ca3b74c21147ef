/* Scaffolding of the ERM programs; see common.h. */
#include "common.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

static pid_t peer_pid = -1;

static void on_watchdog(int sig)
{
    (void)sig;
    FAIL("watchdog: still running");
}

void et_start(unsigned seconds)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_watchdog);
    alarm(seconds);
}

void et_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    printf("FAIL %s:%d (%s): ", file, line, peer_pid == 0 ? "peer" : "main");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (peer_pid > 0)
        kill(peer_pid, SIGKILL);
    _exit(1);
}

const char *et_errname(int err)
{
    return err ? strerrorname_np(err) ?: "unknown errno" : "0";
}

/* Each end's process makes its own socket: the one that accepts listens, and tells the other
 * its port through a pipe (a listener inherited across fork and closed by both would be a
 * different story, not ERM's). */
int et_pair(int server, void (*peer)(int fd, void *arg), void *arg)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int p[2], fd;

    CHECK_OK(pipe(p));
    fflush(stdout);
    peer_pid = CHECK_OK(fork());
    int accepting = peer_pid == 0 ? !server : server;
    if (accepting) {
        socklen_t al = sizeof a;
        int l = CHECK_OK(socket(AF_INET, SOCK_STREAM, 0));
        CHECK_OK(bind(l, (struct sockaddr *)&a, sizeof a));
        CHECK_OK(listen(l, 8));
        CHECK_OK(getsockname(l, (struct sockaddr *)&a, &al));
        CHECK(write(p[1], &a.sin_port, sizeof a.sin_port) == sizeof a.sin_port);
        fd = CHECK_OK(accept(l, NULL, NULL));
        close(l);
    } else {
        CHECK(read(p[0], &a.sin_port, sizeof a.sin_port) == sizeof a.sin_port);
        fd = CHECK_OK(socket(AF_INET, SOCK_STREAM, 0));
        CHECK_OK(connect(fd, (struct sockaddr *)&a, sizeof a));
    }
    close(p[0]);
    close(p[1]);
    if (peer_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        peer(fd, arg);
        close(fd);
        fflush(stdout);
        _exit(0);
    }
    return fd;
}

void et_join(void)
{
    int st;
    pid_t p = peer_pid;

    peer_pid = -1;
    if (waitpid(p, &st, 0) != p)
        FAIL("waitpid: %s", et_errname(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st))
        FAIL("the peer ended with status 0x%x", st);
}

pid_t et_peer(void)
{
    return peer_pid;
}

void et_send_u64(int fd, uint64_t v)
{
    if (write(fd, &v, sizeof v) != sizeof v)
        FAIL("write: %s", et_errname(errno));
}

uint64_t et_recv_u64(int fd)
{
    uint64_t v;
    size_t have = 0;

    while (have < sizeof v) {
        ssize_t r = read(fd, (char *)&v + have, sizeof v - have);
        if (r <= 0)
            FAIL("read: %zd %s", r, r < 0 ? et_errname(errno) : "EOF");
        have += (size_t)r;
    }
    return v;
}

ssize_t et_sendmsg(int fd, const struct smc_erm_cmd_copy *cmd, int n, int flags)
{
    size_t room = (size_t)n * CMSG_SPACE(sizeof *cmd);
    char *buf = calloc(1, room + 1);
    struct msghdr mh = {.msg_control = buf, .msg_controllen = room};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

    for (int i = 0; i < n; i++, c = CMSG_NXTHDR(&mh, c)) {
        c->cmsg_level = SOL_SMC;
        c->cmsg_type = SMC_ERM_CMD;
        c->cmsg_len = CMSG_LEN(sizeof *cmd);
        memcpy(CMSG_DATA(c), &cmd[i], sizeof *cmd);
    }
    ssize_t r = sendmsg(fd, &mh, flags);
    int e = errno;
    free(buf);
    errno = e;
    return r;
}

struct smc_erm_cmd_copy et_cmd(uint32_t type, uint32_t flags, int src, uint64_t src_off, int dst,
                               uint64_t dst_off, uint64_t len, uint64_t tag)
{
    return (struct smc_erm_cmd_copy){.hdr = {type, flags}, .len = len, .src_idx = src,
                                     .dst_idx = dst, .src_offset = src_off,
                                     .dst_offset = dst_off, .tag = tag};
}

int et_errqueue(int fd, struct smc_rmem_compl_event *ev, int max)
{
    size_t room = (size_t)max * CMSG_SPACE(sizeof *ev);
    char *buf = calloc(1, room);
    struct msghdr mh = {.msg_control = buf, .msg_controllen = room};
    int n = 0;

    if (recvmsg(fd, &mh, MSG_ERRQUEUE) < 0) {
        int e = errno;
        free(buf);
        errno = e;
        return -1;
    }
    CHECK(mh.msg_flags & MSG_ERRQUEUE);
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        CHECK(c->cmsg_level == SOL_SMC && c->cmsg_type == SMC_ERM_CMD_COMPL);
        CHECK(n < max);
        memcpy(&ev[n++], CMSG_DATA(c), sizeof *ev);
    }
    free(buf);
    return n;
}

void et_completions(int fd, struct smc_rmem_compl_event *ev, int want, int ms)
{
    uint64_t until = et_now_ms() + (uint64_t)ms;
    int have = 0;

    while (have < want) {
        struct pollfd pf = {fd, 0, 0};
        int left = (int)(until - et_now_ms());
        if (left <= 0 || poll(&pf, 1, left) < 0)
            FAIL("%d completions of %d within %d ms", have, want, ms);
        if (!(pf.revents & POLLERR))
            continue;
        int n = et_errqueue(fd, ev + have, want - have);
        if (n < 0)
            FAIL("recvmsg(MSG_ERRQUEUE) after POLLERR: %s", et_errname(errno));
        have += n;
    }
}

int et_reg(int fd, void *addr, size_t len, unsigned access)
{
    int id = usmc_erm_reg_mr(fd, addr, len, access);

    if (id < 0)
        FAIL("usmc_erm_reg_mr(%zu, 0x%x): %s", len, access, et_errname(errno));
    return id;
}

void *et_region(int fd, size_t len, unsigned access, int *id)
{
    void *p = usmc_erm_alloc(len);

    if (!p)
        FAIL("usmc_erm_alloc(%zu): %s", len, et_errname(errno));
    *id = et_reg(fd, p, len, access);
    return p;
}

int et_maps(pid_t pid, const char *what)
{
    char path[64], line[512];
    int n = 0;

    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    CHECK(f);
    while (fgets(line, sizeof line, f))
        n += strstr(line, what) != NULL;
    fclose(f);
    return n;
}

int et_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;

    CHECK(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

uint64_t et_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
