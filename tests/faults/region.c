/* link: src/dev/region.c src/dev/slots.c src/dev/heap.c src/dev/chan.c src/dev/listeners.c src/core/addr.c src/core/sys.c */
/* Hostile regions: every kernel attached to a region can write all of it, so each of these
 * writes nonsense somewhere (or formats it again, or freezes) and the damage must stop at the
 * connections concerned, with no process crashing or hanging, and new connections working.
 * The program runs under usmc with USMC_DEVICE naming the region first (run.sh makes a fresh
 * one, lease 1000 ms), so its connections to itself go through the region.
 *
 *   header     the region's header overwritten: every connection on it ends, new ones work
 *   slots      the peer table overwritten: the same
 *   channels   a link group's channel overwritten: its ring cursors, and its connections go
 *              on; then its entry in the table, and they end; new ones work
 *   cursors    one connection's ring cursors overwritten: that connection is aborted, another
 *              goes on
 *   full       rings larger than the region holds: connections fall back for want of memory,
 *              every byte still arrives
 *   reformat   the region formatted again in use: its connections end, new ones work (the
 *              listener is no longer published there, the local device pairs them)
 *   frozen     the peer, in a pid namespace of its own (nobody of its kernel vouches for it),
 *              stopped: its lease runs out, and the connection ends with ECONNRESET
 *   sleeping   the same peer, running but asleep outside the library (as a program waits on
 *              its terminal) for three leases: its connection lives on, as TCP's would
 *   exits      clients, each a program of its own, connect and exit one after another,
 *              leaving their link groups' channels open: the server lets go of each channel
 *              once and never takes it again when the next client comes, and all the memory
 *              the clients held returns */
#include "faults.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../src/dev/chan.h"
#include "../../src/dev/heap.h"
#include "../../src/dev/region.h"
#include "../../src/dev/slots.h"

static struct region r;

/* The region USMC_DEVICE names ("ivshmem:PATH,..."), mapped here too. */
static void map_region(void)
{
    const char *dev = getenv("USMC_DEVICE");
    char path[512];

    if (!dev || strncmp(dev, "ivshmem:", 8))
        FAIL("USMC_DEVICE names no region: %s", dev ? dev : "(unset)");
    snprintf(path, sizeof(path), "%s", dev + 8);
    path[strcspn(path, ",")] = 0;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        FAIL("%s: %s", path, fl_errname(errno));
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || region_attach(&r, p, (uint64_t)st.st_size) != REGION_OK)
        FAIL("%s: not a region", path);
    close(fd);
}

/* Connection ends this process tree accelerated through the region so far. */
static uint64_t region_ends(void)
{
    return fl_stat_self((enum stat_id)(STAT_DEV_ACCEL + 1));
}

/* A connection to the echo server on port, checked through and through the region. */
static int connect_region(uint16_t port)
{
    uint64_t before = region_ends();
    int fd = fl_connect(port);

    fl_send_stream(fd, false, 0, 4096, 1);
    fl_recv_stream(fd, false, 0, 4096, 1);
    if (region_ends() < before + 2)
        FAIL("the connection did not go through the region");
    return fd;
}

/* A connection that works, through whatever device, or plain TCP. */
static void expect_new_works(uint16_t port)
{
    int fd = fl_connect(port);

    fl_send_stream(fd, false, 0, 65536, 2);
    fl_recv_stream(fd, false, 0, 65536, 2);
    close(fd);
}

/* fd's connection must end, with ECONNRESET or an end of file, within ms. */
static void expect_ended(int fd, unsigned ms)
{
    char c;
    uint64_t start = fl_now_ms();

    fl_expect_readable(fd, ms, "the end of a connection on a broken region");
    ssize_t n = read(fd, &c, 1);
    if (n != 0 && !(n < 0 && (errno == ECONNRESET || errno == EPIPE)))
        FAIL("read after the region broke: %zd %s", n, n < 0 ? fl_errname(errno) : "");
    printf("the connection ended (%s) after %llu ms\n", n ? fl_errname(errno) : "end of file",
           (unsigned long long)(fl_now_ms() - start));
}

static void scribble(void *p, size_t n, unsigned char seed)
{
    unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(seed ^ (i * 131u));
}

/* The heap page of a segment whose header holds our connection's rings. */
static struct seg_hdr *some_segment(void)
{
    for (uint64_t g = 0; g < r.h.heap_granules; g++) {
        struct seg_hdr *h = region_at(&r, r.h.heap_off + g * REGION_PAGE);
        if (h->magic == SEG_MAGIC && atomic_load(&h->state) == SEG_ATTACHED)
            return h;
    }
    FAIL("no attached segment in the region");
}

static struct chan_entry *open_channel(void)
{
    for (uint32_t i = 0; i < r.h.nchans; i++)
        if ((atomic_load(&chan_at(&r, i)->word) & 0xff) == CHAN_OPEN)
            return chan_at(&r, i);
    FAIL("no open channel in the region");
}

/* The peer of the frozen test: connects from a fresh program in a pid namespace of its own,
 * says hello, and waits to be stopped and killed. */
static void frozen_child(uint16_t port)
{
    int fd = fl_connect(port);

    fl_send_stream(fd, false, 0, 5, 3);
    pause();
}

/* A client of the exits test: one connection through the region, checked (its end only: the
 * server's counts in the server's process tree), then an exit that leaves the channel open. */
static void exits_child(uint16_t port)
{
    uint64_t before = region_ends();
    int fd = fl_connect(port);

    fl_send_stream(fd, false, 0, 4096, 1);
    fl_recv_stream(fd, false, 0, 4096, 1);
    if (region_ends() < before + 1)
        FAIL("the connection did not go through the region");
    close(fd);
}

static void exits(uint16_t port)
{
    uint64_t used = 0;

    for (int i = 0; i < 3; i++) {
        pid_t c = fl_fork();
        if (c == 0) {
            char arg[16];
            snprintf(arg, sizeof(arg), "%u", port);
            execl("/proc/self/exe", "region", "exits_child", arg, (char *)NULL);
            _exit(127);
        }
        if (fl_reap(c) != 0)
            FAIL("client %d failed", i);
        /* Time for the server to see the client gone and let go of its channel before the
         * next client's channel moves its endpoint's count. */
        fl_sleep_ms(300);
    }
    uint64_t start = fl_now_ms();
    int open = 0;
    do {
        fl_sleep_ms(50);
        heap_usage(&r, &used, NULL);
        open = 0;
        for (uint32_t i = 0; i < r.h.nchans; i++)
            open += (atomic_load(&chan_at(&r, i)->word) & 0xff) != CHAN_FREE;
    } while ((used || open) && fl_now_ms() - start < 3 * r.h.lease_ms);
    if (used || open)
        FAIL("%llu KiB and %d channels of the clients that exited still held",
             (unsigned long long)(used * REGION_PAGE / 1024), open);
    printf("3 clients exited; their channels and memory returned after %llu ms\n",
           (unsigned long long)(fl_now_ms() - start));
}

/* The peer of the sleeping test: says hello, sleeps where the library never sees it for
 * three leases, then says more. */
static void sleeping_child(uint16_t port, unsigned lease_ms)
{
    int fd = fl_connect(port);
    struct timespec ts = {(time_t)(3 * lease_ms / 1000), (long)(3 * lease_ms % 1000) * 1000000L};

    fl_send_stream(fd, false, 0, 5, 3);
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    fl_send_stream(fd, false, 15, 5, 3);
    pause();
}

/* The peer of frozen or sleeping (what: the program's mode): a fresh program in a pid
 * namespace of its own, so that no process of its kernel vouches for it. Returns its pid. */
static pid_t spawn_alone(const char *what, uint16_t port)
{
    struct fl_chan ch;

    fl_chan_init(&ch);
    pid_t mid = fl_fork();
    if (mid == 0) {
        fl_chan_side(&ch, 1);
        if (unshare(CLONE_NEWPID) < 0) {
            fl_post(&ch, 0);
            _exit(0);
        }
        pid_t peer = fork();
        if (peer == 0) {
            char arg[16], lease[16];
            snprintf(arg, sizeof(arg), "%u", port);
            snprintf(lease, sizeof(lease), "%u", r.h.lease_ms);
            execl("/proc/self/exe", "region", what, arg, lease, (char *)NULL);
            _exit(127);
        }
        fl_post(&ch, (uint64_t)peer);
        pause();
    }
    fl_chan_side(&ch, 0);
    pid_t peer = (pid_t)fl_wait(&ch);
    if (!peer) {
        printf("no pid namespace here (needs root)\n");
        exit(77);
    }
    return peer;
}

/* Accepts the connection of the peer spawn_alone() started in mode what, and its hello,
 * which must have come through the region. */
static int accept_alone(const char *what, uint16_t port, int lfd, pid_t *peer)
{
    *peer = spawn_alone(what, port);
    uint64_t before = region_ends();
    int fd = fl_accept(lfd);

    fl_recv_stream(fd, false, 0, 5, 3);
    if (region_ends() == before)
        FAIL("the peer's connection did not go through the region");
    return fd;
}

static void sleeping(uint16_t port, int lfd)
{
    pid_t peer;
    int fd = accept_alone("sleeping_child", port, lfd, &peer);
    uint64_t start = fl_now_ms();
    fl_recv_stream(fd, false, 15, 5, 3);
    printf("the sleeping peer's connection lived on; it spoke again after %llu ms (lease %u ms)\n",
           (unsigned long long)(fl_now_ms() - start), r.h.lease_ms);
    kill(peer, SIGKILL);
    close(fd);
}

static void frozen(uint16_t port, int lfd)
{
    pid_t peer;
    int fd = accept_alone("frozen_child", port, lfd, &peer);

    kill(peer, SIGSTOP);
    uint64_t start = fl_now_ms();
    char c;
    EXPECT_ERRNO(read(fd, &c, 1), ECONNRESET);
    uint64_t took = fl_now_ms() - start;
    printf("the stopped peer's connection ended after %llu ms (lease %u ms)\n",
           (unsigned long long)took, r.h.lease_ms);
    if (took > r.h.lease_ms + 3000)
        FAIL("later than the lease and 3 s");
    kill(peer, SIGKILL);
    close(fd);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "frozen_child")) {
        fl_start(30);
        frozen_child((uint16_t)atoi(argv[2]));
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "sleeping_child")) {
        fl_start(30);
        sleeping_child((uint16_t)atoi(argv[2]), (unsigned)atoi(argv[3]));
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "exits_child")) {
        fl_start(30);
        exits_child((uint16_t)atoi(argv[2]));
        return 0;
    }
    if (argc != 2)
        FAIL("usage: region header|slots|channels|cursors|full|reformat|frozen|sleeping|exits");
    const char *what = argv[1];
    fl_start(40);
    map_region();
    uint16_t port;
    int lfd = fl_listen(&port);
    if (!strcmp(what, "frozen")) {
        frozen(port, lfd);
        return 0;
    }
    if (!strcmp(what, "sleeping")) {
        sleeping(port, lfd);
        return 0;
    }
    pid_t server = fl_fork();
    if (server == 0)
        fl_echo_server(lfd);
    close(lfd);

    if (!strcmp(what, "exits")) {
        exits(port);
        kill(server, SIGKILL);
        fl_reap(server);
        return 0;
    }
    if (!strcmp(what, "full")) {
        /* Rings of 8 MiB each way (USMC_RING_SIZE) in 64 MiB: a few fit. */
        int fd[8];
        for (int i = 0; i < 8; i++) {
            fd[i] = fl_connect(port);
            fl_send_stream(fd[i], false, 0, 100000, 4);
        }
        for (int i = 0; i < 8; i++) {
            fl_recv_stream(fd[i], false, 0, 100000, 4);
            close(fd[i]);
        }
        if (fl_stat_self((enum stat_id)(STAT_FALLBACK_REASON + DECL_MEMORY)) == 0)
            FAIL("no connection fell back for want of memory");
        printf("%llu of 8 connections through the region, the rest fell back (memory)\n",
               (unsigned long long)region_ends() / 2);
        return 0;
    }
    int fd = connect_region(port), other = -1;
    if (!strcmp(what, "header")) {
        scribble(r.base, 512, 0x5a);
        expect_ended(fd, 5000);
    } else if (!strcmp(what, "slots")) {
        scribble(slot_at(&r, 0), r.h.nslots * sizeof(struct region_slot), 0xa5);
        expect_ended(fd, 5000);
    } else if (!strcmp(what, "channels")) {
        struct chan_entry *e = open_channel();
        scribble(region_at(&r, e->mem_off), 5 * 2 * sizeof(struct chan_cursor), 0x3c);
        /* The connection goes on: its rings are its own. */
        fl_send_stream(fd, false, 4096, 4096, 1);
        fl_recv_stream(fd, false, 4096, 4096, 1);
        scribble(e, sizeof(*e), 0xc3);
        expect_ended(fd, 5000);
    } else if (!strcmp(what, "cursors")) {
        other = connect_region(port);
        /* One of the two segments, the first found: the producer cursor of its ring to the
         * client is made absurd. Nothing is sent afterwards, so nobody writes that cursor
         * again (its producer, the server, would overwrite it): the client that reads it
         * finds it broken at its next look, and only that connection is aborted. */
        struct seg_hdr *h = some_segment();
        atomic_store(&h->ring[1].prod, UINT64_MAX / 3);
        int broken = -1;
        for (int i = 0; i < 2; i++) {
            int s = i ? other : fd;
            struct pollfd pf = {s, POLLIN, 0};
            if (poll(&pf, 1, 1000) != 1)
                continue;
            char c;
            if (read(s, &c, 1) >= 0 || errno != ECONNRESET)
                FAIL("read on a connection whose cursor broke: %s", fl_errname(errno));
            if (broken >= 0)
                FAIL("both connections ended, expected the one whose cursor broke");
            broken = i;
        }
        if (broken < 0)
            FAIL("no connection ended, expected the one whose cursor broke");
        /* The other goes on. */
        int ok = broken ? fd : other;
        fl_send_stream(ok, false, 4096, 1, 1);
        fl_recv_stream(ok, false, 4096, 1, 1);
        close(fd);
        close(other);
    } else if (!strcmp(what, "reformat")) {
        struct region_hdr layout;
        if (region_layout_default(&layout, r.mapped, r.h.lease_ms) < 0)
            FAIL("no layout");
        atomic_store(&((struct region_hdr *)r.base)->state, REGION_FORMATTING);
        region_format(r.base, &layout, r.h.format_id + 1);
        expect_ended(fd, 5000);
    } else {
        FAIL("unknown test %s", what);
    }
    expect_new_works(port);
    kill(server, SIGKILL);
    fl_reap(server);
    return 0;
}
