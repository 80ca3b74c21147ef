/* The resources a client hands the server with a proposal stay in the client's hands: the
 * arena memfd and the doorbell eventfds are shared open files. A hostile client turns them
 * against an accelerated echo server; the server must lose that client's connections at
 * most. Afterwards a plain probe and an accelerated probe (other processes' connections)
 * must both get their echo, and the server must be alive.
 *
 * usage: shm_resources arena_short|arena_shrunk|bell_saturated
 *   arena_short     a proposal announces a 1 MiB arena whose memfd holds 4 KiB, with the
 *                   segment beyond the end of the file; then its TCP connection is made
 *   arena_shrunk    a real client truncates its arena (reopened through /proc/self/map_files)
 *                   to nothing while its connection is attached
 *   bell_saturated  a real client makes the doorbells the server rings blocking and fills
 *                   their counters, claims to wait, and sends: ringing must not block the
 *                   server */
#include "faults.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RING 4096u

static void arena_short(uint16_t port, const char *ctl)
{
    struct fl_forge f;
    int fds[CLC_FD_MAX], s = fl_raw_socket();

    fl_forge_init(&f, ctl, 1 << 20, 512 << 10, RING, 1);
    if (ftruncate(f.memfd, 4096) < 0)
        FAIL("ftruncate: %s", fl_errname(errno));
    fl_ctl_send(f.ctl, &f.p, sizeof(f.p), fds, fl_forge_fds(&f, s, fds));
    fl_raw_connect(s, port, 0);
}

/* An accelerated connection (in *fd) that carried n bytes each way; returns its segment. */
static struct seg_hdr *attached(uint16_t port, size_t n, int *fd)
{
    struct fl_arena a;

    *fd = fl_connect(port);
    fl_send_stream(*fd, false, 0, n, 9);
    fl_recv_stream(*fd, false, 0, n, 9);
    fl_arena_find(&a);
    return fl_seg_find(&a, n, n);
}

static void arena_shrunk(uint16_t port, const char *ctl)
{
    struct fl_arena a;
    int fd;

    (void)ctl;
    attached(port, 1000, &fd);
    fl_arena_find(&a);
    int mfd = open(a.file, O_RDWR | O_CLOEXEC);
    if (mfd < 0 || ftruncate(mfd, 0) < 0)
        FAIL("truncating %s: %s", a.file, fl_errname(errno));
    close(mfd);
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* This process's eventfds in ascending order. */
static int eventfds(int *out, int max)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    char path[300], target[64];
    int n = 0;

    if (!d)
        FAIL("/proc/self/fd: %s", fl_errname(errno));
    while ((e = readdir(d)) && n < max) {
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t l = readlink(path, target, sizeof(target) - 1);
        if (l > 0 && !strncmp(target, "anon_inode:[eventfd]", (size_t)l))
            out[n++] = atoi(e->d_name);
    }
    closedir(d);
    qsort(out, (size_t)n, sizeof(int), cmp_int);
    return n;
}

static void bell_saturated(uint16_t port, const char *ctl)
{
    uint64_t full = 0xfffffffffffffffeull;
    int bells[8], fd;

    (void)ctl;
    struct seg_hdr *h = attached(port, 1000, &fd);
    /* The library makes a connection's four doorbells in order: the first two are the ones
     * this side sleeps on and the server rings. */
    if (eventfds(bells, 8) != 4)
        FAIL("expected the 4 doorbells of one connection");
    for (int i = 0; i < 2; i++)
        if (syscall(SYS_fcntl, bells[i], F_SETFL, 0) < 0 ||
            syscall(SYS_write, bells[i], &full, sizeof(full)) != sizeof(full))
            FAIL("saturating eventfd %d: %s", bells[i], fl_errname(errno));
    atomic_store(&h->ring[0].prod_wait, 0x41u);
    atomic_store(&h->ring[1].cons_wait, 0x43u);
    fl_send_stream(fd, false, 1000, 1000, 9);
}

/* A probe in a process of its own, so that the server's fate can be told apart from the
 * probe's failure. */
static void probe(pid_t server, uint16_t port, bool accelerated)
{
    pid_t p = fl_fork();

    if (p == 0) {
        if (accelerated)
            fl_probe_accelerated(port, 5000);
        else
            fl_probe_plain(port, 1000);
        _exit(0);
    }
    int st = fl_reap(p);
    if (!fl_alive(server)) {
        int how = fl_reap(server);
        FAIL("the server died: %s %d%s", how > 128 ? "signal" : "exit status",
             how > 128 ? how - 128 : how, how == 128 + SIGBUS ? " (SIGBUS)" : "");
    }
    if (st != 0)
        FAIL("the %s probe failed with the server alive", accelerated ? "accelerated" : "plain");
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*attack)(uint16_t port, const char *ctl);
    } variants[] = {
        {"arena_short", arena_short},
        {"arena_shrunk", arena_shrunk},
        {"bell_saturated", bell_saturated},
    };
    void (*attack)(uint16_t, const char *) = NULL;
    struct fl_chan srv, att;
    char ctl[4400];

    fl_start(50);
    for (size_t i = 0; argc == 2 && i < sizeof(variants) / sizeof(variants[0]); i++)
        if (!strcmp(argv[1], variants[i].name))
            attack = variants[i].attack;
    if (!attack) {
        fprintf(stderr, "usage: shm_resources arena_short|arena_shrunk|bell_saturated\n");
        return 2;
    }
    fl_chan_init(&srv);
    pid_t server = fl_fork();
    if (server == 0) {
        uint16_t port;
        fl_chan_side(&srv, 1);
        int l = fl_listen(&port);
        fl_post(&srv, port);
        fl_echo_server(l);
    }
    fl_chan_side(&srv, 0);
    uint16_t port = (uint16_t)fl_wait(&srv);
    fl_ctl_path(server, ctl, sizeof(ctl));

    fl_chan_init(&att);
    pid_t attacker = fl_fork();
    if (attacker == 0) {
        fl_chan_side(&att, 1);
        attack(port, ctl);
        fl_post(&att, 1);
        fl_wait(&att); /* keep every descriptor open until the probes are done */
        _exit(0);
    }
    fl_chan_side(&att, 0);
    fl_wait(&att);

    probe(server, port, false);
    probe(server, port, true);
    fl_post(&att, 1);
    if (fl_reap(attacker) != 0)
        FAIL("the attacker failed");
    kill(server, SIGKILL);
    fl_reap(server);
    printf("%s: the server served both probes and lived on\n", argv[1]);
    return 0;
}
