/* link: src/core/ring.c src/util/crc32c.c */
/* threads */
/* The shared-memory ring: copies across the wrap point, cursor validation, the
 * doorbell protocol, and two threads moving a large stream through it. */
#include "check.h"
#include "ring.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define IOV_TEST_MAX 16
#define SKIP_MAX 8

/* Producer and consumer ends of one ring, as two processes would hold them. */
struct pair {
	struct ring_shared sh;
	unsigned char *data;
	struct ring_end prod, cons;
};

static void pair_init(struct pair *p, uint64_t size, uint64_t cap)
{
	memset(&p->sh, 0, sizeof(p->sh));
	p->data = malloc(size);
	if (!p->data)
		abort();
	ring_end_init(&p->prod, &p->sh, p->data, size);
	ring_end_init(&p->cons, &p->sh, p->data, size);
	ring_limit(&p->prod, cap);
}

static void pair_free(struct pair *p)
{
	free(p->data);
}

/* Cuts b[0..total) into at most max iovecs of random lengths, empty ones included. */
static int scatter(struct iovec *iov, int max, unsigned char *b, size_t total,
		   unsigned short rs[3])
{
	int n = 0;

	while (n < max - 1 && total) {
		size_t l = (size_t)nrand48(rs) % (total / 2 + 2);

		if (l > total)
			l = total;
		iov[n++] = (struct iovec){ b, l };
		b += l;
		total -= l;
	}
	iov[n++] = (struct iovec){ b, total };
	return n;
}

/* Writes and publishes, the last byte urgent when asked, as a send does. */
static void produce(struct ring_end *r, const struct iovec *iov, int cnt, size_t skip, size_t n,
		    int urgent)
{
	ring_write(r, iov, cnt, skip, n);
	if (urgent)
		ring_mark_urgent(r);
	ring_publish(r);
}

/* Produces src[0..n) in one iovec; the caller has checked the space. */
static void put(struct pair *p, const void *src, size_t n)
{
	struct iovec iov = { (void *)src, n };

	produce(&p->prod, &iov, 1, 0, n, 0);
}

static void put_pattern(struct pair *p, size_t n, unsigned char first)
{
	unsigned char buf[256];

	for (size_t i = 0; i < n; i++)
		buf[i] = (unsigned char)(first + i);
	put(p, buf, n);
}

/* Moves both cursors forward by n, at most cap at a time, without checking contents. */
static void advance(struct pair *p, size_t n)
{
	uint64_t v;

	while (n) {
		size_t step = n < p->prod.limit ? n : p->prod.limit;

		put_pattern(p, step, 0);
		CHECK_EQ(ring_avail(&p->cons, &v), RING_OK);
		ring_consume(&p->cons, step);
		CHECK_EQ(ring_space(&p->prod, &v), RING_OK);
		n -= step;
	}
}

/* Random produce/consume steps with scattered iovecs and skipped prefixes, compared
 * with a reference stream; returns how many bytes went through. */
static uint64_t transfer_random(uint64_t size, uint64_t cap, size_t total, unsigned short rs[3])
{
	struct pair p;
	unsigned char *ref = malloc(total);
	unsigned char *stage = malloc(SKIP_MAX + size);
	struct iovec iov[IOV_TEST_MAX];
	size_t sent = 0, recvd = 0;
	uint64_t gaps = 0, passed = 0; /* rewinds' gaps: made by the producer, passed by the consumer */
	long steps = 0;

	if (!ref || !stage)
		abort();
	pair_init(&p, size, cap);
	for (size_t i = 0; i < total; i++)
		ref[i] = (unsigned char)nrand48(rs);
	/* A working ring gets through in about 4 * total / cap steps; this many means stuck. */
	while (recvd < total && CHECK(steps++ < 100000)) {
		uint64_t space, avail;
		size_t skip = (size_t)nrand48(rs) % SKIP_MAX, n;
		int cnt;

		if (!CHECK_EQ(ring_space(&p.prod, &space), RING_OK) || !CHECK(space <= cap))
			break;
		n = (size_t)nrand48(rs) % (space + 1);
		if (n > total - sent)
			n = total - sent;
		memset(stage, 0xee, skip);
		memcpy(stage + skip, ref + sent, n);
		cnt = scatter(iov, IOV_TEST_MAX, stage, skip + n, rs);
		uint64_t at = p.prod.pos;
		produce(&p.prod, iov, cnt, skip, n, 0);
		gaps += p.prod.pos - at - n;
		sent += n;
		CHECK_EQ(atomic_load(&p.sh.prod), sent + gaps);

		at = p.cons.pos;
		if (!CHECK_EQ(ring_avail(&p.cons, &avail), RING_OK) || !CHECK_EQ(avail, sent - recvd))
			break;
		passed += p.cons.pos - at;
		n = (size_t)nrand48(rs) % (avail + 1);
		skip = (size_t)nrand48(rs) % SKIP_MAX;
		memset(stage, 0x11, skip + n);
		cnt = scatter(iov, IOV_TEST_MAX, stage, skip + n, rs);
		CHECK_EQ(ring_peek(&p.cons, 0, iov, cnt, skip, n), n);
		CHECK(memcmp(stage + skip, ref + recvd, n) == 0);
		for (size_t i = 0; i < skip; i++)
			CHECK_EQ(stage[i], 0x11);
		ring_consume(&p.cons, n);
		recvd += n;
		CHECK_EQ(atomic_load(&p.sh.cons), recvd + passed);
	}
	CHECK_EQ(recvd, total);
	CHECK(passed <= gaps);
	pair_free(&p);
	free(stage);
	free(ref);
	return recvd;
}

static void test_wrap_many_iovecs(void)
{
	unsigned short rs[3] = { 1, 2, 3 };
	static const uint64_t sizes[] = { 16, 64, 4096, 65536 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		CHECK(transfer_random(sizes[i], sizes[i], 40 * sizes[i], rs) > 20 * sizes[i]);
}

static void test_wrap_with_small_cap(void)
{
	unsigned short rs[3] = { 4, 5, 6 };

	/* A capacity that does not divide the size puts the wrap point anywhere in a write. */
	transfer_random(64, 48, 64 * 50, rs);
	transfer_random(4096, 3000, 4096 * 20, rs);
	transfer_random(16, 1, 300, rs);
}

static void test_peek_skip(void)
{
	struct pair p;
	unsigned char out[64] = { 0 }, small[20];
	struct iovec iov[3] = { { out, 5 }, { out + 5, 7 }, { out + 12, 40 } };
	uint64_t avail;

	pair_init(&p, 64, 64);
	advance(&p, 40);
	put_pattern(&p, 50, 100); /* bytes 100..149 at ring offsets 40..63, 0..25 */
	CHECK_EQ(ring_avail(&p.cons, &avail), RING_OK);
	CHECK_EQ(avail, 50);

	/* Skip 10 ring bytes and the first 3 iovec bytes; the copy crosses the wrap
	 * and two iovec boundaries. */
	CHECK_EQ(ring_peek(&p.cons, 10, iov, 3, 3, 30), 30);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(out[i], 0);
	for (int i = 0; i < 30; i++)
		CHECK_EQ(out[3 + i], 110 + i);
	CHECK_EQ(out[33], 0);

	/* Peeking consumes nothing. */
	CHECK_EQ(atomic_load(&p.sh.cons), 40);
	CHECK_EQ(ring_avail(&p.cons, &avail), RING_OK);
	CHECK_EQ(avail, 50);

	/* A buffer shorter than asked for gets filled and no more. */
	iov[0] = (struct iovec){ small, sizeof(small) };
	CHECK_EQ(ring_peek(&p.cons, 25, iov, 1, 0, 25), sizeof(small));
	for (size_t i = 0; i < sizeof(small); i++)
		CHECK_EQ(small[i], (unsigned char)(125 + i));

	ring_consume(&p.cons, 20);
	CHECK_EQ(ring_peek(&p.cons, 0, iov, 1, 0, 1), 1);
	CHECK_EQ(small[0], 120);
	pair_free(&p);
}

static void test_capacity_limit(void)
{
	struct pair p;
	uint64_t space;

	pair_init(&p, 64, 48);
	CHECK_EQ(ring_space(&p.prod, &space), RING_OK);
	CHECK_EQ(space, 48);
	put_pattern(&p, 48, 0);
	CHECK_EQ(ring_space(&p.prod, &space), RING_OK);
	CHECK_EQ(space, 0);
	CHECK_EQ(ring_avail(&p.cons, &space), RING_OK);
	ring_consume(&p.cons, 10);
	CHECK_EQ(ring_space(&p.prod, &space), RING_OK);
	CHECK_EQ(space, 10);
	pair_free(&p);
}

/* Small messages on a large ring, each read before the next: past RING_REWIND_AT the
 * producer finds the ring empty and goes back to its start, the consumer follows, and the
 * gap between costs the producer no room. */
static void test_rewind(void)
{
	struct pair p;
	unsigned char msg[200], got[200];
	struct iovec in = { got, sizeof(got) };
	uint64_t v, top = 0;

	pair_init(&p, 1 << 16, 1 << 16);
	for (int i = 0; i < 1000; i++) {
		memset(msg, i, sizeof(msg));
		put(&p, msg, sizeof(msg));
		uint64_t off = (p.prod.pos - sizeof(msg)) & ((1 << 16) - 1);
		if (off > top)
			top = off;
		CHECK_EQ(ring_space(&p.prod, &v), RING_OK);
		CHECK_EQ(v, (1 << 16) - sizeof(msg));
		CHECK_EQ(ring_avail(&p.cons, &v), RING_OK);
		CHECK_EQ(v, sizeof(msg));
		CHECK_EQ(ring_peek(&p.cons, 0, &in, 1, 0, sizeof(got)), sizeof(got));
		CHECK(memcmp(got, msg, sizeof(msg)) == 0);
		ring_consume(&p.cons, sizeof(msg));
	}
	/* 200 000 bytes went through the first RING_REWIND_AT and one message of it. */
	CHECK(top < RING_REWIND_AT + sizeof(msg));
	CHECK(p.prod.pos > 200000);

	/* Streaming: a ring that is never empty when the producer looks is not rewound. */
	uint64_t at = p.prod.pos;
	put(&p, msg, sizeof(msg));
	for (int i = 0; i < 100; i++) {
		put(&p, msg, sizeof(msg));
		CHECK_EQ(ring_avail(&p.cons, &v), RING_OK);
		ring_consume(&p.cons, sizeof(msg));
	}
	CHECK_EQ(p.prod.pos, at + 101 * sizeof(msg));

	/* A rewind announced before its bytes: the consumer does not follow it yet. */
	CHECK_EQ(ring_avail(&p.cons, &v), RING_OK);
	ring_consume(&p.cons, v);
	uint64_t stand = p.cons.pos;
	atomic_store(&p.sh.prod_skip, stand);
	CHECK_EQ(ring_avail(&p.cons, &v), RING_OK);
	CHECK_EQ(v, 0);
	CHECK_EQ(p.cons.pos, stand);
	pair_free(&p);
}

static void test_prod_cursor_checks(void)
{
	struct pair p;
	uint64_t avail;

	pair_init(&p, 64, 64);
	advance(&p, 40);
	put_pattern(&p, 20, 0); /* producer at 60, consumer at 40 */
	CHECK_EQ(ring_avail(&p.cons, &avail), RING_OK);
	CHECK_EQ(avail, 20);

	static const struct {
		uint64_t prod;
		int ok;
		uint64_t avail;
	} cases[] = {
		{ 39, 0, 0 },               /* behind the consumer */
		{ 50, 0, 0 },               /* backwards from the 60 already accepted */
		{ 59, 0, 0 },
		{ 60, 1, 20 },              /* unchanged */
		{ 40 + 64 + 1, 0, 0 },      /* more than a ring ahead of the consumer */
		{ UINT64_MAX, 0, 0 },
		{ 1ull << 63, 0, 0 },
		{ 40 + 64, 1, 64 },         /* exactly full */
		{ 60, 0, 0 },               /* backwards from 104 now */
		{ 104, 1, 64 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		avail = 12345;
		atomic_store(&p.sh.prod, cases[i].prod);
		if (cases[i].ok) {
			CHECK_EQ(ring_avail(&p.cons, &avail), RING_OK);
			CHECK_EQ(avail, cases[i].avail);
		} else {
			CHECK_EQ(ring_avail(&p.cons, &avail), RING_CORRUPT);
			CHECK_EQ(avail, 12345);
		}
		/* A rejected value is never adopted. */
		CHECK_EQ(p.cons.pos, 40);
	}
	pair_free(&p);
}

static void test_cons_cursor_checks(void)
{
	struct pair p;
	uint64_t space;

	pair_init(&p, 64, 48);
	put_pattern(&p, 48, 0);
	CHECK_EQ(ring_avail(&p.cons, &space), RING_OK);
	ring_consume(&p.cons, 20);
	CHECK_EQ(ring_space(&p.prod, &space), RING_OK);
	CHECK_EQ(space, 20);
	put_pattern(&p, 20, 0); /* producer at 68, consumer accepted at 20 */

	static const struct {
		uint64_t cons;
		int ok;
		uint64_t space;
	} cases[] = {
		{ 69, 0, 0 },          /* past the producer */
		{ UINT64_MAX, 0, 0 },
		{ 19, 0, 0 },          /* backwards */
		{ 0, 0, 0 },
		{ 20, 1, 0 },          /* unchanged: exactly cap outstanding */
		{ 30, 1, 10 },
		{ 25, 0, 0 },          /* backwards from 30 */
		{ 68, 1, 48 },         /* everything consumed */
		{ 67, 0, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		space = 12345;
		atomic_store(&p.sh.cons, cases[i].cons);
		if (cases[i].ok) {
			CHECK_EQ(ring_space(&p.prod, &space), RING_OK);
			CHECK_EQ(space, cases[i].space);
		} else {
			CHECK_EQ(ring_space(&p.prod, &space), RING_CORRUPT);
			CHECK_EQ(space, 12345);
		}
		CHECK_EQ(p.prod.pos, 68);
	}
	pair_free(&p);
}

/* A connection starts with a small window while its proposal is pending and opens
 * the whole ring once attached: raising cap with bytes outstanding gives exactly
 * the extra room and keeps the stream intact across the wrap. */
static void test_cap_raised(void)
{
	struct pair p;
	uint64_t space;
	unsigned char out[64];
	struct iovec iov = { out, sizeof(out) };

	pair_init(&p, 64, 16);
	advance(&p, 50);
	put_pattern(&p, 16, 0);
	CHECK_EQ(ring_space(&p.prod, &space), RING_OK);
	CHECK_EQ(space, 0);
	ring_limit(&p.prod, p.prod.size);
	CHECK_EQ(ring_space(&p.prod, &space), RING_OK);
	CHECK_EQ(space, 48);
	put_pattern(&p, 48, 16);
	CHECK_EQ(ring_avail(&p.cons, &space), RING_OK);
	CHECK_EQ(space, 64);
	CHECK_EQ(ring_peek(&p.cons, 0, &iov, 1, 0, 64), 64);
	for (int i = 0; i < 64; i++)
		CHECK_EQ(out[i], i);
	pair_free(&p);
}

/* A buffer shrunk below what the ring holds: no room, and the bytes stay, neither
 * lost nor taken for a broken cursor. */
static void test_cap_shrunk(void)
{
	struct pair p;
	uint64_t space;

	pair_init(&p, 64, 64);
	put_pattern(&p, 40, 0);
	ring_limit(&p.prod, 16);
	CHECK_EQ(ring_room(&p.prod), 0);
	CHECK_EQ(ring_space(&p.prod, &space), RING_OK);
	CHECK_EQ(space, 0);
	CHECK_EQ(ring_avail(&p.cons, &space), RING_OK);
	CHECK_EQ(space, 40);
	ring_consume(&p.cons, 30);
	CHECK_EQ(ring_space(&p.prod, &space), RING_OK);
	CHECK_EQ(space, 6);
	pair_free(&p);
}

/* The urgent byte travels with its write: the cursor past it is published with the
 * bytes, taken once, and a newer one drops the older byte only when the reader
 * stands at it, or at each one of a run of them. */
static void test_urgent(void)
{
	struct pair p;
	uint64_t v, urg, run;
	struct iovec iov = { "abc", 3 };

	pair_init(&p, 64, 64);
	CHECK_EQ(ring_avail(&p.cons, &v), RING_OK);
	CHECK_EQ(ring_urg_news(&p.cons, &urg, &run), 0);
	produce(&p.prod, &iov, 1, 0, 3, 1);
	CHECK_EQ(atomic_load(&p.sh.prod_urg), 3);
	CHECK_EQ(ring_avail(&p.cons, &v), RING_OK);
	CHECK_EQ(ring_urg_news(&p.cons, &urg, &run), 1);
	CHECK_EQ(urg, 3);
	CHECK_EQ(run, 3);
	CHECK_EQ(ring_urg_take(&p.cons, urg, run), 0);
	CHECK(ring_urg_live(&p.cons));
	CHECK_EQ(ring_urg_news(&p.cons, &urg, &run), 0);
	/* Not at the mark: the older urgent byte becomes normal data. */
	put_pattern(&p, 1, 0);
	produce(&p.prod, &iov, 1, 0, 1, 1);
	CHECK_EQ(ring_avail(&p.cons, &v), RING_OK);
	CHECK_EQ(ring_urg_news(&p.cons, &urg, &run), 1);
	CHECK_EQ(ring_urg_take(&p.cons, urg, run), 0);
	CHECK_EQ(p.cons.urg, 5);
	/* At the mark, with two more back to back: both before the last drop. */
	ring_consume(&p.cons, 4);
	produce(&p.prod, &iov, 1, 0, 1, 1);
	produce(&p.prod, &iov, 1, 0, 1, 1);
	CHECK_EQ(atomic_load(&p.sh.prod_urg_run), 5);
	CHECK_EQ(ring_avail(&p.cons, &v), RING_OK);
	CHECK_EQ(ring_urg_news(&p.cons, &urg, &run), 1);
	CHECK_EQ(ring_urg_take(&p.cons, urg, run), 2);
	CHECK_EQ(p.cons.urg, 7);
	pair_free(&p);
}

/* Forged urgent cursors: backwards or more than a ring ahead are refused; ahead of
 * what was published waits; one already read past is taken as passed. */
static void test_urgent_forged(void)
{
	struct pair p;
	uint64_t v, urg, run;

	pair_init(&p, 64, 64);
	put_pattern(&p, 20, 0);
	CHECK_EQ(ring_avail(&p.cons, &v), RING_OK);
	ring_consume(&p.cons, 10);
	atomic_store(&p.sh.prod_urg, 15);
	CHECK_EQ(ring_urg_news(&p.cons, &urg, &run), 1);
	ring_urg_take(&p.cons, urg, run);
	atomic_store(&p.sh.prod_urg, 14);
	CHECK_EQ(ring_urg_news(&p.cons, &urg, &run), RING_CORRUPT);
	atomic_store(&p.sh.prod_urg, 10 + 64 + 1);
	CHECK_EQ(ring_urg_news(&p.cons, &urg, &run), RING_CORRUPT);
	atomic_store(&p.sh.prod_urg, 21);
	CHECK_EQ(ring_urg_news(&p.cons, &urg, &run), 0);
	atomic_store(&p.sh.prod_urg, 20);
	atomic_store(&p.sh.prod_urg_run, 1000);
	CHECK_EQ(ring_urg_news(&p.cons, &urg, &run), 1);
	CHECK_EQ(run, 20);
	CHECK_EQ(p.cons.urg, 15);
	pair_free(&p);
}

static void test_wait_generations(void)
{
	_Atomic uint32_t w = 0;
	uint32_t last = 0, g1, g2;

	CHECK_EQ(ring_should_ring(&w, &last), 0);
	ring_arm(&w);
	g1 = atomic_load(&w);
	CHECK(g1 & 1);
	CHECK_EQ(ring_should_ring(&w, &last), 1);
	CHECK_EQ(last, g1);
	CHECK_EQ(ring_should_ring(&w, &last), 0);

	ring_disarm(&w);
	CHECK_EQ(atomic_load(&w) & 1, 0);
	CHECK_EQ(ring_should_ring(&w, &last), 0);
	ring_disarm(&w); /* disarming twice changes nothing */
	CHECK_EQ(atomic_load(&w), g1 + 1);

	ring_arm(&w);
	g2 = atomic_load(&w);
	CHECK(g2 & 1);
	CHECK(g2 != g1);
	CHECK_EQ(ring_should_ring(&w, &last), 1);
	CHECK_EQ(ring_should_ring(&w, &last), 0);

	/* Arming again without disarming (a wake-up that found nothing) is a new
	 * generation that deserves its own ring. */
	ring_arm(&w);
	CHECK(atomic_load(&w) != g2);
	CHECK(atomic_load(&w) & 1);
	CHECK_EQ(ring_should_ring(&w, &last), 1);
	CHECK_EQ(ring_should_ring(&w, &last), 0);
}

static void test_wait_wraps(void)
{
	_Atomic uint32_t w;
	uint32_t last, prev;
	static const uint32_t starts[] = { UINT32_MAX - 3, UINT32_MAX - 2, UINT32_MAX - 1,
					   UINT32_MAX };

	for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
		atomic_store(&w, starts[i]);
		last = starts[i];
		for (int k = 0; k < 4; k++) {
			prev = atomic_load(&w);
			ring_arm(&w);
			CHECK(atomic_load(&w) & 1);
			CHECK(atomic_load(&w) != prev);
			CHECK_EQ(ring_should_ring(&w, &last), 1);
			CHECK_EQ(ring_should_ring(&w, &last), 0);
			ring_disarm(&w);
			CHECK_EQ(atomic_load(&w) & 1, 0);
		}
	}
}

/* Two threads, one per end, sleeping on eventfd doorbells through the wait
 * protocol. A lost wake-up hangs the test (the runner's timeout reports it). */
#define STRESS_RING (64u << 10)
#define STRESS_CAP (STRESS_RING - 1000)
#define STRESS_CHUNK_MAX (3 * STRESS_RING / 2)
#define STRESS_POOL (256u << 10)

struct stress {
	struct pair p;
	int bell[2];           /* [0] wakes the consumer, [1] the producer */
	uint64_t total;
	const unsigned char *pool;
	uint64_t hash[2];      /* producer's and consumer's running checksums */
	uint64_t moved[2];
	unsigned sleeps[2];
	int corrupt[2];
	int bell_errors;
};

static uint64_t fnv1a(uint64_t h, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static void bell_ring(struct stress *s, int who)
{
	uint64_t one = 1;

	if (write(s->bell[who], &one, sizeof(one)) != sizeof(one))
		__atomic_fetch_add(&s->bell_errors, 1, __ATOMIC_RELAXED);
}

/* Arms, re-checks with ready(), sleeps only if still not ready. */
static void bell_wait(struct stress *s, int who, _Atomic uint32_t *wait,
		      int (*ready)(struct stress *))
{
	uint64_t v;

	ring_arm(wait);
	if (!ready(s)) {
		s->sleeps[who]++;
		while (read(s->bell[who], &v, sizeof(v)) < 0)
			if (errno != EINTR) {
				__atomic_fetch_add(&s->bell_errors, 1, __ATOMIC_RELAXED);
				break;
			}
	}
	ring_disarm(wait);
}

static int has_space(struct stress *s)
{
	uint64_t space;

	return ring_space(&s->p.prod, &space) != RING_OK || space > 0;
}

static int has_data(struct stress *s)
{
	uint64_t avail;

	return ring_avail(&s->p.cons, &avail) != RING_OK || avail > 0;
}

static void *stress_producer(void *arg)
{
	struct stress *s = arg;
	unsigned short rs[3] = { 7, 8, 9 };
	uint64_t h = 0xcbf29ce484222325ull, sent = 0;

	while (sent < s->total) {
		uint64_t space, n, off, split;

		if (ring_space(&s->p.prod, &space) != RING_OK) {
			s->corrupt[0] = 1;
			break;
		}
		if (space == 0) {
			bell_wait(s, 1, &s->p.sh.prod_wait, has_space);
			continue;
		}
		n = 1 + (uint64_t)nrand48(rs) % STRESS_CHUNK_MAX;
		if (n > space)
			n = space;
		if (n > s->total - sent)
			n = s->total - sent;
		off = (uint64_t)nrand48(rs) % (STRESS_POOL - n);
		split = (uint64_t)nrand48(rs) % (n + 1);
		struct iovec iov[2] = { { (void *)(s->pool + off), split },
					{ (void *)(s->pool + off + split), n - split } };
		produce(&s->p.prod, iov, 2, 0, n, 0);
		h = fnv1a(h, s->pool + off, n);
		sent += n;
		if (ring_should_ring(&s->p.sh.cons_wait, &s->p.prod.last_rung))
			bell_ring(s, 0);
	}
	s->hash[0] = h;
	s->moved[0] = sent;
	return NULL;
}

static void *stress_consumer(void *arg)
{
	struct stress *s = arg;
	unsigned short rs[3] = { 10, 11, 12 };
	unsigned char *buf = malloc(STRESS_CHUNK_MAX);
	uint64_t h = 0xcbf29ce484222325ull, recvd = 0;

	if (!buf)
		abort();
	while (recvd < s->total) {
		uint64_t avail, n;

		if (ring_avail(&s->p.cons, &avail) != RING_OK) {
			s->corrupt[1] = 1;
			break;
		}
		if (avail == 0) {
			bell_wait(s, 0, &s->p.sh.cons_wait, has_data);
			continue;
		}
		n = 1 + (uint64_t)nrand48(rs) % STRESS_CHUNK_MAX;
		if (n > avail)
			n = avail;
		struct iovec iov = { buf, n };
		ring_peek(&s->p.cons, 0, &iov, 1, 0, n);
		ring_consume(&s->p.cons, n);
		h = fnv1a(h, buf, n);
		recvd += n;
		if (ring_should_ring(&s->p.sh.prod_wait, &s->p.cons.last_rung))
			bell_ring(s, 1);
	}
	s->hash[1] = h;
	s->moved[1] = recvd;
	free(buf);
	return NULL;
}

static void test_two_thread_stress(void)
{
	static struct stress s;
	const char *mb = getenv("RING_STRESS_MB");
	unsigned short rs[3] = { 13, 14, 15 };
	unsigned char *pool = malloc(STRESS_POOL);
	pthread_t t[2];

	if (!pool)
		abort();
	for (size_t i = 0; i < STRESS_POOL; i++)
		pool[i] = (unsigned char)nrand48(rs);
	s.pool = pool;
	s.total = (uint64_t)(mb ? strtoull(mb, NULL, 10) : 256) << 20;
	pair_init(&s.p, STRESS_RING, STRESS_CAP);
	s.bell[0] = eventfd(0, EFD_CLOEXEC);
	s.bell[1] = eventfd(0, EFD_CLOEXEC);
	if (!CHECK(s.bell[0] >= 0 && s.bell[1] >= 0))
		return;
	CHECK_EQ(pthread_create(&t[0], NULL, stress_producer, &s), 0);
	CHECK_EQ(pthread_create(&t[1], NULL, stress_consumer, &s), 0);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);

	CHECK_EQ(s.corrupt[0], 0);
	CHECK_EQ(s.corrupt[1], 0);
	CHECK_EQ(s.bell_errors, 0);
	CHECK_EQ(s.moved[0], s.total);
	CHECK_EQ(s.moved[1], s.total);
	CHECK_EQ(s.hash[0], s.hash[1]);
	printf("     %" PRIu64 " MB moved; producer slept %u times, consumer %u times\n",
	       s.total >> 20, s.sleeps[0], s.sleeps[1]);
	close(s.bell[0]);
	close(s.bell[1]);
	pair_free(&s.p);
	free(pool);
}

int main(void)
{
	RUN(test_wrap_many_iovecs);
	RUN(test_wrap_with_small_cap);
	RUN(test_peek_skip);
	RUN(test_capacity_limit);
	RUN(test_rewind);
	RUN(test_prod_cursor_checks);
	RUN(test_cons_cursor_checks);
	RUN(test_cap_raised);
	RUN(test_cap_shrunk);
	RUN(test_urgent);
	RUN(test_urgent_forged);
	RUN(test_wait_generations);
	RUN(test_wait_wraps);
	RUN(test_two_thread_stress);
	return check_report();
}
