/* One process runs out of descriptors or address space (its resource limits tightened)
 * while it makes or takes connections. Each new connection must carry its bytes exactly,
 * accelerated or fallen back to TCP, or fail exactly as TCP would (socket() with EMFILE);
 * nothing may crash, hang or leak, and the other processes go on accelerating: a bystander
 * keeps an accelerated connection across the whole run and opens a new one at the end.
 *
 * usage: rlimits nofile_client|nofile_server|as_client|as_server
 *   nofile_client  the client connects with 1, 2, ... 10 descriptors free, twice over: the
 *                  second round must leave its descriptor count exactly as it found it
 *   nofile_server  the same limits on the accepting process, one connection each. While
 *                  it cannot even accept the client's control channel, or loses the
 *                  descriptors of a proposal, the client learns nothing and falls back only
 *                  after USMC_HANDSHAKE_TIMEOUT_MS (run with it small)
 *   as_client      the client's address space is capped 64 MB above what it uses: no
 *                  arena fits; then the cap goes and the next connection is accelerated
 *   as_server      the same cap on the accepting process: it cannot map the client's
 *                  arena, and must say so rather than let the client wait
 * In every variant the first connection once the limits are gone must be accelerated.
 * RLIMIT_MEMLOCK is not exercised: the library locks no memory. */
#include "faults.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ECHO 100000u
#define MAX_FREE 10
enum { SEED = 7, BYSTANDER_SEED = 8 };

static struct rlimit saved_nofile;

static int lowest_free_fd(void)
{
    int fd = dup(0);

    if (fd < 0)
        FAIL("dup: %s", fl_errname(errno));
    close(fd);
    return fd;
}

/* Leaves exactly n descriptor numbers free (the lowest ones in use stay usable). */
static void nofile_free(int n)
{
    struct rlimit rl = saved_nofile;

    rl.rlim_cur = (rlim_t)(lowest_free_fd() + n);
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        FAIL("setrlimit NOFILE: %s", fl_errname(errno));
}

static void nofile_restore(void)
{
    if (setrlimit(RLIMIT_NOFILE, &saved_nofile) < 0)
        FAIL("setrlimit NOFILE: %s", fl_errname(errno));
}

static uint64_t vm_size(void)
{
    char line[256];
    unsigned long kb = 0;
    FILE *f = fopen("/proc/self/status", "re");

    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmSize: %lu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    if (!kb)
        FAIL("no VmSize in /proc/self/status");
    return (uint64_t)kb << 10;
}

static void as_cap(bool on)
{
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};

    if (on)
        rl.rlim_cur = vm_size() + (64u << 20);
    if (setrlimit(RLIMIT_AS, &rl) < 0)
        FAIL("setrlimit AS: %s", fl_errname(errno));
}

/* The counters live in a file the library maps on its first count; a process that
 * counts first while out of descriptors keeps them in memory only. A connection to a
 * port nobody registered is counted (peer_no_usmc) without a link group. */
static void map_counters(void)
{
    uint16_t port;
    int l = fl_listen(&port), fd;

    close(l);
    l = fl_raw_socket();
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (syscall(SYS_bind, l, &sin, sizeof(sin)) < 0 || syscall(SYS_listen, l, 1) < 0)
        FAIL("unregistered listener: %s", fl_errname(errno));
    fd = fl_connect(port);
    close(fd);
    close(l);
    if (!fl_stat_self(STAT_CONN_FALLBACK))
        FAIL("the connection to an unregistered port was not counted");
}

/* Waits until the server has let go of every attached segment we let go of: until then
 * the next connection carves a new one (with a doorbell of its own) instead of reusing it.
 * (A segment the server never attached is never released by it.) */
static void settle(void)
{
    struct fl_arena a;
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    bool mapped = false;

    while (f && fgets(line, sizeof(line), f))
        mapped |= strstr(line, "/memfd:usmc-arena") != NULL;
    if (f)
        fclose(f);
    if (!mapped)
        return;
    fl_arena_find(&a);
    size_t limit = a.size < (16u << 20) ? a.size : (16u << 20);
    for (size_t off = 0; off + SEG_HDR_SIZE <= limit; off += SEG_HDR_SIZE) {
        struct seg_hdr *h = (struct seg_hdr *)(a.base + off);
        if (h->magic != SEG_MAGIC || atomic_load(&h->state) != SEG_ATTACHED)
            continue;
        while (atomic_load(&h->released) == SEG_REL_CLIENT)
            fl_sleep_ms(1);
    }
}

/* One connection with an exact echo, as a client; prints what became of it. */
static bool client_echo(uint16_t port, const char *label, int limit_free)
{
    struct fl_tally t;

    fl_tally(&t);
    if (limit_free)
        nofile_free(limit_free);
    uint64_t t0 = fl_now_ms();
    int fd = fl_try_connect(port);
    if (fd < 0)
        FAIL("%s: connect: %s (TCP would have connected)", label, fl_errname(errno));
    fl_send_stream(fd, false, 0, ECHO, SEED);
    fl_expect_readable(fd, 10000, "the echo");
    fl_recv_stream(fd, false, 0, ECHO, SEED);
    CHECK(shutdown(fd, SHUT_WR) == 0);
    fl_expect_eof(fd, false);
    CHECK(close(fd) == 0);
    if (limit_free)
        nofile_restore();
    settle();
    const char *how = fl_outcome(&t);
    printf("%s: exact echo, %s%s\n", label, how,
           fl_now_ms() - t0 > 2000 ? " (after more than 2 s)" : "");
    return !strcmp(how, "accelerated");
}

/* Once the limits are gone, the pair accelerates again. */
static void expect_recovered(uint16_t port)
{
    if (!client_echo(port, "limits lifted", 0))
        FAIL("the connection made after the limits were lifted was not accelerated");
}

/* Accepts one connection and echoes it to its EOF. */
static void serve_one(int l)
{
    static char buf[65536];
    int fd = accept(l, NULL, NULL);

    if (fd < 0)
        FAIL("accept: %s", fl_errname(errno));
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        if (r == 0)
            break;
        if (r < 0)
            FAIL("server recv: %s", fl_errname(errno));
        for (ssize_t done = 0, w; done < r; done += w)
            if ((w = send(fd, buf + done, (size_t)(r - done), MSG_NOSIGNAL)) <= 0)
                FAIL("server send: %s", fl_errname(errno));
    }
    CHECK(close(fd) == 0);
}

/* The server for the *_server variants: round i runs under limit(i), and reports what
 * became of the connection. */
static _Noreturn void limited_server(struct fl_chan *ch, int rounds, void (*limit)(int))
{
    struct fl_tally t;
    uint16_t port;
    int l = fl_listen(&port);

    map_counters();
    fl_post(ch, port);
    for (int i = 1; i <= rounds; i++) {
        fl_tally(&t);
        limit(i);
        serve_one(l);
        limit(0);
        printf("server, round %d: %s\n", i, fl_outcome(&t));
    }
    serve_one(l);
    _exit(0);
}

static void nofile_limit(int i)
{
    if (i)
        nofile_free(i);
    else
        nofile_restore();
}

static void as_limit(int i)
{
    as_cap(i != 0);
}

/* The bystander: an accelerated connection made before the run, verified again after it,
 * and a new accelerated connection then. */
static _Noreturn void bystander(uint16_t port, struct fl_chan *ch)
{
    struct fl_arena a;
    int fd = fl_connect(port);

    fl_send_stream(fd, false, 0, ECHO, BYSTANDER_SEED);
    fl_recv_stream(fd, false, 0, ECHO, BYSTANDER_SEED);
    fl_post(ch, 1);
    fl_wait(ch);
    fl_send_stream(fd, false, ECHO, ECHO, BYSTANDER_SEED);
    fl_recv_stream(fd, false, ECHO, ECHO, BYSTANDER_SEED);
    fl_arena_find(&a);
    fl_seg_of(&a, fd, 2 * ECHO, 2 * ECHO);
    fl_probe_accelerated(port, 5000);
    close(fd);
    _exit(0);
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"nofile_client", "nofile_server", "as_client",
                                        "as_server"};
    struct fl_chan sch, bch;
    struct fl_footprint one, two;
    char label[64];
    int v = -1;

    fl_start(50);
    for (int i = 0; argc == 2 && i < 4; i++)
        if (!strcmp(argv[1], names[i]))
            v = i;
    if (v < 0) {
        fprintf(stderr, "usage: rlimits nofile_client|nofile_server|as_client|as_server\n");
        return 2;
    }
    getrlimit(RLIMIT_NOFILE, &saved_nofile);
    bool server_limited = v == 1 || v == 3;
    int rounds = v == 1 ? MAX_FREE : 1;

    fl_chan_init(&sch);
    pid_t s = fl_fork();
    if (s == 0) {
        fl_chan_side(&sch, 1);
        if (server_limited)
            limited_server(&sch, rounds, v == 1 ? nofile_limit : as_limit);
        uint16_t port;
        int l = fl_listen(&port);
        fl_post(&sch, port);
        fl_echo_server(l);
    }
    fl_chan_side(&sch, 0);
    uint16_t port = (uint16_t)fl_wait(&sch);
    uint16_t bport = port;
    pid_t es = 0;
    if (server_limited) {
        /* The bystander needs a server of its own: the limited one takes one at a time. */
        struct fl_chan ech;
        fl_chan_init(&ech);
        es = fl_fork();
        if (es == 0) {
            fl_chan_side(&ech, 1);
            int l = fl_listen(&bport);
            fl_post(&ech, bport);
            fl_echo_server(l);
        }
        fl_chan_side(&ech, 0);
        bport = (uint16_t)fl_wait(&ech);
    }
    fl_chan_init(&bch);
    pid_t b = fl_fork();
    if (b == 0) {
        fl_chan_side(&bch, 1);
        bystander(bport, &bch);
    }
    fl_chan_side(&bch, 0);
    fl_wait(&bch);
    map_counters();

    switch (v) {
    case 0:
        for (int round = 1; round <= 2; round++) {
            for (int n = 1; n <= MAX_FREE; n++) {
                snprintf(label, sizeof(label), "round %d, %d descriptors free", round, n);
                client_echo(port, label, n);
            }
            fl_footprint(getpid(), round == 1 ? &one : &two);
        }
        if (one.fds != two.fds || one.arenas != two.arenas)
            FAIL("the second round changed the descriptors (%d to %d) or arenas (%d to %d)",
                 one.fds, two.fds, one.arenas, two.arenas);
        expect_recovered(port);
        break;
    case 2:
        as_cap(true);
        client_echo(port, "address space capped", 0);
        as_cap(false);
        expect_recovered(port);
        break;
    default:
        for (int i = 1; i <= rounds; i++) {
            snprintf(label, sizeof(label), "client, round %d", i);
            client_echo(port, label, 0);
        }
        expect_recovered(port);
        if (fl_reap(s) != 0)
            FAIL("the limited server failed");
        s = 0;
    }

    fl_post(&bch, 1);
    if (fl_reap(b) != 0)
        FAIL("the bystander failed");
    for (pid_t p; (p = s ? s : es); s ? (s = 0) : (es = 0)) {
        kill(p, SIGKILL);
        fl_reap(p);
    }
    printf("%s: every connection exact, the bystander accelerated throughout\n", argv[1]);
    return 0;
}
