/* The resources a client hands the server with a proposal stay in the client's hands: the
 * arena memfd and the doorbell sockets are shared open files. A hostile client turns them
 * against an accelerated echo server; the server must lose that client's connections at
 * most. Afterwards a plain probe and an accelerated probe (other processes' connections)
 * must both get their echo, and the server must be alive.
 *
 * usage: shm_resources arena_short|arena_shrunk|arena_punched|arena_remapped|bell_saturated
 *   arena_short     a proposal announces a 1 MiB arena whose memfd holds 4 KiB, with the
 *                   segment beyond the end of the file; then its TCP connection is made
 *   arena_shrunk    a real client reopens its arena (through /proc/self/map_files) while its
 *                   connection is attached and tries to shrink it, grow it, or seal it
 *                   against writes: the seals refuse each (EPERM)
 *   arena_punched   it punches a hole over the whole arena instead (the seals allow that):
 *                   every page, cursors included, reads as zeros from then on
 *   arena_remapped  it replaces its mapping of the arena with fresh memory at the same
 *                   address, writes into that (which the server never sees) and closes
 *   bell_saturated  a real client makes every doorbell socket it holds blocking and stuffs
 *                   it full, claims to wait, and sends: ringing must not block the server */
#include "faults.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RING 4096u

static void arena_short(uint16_t port, const char *ctl)
{
    struct fl_forge f;
    int s = fl_raw_socket();

    /* A 4 KiB arena, announced as 1 MiB with the segment at 512 KiB. */
    fl_forge_init(&f, ctl, 4096, 512 << 10, RING, 1);
    f.p.arena_size = 1 << 20;
    fl_forge_send(&f, s);
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
    return fl_seg_of(&a, *fd, n, n);
}

/* The memfd behind this process's arena, opened anew (an attached connection made first). */
static int arena_reopened(uint16_t port, struct fl_arena *a)
{
    int fd;

    attached(port, 1000, &fd);
    fl_arena_find(a);
    int mfd = open(a->file, O_RDWR | O_CLOEXEC);
    if (mfd < 0)
        FAIL("opening %s: %s", a->file, fl_errname(errno));
    return mfd;
}

static void arena_shrunk(uint16_t port, const char *ctl)
{
    struct fl_arena a;

    (void)ctl;
    int mfd = arena_reopened(port, &a);
    EXPECT_ERRNO(ftruncate(mfd, 0), EPERM);
    EXPECT_ERRNO(ftruncate(mfd, (off_t)a.size * 2), EPERM);
    EXPECT_ERRNO(fallocate(mfd, 0, (off_t)a.size, 4096), EPERM);
    EXPECT_ERRNO(fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE), EPERM);
    printf("arena sealed: it can be neither shrunk, grown nor sealed further\n");
    close(mfd);
}

static void arena_punched(uint16_t port, const char *ctl)
{
    struct fl_arena a;

    (void)ctl;
    int mfd = arena_reopened(port, &a);
    if (fallocate(mfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)a.size) < 0)
        FAIL("punching the arena: %s", fl_errname(errno));
    close(mfd);
    printf("arena punched: all zeros\n");
}

static void arena_remapped(uint16_t port, const char *ctl)
{
    struct fl_arena a;
    int fd;

    (void)ctl;
    attached(port, 1000, &fd);
    fl_arena_find(&a);
    if (mmap(a.base, a.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1,
             0) != a.base)
        FAIL("remapping the arena: %s", fl_errname(errno));
    /* Our library now writes where the server never looks, or finds its cursors gone
     * and resets the connection: either way, only this connection is concerned. */
    char junk[1000] = {0};
    ssize_t r = send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
    if (r < 0 && errno != ECONNRESET)
        FAIL("send on the remapped connection: %s", fl_errname(errno));
    close(fd);
    printf("arena replaced by fresh memory, connection written to and closed\n");
}

/* Every socket this process holds at or above the library's descriptor floor (the
 * top quarter of RLIMIT_NOFILE): its doorbell ends and its control channel. */
static int library_sockets(int *out, int max)
{
    struct rlimit rl;
    char path[300], target[64];
    int n = 0;

    getrlimit(RLIMIT_NOFILE, &rl);
    int floor = (int)(rl.rlim_cur - rl.rlim_cur / 4);
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d)) && n < max) {
        int fd = atoi(e->d_name);
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t l = readlink(path, target, sizeof(target) - 1);
        if (fd >= floor && l > 7 && !strncmp(target, "socket:", 7))
            out[n++] = fd;
    }
    if (d)
        closedir(d);
    return n;
}

/* A peer that makes every doorbell descriptor it holds blocking and stuffs them full,
 * then asks to be woken: ringing must never block the server. */
static void bell_saturated(uint16_t port, const char *ctl)
{
    static const char junk[4096];
    int socks[64], fd;

    (void)ctl;
    struct seg_hdr *h = attached(port, 1000, &fd);
    int n = library_sockets(socks, 64);
    if (n < 2)
        FAIL("expected the library's doorbell sockets, found %d", n);
    for (int i = 0; i < n; i++) {
        if (syscall(SYS_fcntl, socks[i], F_SETFL, 0) < 0)
            FAIL("clearing O_NONBLOCK on %d: %s", socks[i], fl_errname(errno));
        while (syscall(SYS_sendto, socks[i], junk, sizeof(junk), MSG_DONTWAIT, NULL, 0) > 0)
            ;
    }
    atomic_store(&h->ring[0].prod_wait, 0x41u);
    atomic_store(&h->ring[0].prod_how, RING_WAKE_BELL);
    atomic_store(&h->ring[1].cons_wait, 0x43u);
    atomic_store(&h->ring[1].cons_how, RING_WAKE_BELL);
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

struct variant_run {
    void (*attack)(uint16_t, const char *);
    uint16_t port;
    const char *ctl;
};

static void run_attack(void *arg)
{
    const struct variant_run *r = arg;

    r->attack(r->port, r->ctl);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*attack)(uint16_t port, const char *ctl);
    } variants[] = {
        {"arena_short", arena_short},
        {"arena_shrunk", arena_shrunk},
        {"arena_punched", arena_punched},
        {"arena_remapped", arena_remapped},
        {"bell_saturated", bell_saturated},
    };
    void (*attack)(uint16_t, const char *) = NULL;
    struct fl_chan srv;
    struct fl_actor attacker;
    char ctl[4400];

    fl_start(50);
    for (size_t i = 0; argc == 2 && i < sizeof(variants) / sizeof(variants[0]); i++)
        if (!strcmp(argv[1], variants[i].name))
            attack = variants[i].attack;
    if (!attack) {
        fprintf(stderr, "usage: shm_resources arena_short|arena_shrunk|arena_punched|"
                        "arena_remapped|bell_saturated\n");
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

    struct variant_run run = {attack, port, ctl};
    fl_actor_start(&attacker, run_attack, &run); /* it keeps what it took until the probes are done */

    probe(server, port, false);
    probe(server, port, true);
    fl_actor_end(&attacker);
    kill(server, SIGKILL);
    fl_reap(server);
    printf("%s: the server served both probes and lived on\n", argv[1]);
    return 0;
}
