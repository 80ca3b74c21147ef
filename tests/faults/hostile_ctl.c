/* A process that is not a client library connects to an accelerated echo server's control
 * socket and sends what no client library would. After each message a plain connection makes
 * the server drain its control channels (it reads them when it accepts) and proves it still
 * serves; the server's handshake_errors counter must grow by exactly one for each message the
 * decoder has to reject. At the end a real client through usmc is accelerated with verified
 * data, and once it closed, the server holds exactly the descriptors it held before.
 *
 * usage: hostile_ctl decoder|binding|elsewhere|replay
 *   decoder    malformed messages: garbage, truncation, wrong eyecatcher, version, length,
 *              type, descriptor counts (0, 1, one too many), fields out of range, an arena never sent, a
 *              segment outside its arena
 *   binding    well-formed messages that must not bind: a WITHDRAW for an unknown id,
 *              WITHDRAWs naming the ids of another client's pending proposals (which must
 *              still be accelerated), a DECLINE sent to the server, a proposal whose TCP socket is unconnected or not a
 *              socket at all
 *   elsewhere  a proposal whose TCP socket is connected to another listener
 *   replay     a proposal sent twice (same conn_id), then its TCP connection made
 * Run with USMC_HANDSHAKE_TIMEOUT_MS small: proposals that can never match expire after twice
 * that, and the final descriptor count waits for it. */
#include "faults.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define RING 4096u

struct ctx {
    pid_t server;
    uint16_t port;
    char ctl[4400];
};

/* The server's accept drains every control channel, and the echo proves it still works. */
static void flush(struct ctx *c)
{
    fl_probe_plain(c->port, 100);
}

static void expect_decline(struct fl_forge *f)
{
    struct clc_decline d;
    ssize_t n = fl_ctl_recv(f->ctl, &d, sizeof(d), 5000);

    if (n != (ssize_t)sizeof(d) || d.hdr.eyecatcher != CLC_EYECATCHER ||
        d.hdr.type != CLC_DECLINE || d.conn_id != f->p.conn_id)
        FAIL("expected a DECLINE for conn_id %llu, got %zd bytes",
             (unsigned long long)f->p.conn_id, n);
}

/* Sends the forged proposal with its own descriptors (an unconnected socket as the TCP one). */
static void send_proposal(struct fl_forge *f, const void *msg, size_t len, int nfds)
{
    int fds[CLC_FD_MAX + 1], tcp = fl_raw_socket();
    int have = fl_forge_fds(f, tcp, fds);

    fds[have] = f->bell; /* one more than any proposal takes, when asked for */
    fl_ctl_send(f->ctl, msg, len, fds, nfds < 0 ? have : nfds);
    close(tcp);
}

/* A valid proposal, altered by edit, sent with nfds descriptors (-1: the right number). */
static void forged(struct ctx *c, void (*edit)(struct clc_proposal *), int nfds, size_t len,
                   bool declined)
{
    struct fl_forge f;

    fl_forge_init(&f, c->ctl, 1 << 20, 0, RING, 1);
    if (edit)
        edit(&f.p);
    send_proposal(&f, &f.p, len ? len : sizeof(f.p), nfds);
    flush(c);
    if (declined)
        expect_decline(&f);
    fl_forge_close(&f);
}

static void bad_magic(struct clc_proposal *p) { p->hdr.eyecatcher ^= 1; }
static void bad_version(struct clc_proposal *p) { p->hdr.version = CLC_VERSION + 1; }
static void bad_length(struct clc_proposal *p) { p->hdr.length = sizeof(*p) - 8; }
static void bad_type(struct clc_proposal *p) { p->hdr.type = 9; }
static void bad_ring(struct clc_proposal *p) { p->ring_size[1] = RING + 1; }
static void bad_flags(struct clc_proposal *p) { p->flags |= 0x80; }
static void old_arena(struct clc_proposal *p)
{
    /* Names arena 5, which never came with a proposal. */
    p->flags = 0;
    p->arena_id = 5;
}
static void seg_outside(struct clc_proposal *p) { p->seg_off = p->arena_size - SEG_HDR_SIZE; }

static void garbage(struct ctx *c)
{
    unsigned char junk[37];
    struct fl_forge f;

    fl_forge_init(&f, c->ctl, 4096, 0, RING, 1);
    memset(junk, 0xa5, sizeof(junk));
    fl_ctl_send(f.ctl, junk, sizeof(junk), NULL, 0);
    flush(c);
    fl_forge_close(&f);
}

static void truncated(struct ctx *c) { forged(c, NULL, -1, 40, false); }
static void wrong_magic(struct ctx *c) { forged(c, bad_magic, -1, 0, false); }
static void wrong_version(struct ctx *c) { forged(c, bad_version, -1, 0, false); }
static void wrong_length(struct ctx *c) { forged(c, bad_length, -1, 0, false); }
static void wrong_type(struct ctx *c) { forged(c, bad_type, -1, 0, false); }
static void fds_0(struct ctx *c) { forged(c, NULL, 0, 0, false); }
static void fds_1(struct ctx *c) { forged(c, NULL, 1, 0, false); }
static void fds_extra(struct ctx *c) { forged(c, NULL, CLC_FD_MAX + 1, 0, false); }
static void ring_not_pow2(struct ctx *c) { forged(c, bad_ring, -1, 0, false); }
static void unknown_flag(struct ctx *c) { forged(c, bad_flags, -1, 0, false); }
static void arena_never_sent(struct ctx *c) { forged(c, old_arena, CLC_FD_ARENA, 0, true); }
static void segment_outside(struct ctx *c) { forged(c, seg_outside, -1, 0, true); }

static void withdraw_unknown(struct ctx *c)
{
    struct fl_forge f;
    struct clc_withdraw w = {{CLC_EYECATCHER, CLC_WITHDRAW, CLC_VERSION, sizeof(w)}, {0, 0}, 4242};

    fl_forge_init(&f, c->ctl, 4096, 0, RING, 1);
    fl_ctl_send(f.ctl, &w, sizeof(w), NULL, 0);
    flush(c);
    fl_forge_close(&f);
}

/* WITHDRAWs naming the ids of a fresh client's queued proposal, from another link group
 * and read after it (the server is stopped meanwhile): they name nothing of that client's,
 * whose connection must be accelerated. */
static void withdraw_foreign(struct ctx *c)
{
    struct fl_forge f;

    if (kill(c->server, SIGSTOP) < 0)
        FAIL("SIGSTOP: %s", fl_errname(errno));
    pid_t p = fl_fork();
    if (p == 0) {
        fl_probe_accelerated(c->port, 5000);
        _exit(0);
    }
    fl_wait_sleeping(p, p); /* proposed, connected, waiting for its echo */
    fl_forge_init(&f, c->ctl, 4096, 0, RING, 1);
    for (uint64_t id = 1; id <= 8; id++) {
        struct clc_withdraw w = {{CLC_EYECATCHER, CLC_WITHDRAW, CLC_VERSION, sizeof(w)}, {0, 0}, id};
        fl_ctl_send(f.ctl, &w, sizeof(w), NULL, 0);
    }
    if (kill(c->server, SIGCONT) < 0)
        FAIL("SIGCONT: %s", fl_errname(errno));
    if (fl_reap(p) != 0)
        FAIL("a client's connection was not accelerated after another's WITHDRAWs");
    flush(c);
    fl_forge_close(&f);
}

static void decline_to_server(struct ctx *c)
{
    struct fl_forge f;
    struct clc_decline d = {{CLC_EYECATCHER, CLC_DECLINE, CLC_VERSION, sizeof(d)}, 0, 0, 1};

    fl_forge_init(&f, c->ctl, 4096, 0, RING, 1);
    fl_ctl_send(f.ctl, &d, sizeof(d), NULL, 0);
    flush(c);
    fl_forge_close(&f);
}

static void tcp_unconnected(struct ctx *c) { forged(c, NULL, -1, 0, false); }

static void tcp_not_a_socket(struct ctx *c)
{
    struct fl_forge f;
    int p[2];

    CHECK(pipe(p) == 0);
    fl_forge_init(&f, c->ctl, 1 << 20, 0, RING, 1);
    fl_forge_send(&f, p[0]);
    flush(c);
    close(p[0]);
    close(p[1]);
    fl_forge_close(&f);
}

static void tcp_elsewhere(struct ctx *c)
{
    struct fl_forge f;
    uint16_t port;
    int l = fl_listen(&port);
    int s = fl_raw_connect(fl_raw_socket(), port, 0);

    fl_forge_init(&f, c->ctl, 1 << 20, 0, RING, 1);
    fl_forge_send(&f, s);
    flush(c);
    close(s);
    close(l);
    fl_forge_close(&f);
}

/* The same proposal twice (the second without the arena it already sent), then the TCP
 * connection it names: one attach at most, and nothing of the second may stay behind. */
static void replay(struct ctx *c)
{
    struct fl_forge f;
    int s = fl_raw_socket();

    fl_forge_init(&f, c->ctl, 1 << 20, 0, RING, 9);
    fl_forge_send(&f, s);
    f.p.flags = 0;
    fl_forge_send(&f, s);
    fl_raw_connect(s, c->port, 0);
    flush(c);
    close(s);
    flush(c);
    fl_forge_close(&f);
}

struct attack {
    const char *what;
    void (*run)(struct ctx *);
    unsigned errors; /* handshake_errors it must add, or ANY */
};
#define ANY 99u

static const struct attack decoder[] = {
    {"garbage bytes", garbage, 1},
    {"truncated proposal", truncated, 1},
    {"wrong eyecatcher", wrong_magic, 1},
    {"wrong version", wrong_version, 1},
    {"wrong length field", wrong_length, 1},
    {"unknown type", wrong_type, 1},
    {"proposal with 0 descriptors", fds_0, 1},
    {"proposal with 1 descriptor", fds_1, 1},
    {"proposal with one descriptor too many", fds_extra, 1},
    {"ring size not a power of two", ring_not_pow2, 1},
    {"unknown flag", unknown_flag, 1},
    {"arena never sent", arena_never_sent, 1},
    {"segment outside its arena", segment_outside, 1},
    {NULL, NULL, 0},
};

static const struct attack binding[] = {
    {"WITHDRAW for an unknown id", withdraw_unknown, 0},
    {"WITHDRAW of another link group's ids", withdraw_foreign, 0},
    {"DECLINE sent to the server", decline_to_server, 1},
    {"unconnected TCP socket", tcp_unconnected, 0},
    {"pipe as the TCP socket", tcp_not_a_socket, 0},
    {NULL, NULL, 0},
};

static const struct attack elsewhere[] = {
    {"TCP socket connected elsewhere", tcp_elsewhere, 0},
    {NULL, NULL, 0},
};

static const struct attack replayed[] = {
    {"replayed proposal", replay, ANY},
    {NULL, NULL, 0},
};

static const struct {
    const char *name;
    const struct attack *list;
} groups[] = {
    {"decoder", decoder},
    {"binding", binding},
    {"elsewhere", elsewhere},
    {"replay", replayed},
};

/* The descriptor count once it stopped changing (the server closes connections when it sees
 * their EOF). */
static int settled_fds(pid_t pid)
{
    int last = -1, same = 0;

    while (same < 5) {
        int n = fl_count_fds(pid);
        same = n == last ? same + 1 : 0;
        last = n;
        fl_sleep_ms(20);
    }
    return last;
}

int main(int argc, char **argv)
{
    const struct attack *list = NULL;
    struct fl_chan ch;
    struct ctx c = {0};

    fl_start(50);
    for (size_t i = 0; argc == 2 && i < sizeof(groups) / sizeof(groups[0]); i++)
        if (!strcmp(argv[1], groups[i].name))
            list = groups[i].list;
    if (!list) {
        fprintf(stderr, "usage: hostile_ctl decoder|binding|elsewhere|replay\n");
        return 2;
    }
    fl_chan_init(&ch);
    c.server = fl_fork();
    if (c.server == 0) {
        uint16_t port;
        fl_chan_side(&ch, 1);
        int l = fl_listen(&port);
        fl_post(&ch, port);
        fl_echo_server(l);
    }
    fl_chan_side(&ch, 0);
    c.port = (uint16_t)fl_wait(&ch);
    fl_ctl_path(c.server, c.ctl, sizeof(c.ctl));

    fl_probe_accelerated(c.port, 5000);
    flush(&c);
    int fds_before = settled_fds(c.server);
    uint64_t errors_before = fl_stat(c.server, STAT_HANDSHAKE_ERR);

    for (const struct attack *a = list; a->what; a++) {
        uint64_t before = fl_stat(c.server, STAT_HANDSHAKE_ERR);
        a->run(&c);
        if (!fl_alive(c.server))
            FAIL("%s: the server died", a->what);
        uint64_t added = fl_stat(c.server, STAT_HANDSHAKE_ERR) - before;
        if (a->errors != ANY && added != a->errors)
            FAIL("%s: handshake_errors grew by %llu, expected %u", a->what,
                 (unsigned long long)added, a->errors);
        printf("%s: server serves on\n", a->what);
    }
    if (list == decoder && fl_stat(c.server, STAT_HANDSHAKE_ERR) <= errors_before)
        FAIL("handshake_errors did not grow");

    /* Proposals that can never match expire after twice the handshake timeout. */
    const char *t = getenv("USMC_HANDSHAKE_TIMEOUT_MS");
    fl_sleep_ms(2 * (unsigned)(t ? atoi(t) : 10000) + 200);
    fl_probe_accelerated(c.port, 5000);
    flush(&c);
    int fds_after = settled_fds(c.server);
    if (fds_after != fds_before) {
        fl_list_fds(c.server);
        FAIL("the server held %d descriptors before the attacks and %d after", fds_before,
             fds_after);
    }
    kill(c.server, SIGKILL);
    fl_reap(c.server);
    printf("server alive throughout, %d descriptors before and after\n", fds_after);
    return 0;
}
