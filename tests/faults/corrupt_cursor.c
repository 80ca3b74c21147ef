/* A client scribbles on the shared state of one of its two accelerated connections (A); the
 * server must lose A at most, and only when the scribble breaks an invariant it relies on.
 *
 * usage: corrupt_cursor VARIANT
 *   prod_ahead     A's client->server producer cursor jumps past the ring size: the server's
 *                  next read on A fails with ECONNRESET
 *   prod_back      the same cursor moves backwards: likewise
 *   urg_ahead      A's client->server urgent cursor points further than a ring past what the
 *                  server read: its next read on A fails with ECONNRESET
 *   cons_ahead     A's server->client consumer cursor claims more than was produced: the
 *                  server's next write on A that reads it fails with ECONNRESET (a writer
 *                  reads it when the room it last saw is not enough: a write larger than
 *                  the ring does)
 *   cons_back      the same cursor moves backwards, further than the writer could have
 *                  seen it (a cursor it never read may stand anywhere behind): likewise
 *   flags_garbage  every undefined flag bit set and the client's wait words garbled: nothing
 *                  breaks, A still carries verified data both ways and ends cleanly
 *   state_garbage  segment magic and state word garbled after the attach: no effect
 *   tcp_bytes      the client writes bytes on A's TCP socket behind the library's back: the
 *                  server must not be left with a connection that polls readable forever
 *                  while reads find nothing; it resets A
 * In every variant the server process lives on and connection B carries verified data both
 * ways afterwards. */
#include "faults.h"

#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { A, B };
enum { ROUND_C2S = 1000, ROUND_S2C = 2000, BULK = 1 << 20 };

struct conn {
    int fd;
    uint64_t c2s, s2c; /* stream offsets */
    unsigned seed;     /* c2s uses seed, s2c seed + 1 */
};

enum kind { ABORT_ON_READ, ABORT_ON_WRITE, HARMLESS, TCP_BYTES };

struct variant {
    const char *name;
    enum kind kind;
    void (*scribble)(struct seg_hdr *h);
};

static void prod_ahead(struct seg_hdr *h)
{
    atomic_fetch_add(&h->ring[0].prod, (uint64_t)64 << 20);
}

static void prod_back(struct seg_hdr *h)
{
    atomic_fetch_sub(&h->ring[0].prod, 1);
}

static void urg_ahead(struct seg_hdr *h)
{
    atomic_store(&h->ring[0].prod_urg, atomic_load(&h->ring[0].prod) + ((uint64_t)64 << 20));
}

static void cons_ahead(struct seg_hdr *h)
{
    atomic_fetch_add(&h->ring[1].cons, 1);
}

static void cons_back(struct seg_hdr *h)
{
    atomic_fetch_sub(&h->ring[1].cons, 1u << 30);
}

static void flags_garbage(struct seg_hdr *h)
{
    /* The client's own lines: what the server reads. */
    atomic_store(&h->ring[0].prod_flags, ~RING_PF_SHUT_WR);
    atomic_store(&h->ring[1].cons_flags, ~RING_CF_CLOSED);
    atomic_store(&h->ring[0].prod_wait, 0x7fffffffu);
    atomic_store(&h->ring[1].cons_wait, 0x12345678u);
    /* The server's lines, which it publishes and never trusts back. */
    atomic_store(&h->ring[0].cons_wait, 0xdeadbeefu);
    atomic_store(&h->ring[1].prod_wait, 0xfffffff0u);
}

static void state_garbage(struct seg_hdr *h)
{
    h->magic = 0x0badf00du;
    atomic_store(&h->state, 0xdeadbeefu);
}

static void tcp_bytes(struct seg_hdr *h)
{
    (void)h;
}

static const struct variant variants[] = {
    {"prod_ahead", ABORT_ON_READ, prod_ahead},
    {"prod_back", ABORT_ON_READ, prod_back},
    {"urg_ahead", ABORT_ON_READ, urg_ahead},
    {"cons_ahead", ABORT_ON_WRITE, cons_ahead},
    {"cons_back", ABORT_ON_WRITE, cons_back},
    {"flags_garbage", HARMLESS, flags_garbage},
    {"state_garbage", HARMLESS, state_garbage},
    {"tcp_bytes", TCP_BYTES, tcp_bytes},
};

/* One exchange: the client speaks first, the server answers. */
static void round_trip(struct conn *c, bool server, size_t c2s, size_t s2c)
{
    if (server) {
        fl_recv_stream(c->fd, false, c->c2s, c2s, c->seed);
        fl_send_stream(c->fd, false, c->s2c, s2c, c->seed + 1);
    } else {
        fl_send_stream(c->fd, false, c->c2s, c2s, c->seed);
        fl_recv_stream(c->fd, false, c->s2c, s2c, c->seed + 1);
    }
    c->c2s += c2s;
    c->s2c += s2c;
}

/* Bulk both ways, one direction at a time (so neither side waits on a full ring while the
 * other does too), then an orderly close initiated by the client. */
static void bulk_and_close(struct conn *c, bool server)
{
    if (server) {
        fl_recv_stream(c->fd, false, c->c2s, BULK, c->seed);
        fl_send_stream(c->fd, false, c->s2c, BULK, c->seed + 1);
        fl_expect_eof(c->fd, false);
    } else {
        fl_send_stream(c->fd, false, c->c2s, BULK, c->seed);
        fl_recv_stream(c->fd, false, c->s2c, BULK, c->seed + 1);
        CHECK(shutdown(c->fd, SHUT_WR) == 0);
        fl_expect_eof(c->fd, false);
    }
    c->c2s += BULK;
    c->s2c += BULK;
    CHECK(close(c->fd) == 0);
}

static void client(const struct variant *v, uint16_t port, struct fl_chan *ch)
{
    struct conn c[2] = {{fl_connect(port), 0, 0, 10}, {fl_connect(port), 0, 0, 20}};
    struct fl_arena arena;
    char byte;

    round_trip(&c[A], false, ROUND_C2S, ROUND_S2C);
    round_trip(&c[A], false, ROUND_C2S, ROUND_S2C);
    round_trip(&c[B], false, 3 * ROUND_C2S, 3 * ROUND_S2C);
    fl_arena_find(&arena);
    struct seg_hdr *h = fl_seg_of(&arena, c[A].fd, c[A].c2s, c[A].s2c);
    v->scribble(h);
    if (v->kind == TCP_BYTES)
        CHECK(syscall(SYS_sendto, c[A].fd, "tcp", 3, MSG_NOSIGNAL, NULL, 0) == 3);
    fl_post(ch, 1);

    if (v->kind == HARMLESS) {
        bulk_and_close(&c[A], false);
    } else {
        fl_wait(ch); /* the server has lost A */
        /* The abort shuts the server's socket down: its FIN reaches us as EOF. */
        ssize_t r = recv(c[A].fd, &byte, 1, 0);
        if (r != 0)
            FAIL("client read on A after the server's abort: %zd %s, expected EOF", r,
                 r < 0 ? fl_errname(errno) : "");
        close(c[A].fd);
    }
    bulk_and_close(&c[B], false);
    fl_post(ch, 2);
}

static void server_loses_a(const struct variant *v, struct conn *a)
{
    char buf[64] = {0};

    switch (v->kind) {
    case ABORT_ON_READ:
        /* Nonblocking, so that a missed check fails at once instead of waiting for data. */
        EXPECT_ERRNO(recv(a->fd, buf, sizeof(buf), MSG_DONTWAIT), ECONNRESET);
        break;
    case ABORT_ON_WRITE: {
        static char big[BULK];
        EXPECT_ERRNO(send(a->fd, big, sizeof(big), MSG_NOSIGNAL | MSG_DONTWAIT), ECONNRESET);
        break;
    }
    case TCP_BYTES: {
        struct pollfd pf = {a->fd, POLLIN, 0};
        int n = poll(&pf, 1, 10000);
        if (n != 1)
            FAIL("A did not poll readable after bytes arrived on its TCP socket (poll %d)", n);
        ssize_t r = recv(a->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (r != -1 || errno != ECONNRESET)
            FAIL("A polls readable (revents %#x) but recv returns %zd %s; expected -1 "
                 "ECONNRESET",
                 (unsigned)pf.revents, r, r < 0 ? fl_errname(errno) : "");
        break;
    }
    case HARMLESS:
        FAIL("not an abort variant");
    }
}

int main(int argc, char **argv)
{
    const struct variant *v = NULL;
    struct fl_chan ch;
    uint16_t port;

    fl_start(50);
    for (size_t i = 0; argc == 2 && i < sizeof(variants) / sizeof(variants[0]); i++)
        if (!strcmp(argv[1], variants[i].name))
            v = &variants[i];
    if (!v) {
        fprintf(stderr, "usage: corrupt_cursor prod_ahead|prod_back|urg_ahead|cons_ahead|"
                        "cons_back|flags_garbage|state_garbage|tcp_bytes\n");
        return 2;
    }
    int l = fl_listen(&port);
    fl_chan_init(&ch);
    pid_t pid = fl_fork();
    if (pid == 0) {
        fl_chan_side(&ch, 1);
        close(l);
        client(v, port, &ch);
        _exit(0);
    }
    fl_chan_side(&ch, 0);
    struct conn c[2] = {{fl_accept(l), 0, 0, 10}, {fl_accept(l), 0, 0, 20}};
    round_trip(&c[A], true, ROUND_C2S, ROUND_S2C);
    round_trip(&c[A], true, ROUND_C2S, ROUND_S2C);
    round_trip(&c[B], true, 3 * ROUND_C2S, 3 * ROUND_S2C);
    fl_wait(&ch); /* A is scribbled on */
    if (v->kind == HARMLESS) {
        bulk_and_close(&c[A], true);
    } else {
        server_loses_a(v, &c[A]);
        fl_post(&ch, 1);
    }
    bulk_and_close(&c[B], true);
    fl_wait(&ch);
    if (v->kind != HARMLESS)
        close(c[A].fd);
    int st = fl_reap(pid);
    if (st != 0)
        FAIL("client exited with status %d", st);
    printf("%s: server lived on, B verified both ways\n", v->name);
    return 0;
}
