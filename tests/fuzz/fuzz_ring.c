/* link: src/core/ring.c src/util/crc32c.c */
/* An honest producer and an honest consumer share one ring whose shared words the
 * input overwrites between their operations, as a hostile peer may at any moment.
 * Each end must keep every access inside the ring and the caller's buffers (the
 * ring, the control block and every buffer are separate heap blocks of exact
 * size), accept a peer cursor exactly when ring.h's rules allow it and never adopt
 * a rejected one, and, as long as it accepted no forged cursor, deliver the
 * producer's bytes unchanged.
 *
 * Rings reach 32 KiB, so that the producer rewinds (ring.h) when it finds one empty;
 * a forged rewind mark counts as a lie once an end follows it.
 *
 * Urgent data rides along: the producer marks the last byte of a write urgent when
 * told, the consumer takes urgent cursors as they come, and forged ones (and forged
 * runs) must be refused or taken exactly as ring.h's rules say, never dropping more
 * than was published.
 *
 * Input: ring size exponent, capacity reduction (2 bytes), then operations of one
 * byte each with fixed-length arguments; bytes past the end read as zero. */
#include "fuzz.h"
#include "ring.h"

#include <string.h>

#define PIECES 4          /* iovecs per copy; the last takes the rest */
#define SKIP_MAX 4
#define JUNK_IN 0xee      /* iovec bytes the producer skips */
#define JUNK_OUT 0x5a     /* iovec bytes the consumer must leave alone */

enum op {
	OP_PRODUCE,       /* len:2 skip:1 (top bit: urgent) pieces:3 */
	OP_CONSUME,       /* skip:2 len:2 iov_skip:1 pieces:3 consume:2 */
	OP_FORGE_PROD,    /* value:8 */
	OP_NUDGE_PROD,    /* delta:2, from the consumer's cursor */
	OP_FORGE_CONS,    /* value:8 */
	OP_NUDGE_CONS,    /* delta:2, from the producer's cursor */
	OP_SCRIBBLE,      /* which:1 value:4 on a wait or flags word */
	OP_WAIT,          /* what:1 */
	OP_FORGE_SKIP,    /* delta:2, from the consumer's cursor */
	OP_URG,           /* the consumer takes what urgent cursor came */
	OP_FORGE_URG,     /* delta:2, from the consumer's cursor */
	OP_FORGE_RUN,     /* delta:2, from the consumer's cursor */
	OP_COUNT
};

struct input {
	const uint8_t *p;
	size_t left;
};

static uint64_t take(struct input *in, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		if (in->left) {
			v |= (uint64_t)*in->p++ << (8 * i);
			in->left--;
		}
	return v;
}

struct world {
	struct ring_shared *sh;
	unsigned char *data;
	uint64_t size, cap;
	struct ring_end prod, cons;
	int prod_dead, cons_dead;
	uint64_t skip;    /* the rewind mark the honest producer set last */
	int tainted;      /* an end accepted a lie: the contents prove nothing any more */
};

static unsigned char stream_byte(uint64_t k)
{
	return (unsigned char)(k * 131 + (k >> 9));
}

/* Separate exact-size blocks covering total bytes; piece lengths from the input. */
static int pieces_alloc(struct iovec *iov, struct input *in, size_t total)
{
	int n;

	for (n = 0; n < PIECES; n++) {
		size_t l = n == PIECES - 1 ? total : (size_t)take(in, 1) % (total + 1);

		iov[n].iov_base = malloc(l);
		iov[n].iov_len = l;
		if (!iov[n].iov_base && l)
			abort();
		total -= l;
	}
	return n;
}

static void pieces_free(struct iovec *iov, int n)
{
	for (int i = 0; i < n; i++)
		free(iov[i].iov_base);
}

static unsigned char *piece_byte(struct iovec *iov, size_t k)
{
	for (;; iov++) {
		if (k < iov->iov_len)
			return (unsigned char *)iov->iov_base + k;
		k -= iov->iov_len;
	}
}

static uint64_t round_up(uint64_t cursor, uint64_t size)
{
	return (cursor + size - 1) & ~(size - 1);
}

/* Where an end at pos stands once it follows the rewind mark (ring.h): a forged mark
 * followed is a lie accepted. */
static uint64_t follow_skip(struct world *w, uint64_t pos)
{
	uint64_t skip = atomic_load(&w->sh->prod_skip);

	if (pos != skip || round_up(skip, w->size) == skip)
		return pos;
	if (skip != w->skip)
		w->tainted = 1;
	return round_up(skip, w->size);
}

static void op_produce(struct world *w, struct input *in)
{
	uint64_t raw = atomic_load(&w->sh->cons), pos = w->prod.pos, peer = w->prod.peer, space;
	uint64_t cons = follow_skip(w, raw);
	/* Bounded by the ring: cap bounds only what the producer adds. */
	int legal = cons >= peer && cons <= pos && pos - cons <= w->size;
	size_t len, skip;
	struct iovec iov[PIECES];
	int n;

	FUZZ_ASSERT(ring_space(&w->prod, &space) == (legal ? RING_OK : RING_CORRUPT));
	if (!legal) {
		FUZZ_ASSERT(w->prod.peer == peer);
		w->prod_dead = 1;
		return;
	}
	FUZZ_ASSERT(space == (pos - cons < w->cap ? w->cap - (pos - cons) : 0));
	FUZZ_ASSERT(w->prod.peer == cons);
	if (cons > w->cons.pos)
		w->tainted = 1; /* unread bytes may be overwritten */
	len = (size_t)take(in, 2) % (space + 1);
	uint8_t sk = (uint8_t)take(in, 1);
	int urgent = (sk & 0x80) && len;
	uint64_t urg_before = atomic_load(&w->sh->prod_urg);
	skip = sk % SKIP_MAX;
	/* The rewind's rule: looked at every RING_REWIND_AT bytes, taken when the ring is
	 * empty, long, and the bytes fit before the mark. */
	uint64_t off = pos & (w->size - 1);
	int rewind = pos >= w->prod.rewind_at && off >= RING_REWIND_AT && len <= off &&
		     w->cap == w->size && cons == pos;
	uint64_t at = rewind ? round_up(pos, w->size) : pos;
	n = pieces_alloc(iov, in, skip + len);
	for (size_t k = 0; k < skip + len; k++)
		*piece_byte(iov, k) = k < skip ? JUNK_IN : stream_byte(at + k - skip);
	ring_write(&w->prod, iov, n, skip, len);
	if (urgent)
		ring_mark_urgent(&w->prod);
	ring_publish(&w->prod);
	FUZZ_ASSERT(w->prod.pos == at + len);
	FUZZ_ASSERT(atomic_load(&w->sh->prod) == at + len);
	FUZZ_ASSERT(atomic_load(&w->sh->prod_urg) == (urgent ? at + len : urg_before));
	if (urgent)
		FUZZ_ASSERT(atomic_load(&w->sh->prod_urg_run) <= at + len);
	if (rewind) {
		FUZZ_ASSERT(atomic_load(&w->sh->prod_skip) == pos);
		w->skip = pos;
	}
	pieces_free(iov, n);
}

static void op_consume(struct world *w, struct input *in)
{
	uint64_t prod = atomic_load(&w->sh->prod), pos = w->cons.pos, peer = w->cons.peer, avail;
	uint64_t published, stood = pos;

	FUZZ_ASSERT(peer >= pos);
	/* The mark is followed only once the producer is past the gap. */
	if (prod - round_up(pos, w->size) <= w->size)
		pos = follow_skip(w, pos);
	int legal = prod >= peer && prod - pos <= w->size;
	size_t skip, len, iov_skip, got, n;
	struct iovec iov[PIECES];
	int cnt;

	FUZZ_ASSERT(ring_avail(&w->cons, &avail) == (legal ? RING_OK : RING_CORRUPT));
	if (!legal) {
		FUZZ_ASSERT(w->cons.peer == peer && w->cons.pos == stood);
		w->cons_dead = 1;
		return;
	}
	FUZZ_ASSERT(w->cons.pos == pos);
	FUZZ_ASSERT(avail == prod - pos);
	FUZZ_ASSERT(w->cons.peer == prod);
	/* Bytes nobody wrote: beyond the producer, or in the gap it left when it
	 * rewound last, which only a lie (a cursor inside it, or a mark overwritten
	 * so that the consumer does not follow it) makes the consumer read. */
	uint64_t gap_end = round_up(w->skip, w->size);
	if (prod > w->prod.pos || (w->skip < gap_end && pos < gap_end && prod > w->skip))
		w->tainted = 1;
	skip = (size_t)take(in, 2) % (avail + 1);
	len = (size_t)take(in, 2) % (avail - skip + 1);
	iov_skip = (size_t)take(in, 1) % SKIP_MAX;
	cnt = pieces_alloc(iov, in, iov_skip + len);
	for (size_t k = 0; k < iov_skip + len; k++)
		*piece_byte(iov, k) = JUNK_OUT;
	published = atomic_load(&w->sh->cons);
	got = ring_peek(&w->cons, skip, iov, cnt, iov_skip, len);
	FUZZ_ASSERT(got == len);
	FUZZ_ASSERT(atomic_load(&w->sh->cons) == published); /* peeking consumes nothing */
	for (size_t k = 0; k < iov_skip; k++)
		FUZZ_ASSERT(*piece_byte(iov, k) == JUNK_OUT);
	for (size_t k = 0; k < len && !w->tainted; k++)
		FUZZ_ASSERT(*piece_byte(iov, iov_skip + k) == stream_byte(pos + skip + k));
	pieces_free(iov, cnt);
	n = (size_t)take(in, 2) % (avail + 1);
	ring_consume(&w->cons, n);
	FUZZ_ASSERT(w->cons.pos == pos + n);
	FUZZ_ASSERT(atomic_load(&w->sh->cons) == pos + n);
}

/* The consumer looks for an urgent cursor, as a read does after ring_avail(). */
static void op_urg(struct world *w)
{
	uint64_t avail, urg, run, pos, old = w->cons.urg;

	if (ring_avail(&w->cons, &avail) < 0) {
		w->cons_dead = 1;
		return;
	}
	pos = w->cons.pos;
	uint64_t u = atomic_load(&w->sh->prod_urg);
	int bad = u < old || (u > pos && u - pos > w->size);
	int r = ring_urg_news(&w->cons, &urg, &run);
	FUZZ_ASSERT(r == (bad ? RING_CORRUPT : u != old && u <= w->cons.peer ? 1 : RING_OK));
	FUZZ_ASSERT(w->cons.urg == old && w->cons.pos == pos);
	if (r == RING_CORRUPT) {
		w->cons_dead = 1;
		return;
	}
	if (r == 0)
		return;
	FUZZ_ASSERT(urg == u && run <= urg);
	uint64_t drop = ring_urg_take(&w->cons, urg, run);
	/* Only bytes before the newest urgent one, all of them published. */
	FUZZ_ASSERT(w->cons.urg == urg && !w->cons.urg_read && w->cons.pos == pos);
	FUZZ_ASSERT(drop == 0 || pos + drop <= urg - 1);
	FUZZ_ASSERT(drop <= avail);
	ring_consume(&w->cons, drop);
}

static void op_scribble(struct world *w, struct input *in)
{
	uint8_t which = (uint8_t)take(in, 1);
	uint32_t v = (uint32_t)take(in, 4);
	_Atomic uint32_t *words[] = { &w->sh->prod_wait, &w->sh->prod_flags, &w->sh->cons_wait,
				      &w->sh->cons_flags };

	atomic_store(words[which % 4], v);
}

/* Either end arms, disarms or checks whether to ring the other's doorbell. */
static void op_wait(struct world *w, struct input *in)
{
	uint8_t what = (uint8_t)take(in, 1);
	/* The producer waits in prod_wait and rings for cons_wait, and vice versa. */
	_Atomic uint32_t *word = what & 1 ? &w->sh->prod_wait : &w->sh->cons_wait;
	uint32_t *last = what & 1 ? &w->cons.last_rung : &w->prod.last_rung;
	uint32_t g = atomic_load(word), seen = *last;
	int ring;

	switch ((what >> 1) % 3) {
	case 0:
		ring_arm(word);
		FUZZ_ASSERT(atomic_load(word) & 1);
		FUZZ_ASSERT(atomic_load(word) != g);
		break;
	case 1:
		ring_disarm(word);
		FUZZ_ASSERT(atomic_load(word) == (g & 1 ? g + 1 : g));
		break;
	default:
		ring = ring_should_ring(word, last);
		FUZZ_ASSERT(ring == ((g & 1) && g != seen));
		FUZZ_ASSERT(*last == (ring ? g : seen));
		FUZZ_ASSERT(ring_should_ring(word, last) == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct world w = { 0 };

	w.size = 1ull << (3 + take(&in, 1) % 13);
	w.cap = w.size - take(&in, 2) % w.size;
	w.sh = aligned_alloc(RING_CACHELINE, sizeof(*w.sh));
	w.data = malloc(w.size);
	if (!w.sh || !w.data)
		abort();
	memset(w.sh, 0, sizeof(*w.sh));
	memset(w.data, 0, w.size);
	ring_end_init(&w.prod, w.sh, w.data, w.size);
	ring_end_init(&w.cons, w.sh, w.data, w.size);
	ring_limit(&w.prod, w.cap);

	while (in.left) {
		switch (take(&in, 1) % OP_COUNT) {
		case OP_PRODUCE:
			if (!w.prod_dead)
				op_produce(&w, &in);
			break;
		case OP_CONSUME:
			if (!w.cons_dead)
				op_consume(&w, &in);
			break;
		case OP_FORGE_PROD:
			atomic_store(&w.sh->prod, take(&in, 8));
			break;
		case OP_NUDGE_PROD:
			atomic_store(&w.sh->prod, w.cons.pos + (uint64_t)(int64_t)(int16_t)take(&in, 2));
			break;
		case OP_FORGE_CONS:
			atomic_store(&w.sh->cons, take(&in, 8));
			break;
		case OP_NUDGE_CONS:
			atomic_store(&w.sh->cons, w.prod.pos + (uint64_t)(int64_t)(int16_t)take(&in, 2));
			break;
		case OP_SCRIBBLE:
			op_scribble(&w, &in);
			break;
		case OP_FORGE_SKIP:
			atomic_store(&w.sh->prod_skip,
				     w.cons.pos + (uint64_t)(int64_t)(int16_t)take(&in, 2));
			break;
		case OP_URG:
			if (!w.cons_dead)
				op_urg(&w);
			break;
		case OP_FORGE_URG:
			w.tainted = 1; /* a forged urgent cursor may drop bytes */
			atomic_store(&w.sh->prod_urg,
				     w.cons.pos + (uint64_t)(int64_t)(int16_t)take(&in, 2));
			break;
		case OP_FORGE_RUN:
			w.tainted = 1;
			atomic_store(&w.sh->prod_urg_run,
				     w.cons.pos + (uint64_t)(int64_t)(int16_t)take(&in, 2));
			break;
		default:
			op_wait(&w, &in);
		}
	}
	free(w.data);
	free(w.sh);
	return 0;
}

/* Seeds: a small ring driven round its wrap point, then the same with a capacity
 * below the size and with forged cursors in between. */
struct seed {
	uint8_t b[512];
	size_t n;
};

static void put(struct seed *s, int bytes, uint64_t v)
{
	for (int i = 0; i < bytes && s->n < sizeof(s->b); i++)
		s->b[s->n++] = (uint8_t)(v >> (8 * i));
}

static void put_produce(struct seed *s, uint16_t len, int urgent)
{
	put(s, 1, OP_PRODUCE);
	put(s, 2, len);
	put(s, 1, urgent ? 0x81 : 1);
	put(s, 3, 0x030201);
}

static void put_consume(struct seed *s, uint16_t len)
{
	put(s, 1, OP_CONSUME);
	put(s, 2, 0);
	put(s, 2, len);
	put(s, 1, 2);
	put(s, 3, 0x010302);
	put(s, 2, len);
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	for (int variant = 0; variant < 3; variant++) {
		struct seed s = { .n = 0 };

		put(&s, 1, 1);                       /* 16-byte ring */
		put(&s, 2, variant == 1 ? 5 : 0);    /* cap 16 or 11 */
		for (int i = 0; i < 8; i++) {
			put_produce(&s, 10, 0);
			put_consume(&s, 7);
			put(&s, 1, OP_WAIT);
			put(&s, 1, (uint64_t)i);
			if (variant == 2 && i == 4) {
				put(&s, 1, OP_NUDGE_PROD);
				put(&s, 2, 17);
				put(&s, 1, OP_NUDGE_CONS);
				put(&s, 2, (uint16_t)-3);
			}
		}
		emit(s.b, s.n);
	}
	/* A 32 KiB ring with 1000-byte messages read one by one: the producer rewinds;
	 * in the second, the peer then claims a cursor inside the gap it left. */
	for (int variant = 0; variant < 2; variant++) {
		struct seed s = { .n = 0 };
		put(&s, 1, 12);
		put(&s, 2, 0);
		for (int i = 0; i < 20; i++) {
			put_produce(&s, 1000, 0);
			if (variant == 1 && i == 9) {
				put(&s, 1, OP_NUDGE_PROD);
				put(&s, 2, 13107);
			}
			put_consume(&s, 1000);
		}
		emit(s.b, s.n);
	}
	/* Urgent bytes: after normal ones, one-byte ones back to back (a run), taken
	 * between reads; in the second, forged cursors and runs come in between. */
	for (int variant = 0; variant < 2; variant++) {
		struct seed s = { .n = 0 };
		put(&s, 1, 3);                       /* 64-byte ring */
		put(&s, 2, 0);
		for (int i = 0; i < 6; i++) {
			put_produce(&s, 5, 1);
			put(&s, 1, OP_URG);
			put_produce(&s, 1, 1);
			put_produce(&s, 1, 1);
			put(&s, 1, OP_URG);
			if (variant == 1) {
				put(&s, 1, i & 1 ? OP_FORGE_RUN : OP_FORGE_URG);
				put(&s, 2, (uint16_t)(i * 7 - 9));
				put(&s, 1, OP_URG);
			}
			put_consume(&s, 6);
		}
		emit(s.b, s.n);
	}
}
