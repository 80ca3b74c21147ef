#include "ring.h"

#include <string.h>

#include "../util/crc32c.h"
#include "streamcopy.h"

void ring_end_init(struct ring_end *r, struct ring_shared *sh, unsigned char *data,
		   uint64_t size)
{
	r->sh = sh;
	r->data = data;
	r->size = size;
	r->limit = size;
	r->cap = size;
	/* Every connection starts at zero: whatever the shared cursors say is checked
	 * against this, never adopted. */
	r->pos = 0;
	r->peer = 0;
	r->last_rung = 0;
	r->rewind_at = 0;
	r->urg = 0;
	r->urg_read = 0;
}

int ring_avail(struct ring_end *r, uint64_t *avail)
{
	uint64_t prod = atomic_load_explicit(&r->sh->prod, memory_order_acquire);
	/* Stored before prod: the acquire above makes it current for this prod. */
	uint64_t skip = atomic_load_explicit(&r->sh->prod_skip, memory_order_relaxed);
	uint64_t to = ring_round_up(skip, r->size), pos = r->pos;

	/* The producer rewound where we stand, and went past the gap: its bytes
	 * continue at the ring's start. (A rewind it has not yet published data
	 * behind is taken at a later look.) */
	if (skip == pos && prod - to <= r->size)
		pos = to;
	/* Unsigned arithmetic: a cursor behind ours shows up as a huge distance.
	 * (The producer counts a gap it left as read once we stand at its mark,
	 * so the cursor it then publishes may be more than a ring ahead of the
	 * last one we saw, never behind it.) */
	if (prod - pos > r->size || prod < r->peer)
		return RING_CORRUPT;
	r->pos = pos;
	r->peer = prod;
	*avail = prod - pos;
	return RING_OK;
}

int ring_space(struct ring_end *r, uint64_t *space)
{
	uint64_t cons = atomic_load_explicit(&r->sh->cons, memory_order_acquire);

	/* A consumer that stopped where we rewound has read all there was up to
	 * the ring's start. prod_skip is read back from our own line: whoever
	 * scribbled on it can only make the consumer look further along, which
	 * the checks below bound as for any cursor it publishes. */
	if (cons == atomic_load_explicit(&r->sh->prod_skip, memory_order_relaxed))
		cons = ring_round_up(cons, r->size);
	/* Bounded by the ring, not by the limit: it may have shrunk below what
	 * the consumer has yet to read. */
	if (r->pos - cons > r->size || cons - r->peer > r->size)
		return RING_CORRUPT;
	r->peer = cons;
	ring_limit(r, r->limit);
	*space = ring_room(r);
	return RING_OK;
}

void ring_limit(struct ring_end *r, uint64_t limit)
{
	uint64_t used = r->pos - r->peer;

	r->limit = limit;
	r->cap = used > limit ? used : limit;
}

int ring_urg_news(const struct ring_end *r, uint64_t *urg, uint64_t *run)
{
	uint64_t u = atomic_load_explicit(&r->sh->prod_urg, memory_order_relaxed);

	if (u == r->urg)
		return RING_OK;
	/* A cursor moves forward, within a ring of ours. */
	if (u < r->urg || (u > r->pos && u - r->pos > r->size))
		return RING_CORRUPT;
	/* Stored, but its prod is not published yet (or we read an older one). */
	if (u > r->peer)
		return RING_OK;
	/* A run cannot start past its end; a forged one drops only bytes the
	 * producer could have sent urgent one by one. (A byte already consumed,
	 * which a holder that died before saving its state may leave behind,
	 * is taken as passed: its run is itself.) */
	*run = atomic_load_explicit(&r->sh->prod_urg_run, memory_order_relaxed);
	if (*run > u || u <= r->pos)
		*run = u;
	*urg = u;
	return 1;
}

uint64_t ring_urg_take(struct ring_end *r, uint64_t urg, uint64_t run)
{
	uint64_t p = r->pos;

	/* The reader stands at the older urgent byte, read with MSG_OOB or not:
	 * the newer cursor drops it. */
	if (ring_urg_live(r) && r->urg - 1 == p)
		p++;
	/* At a byte of the run with a newer one after it: each drops in turn. */
	if (p + 1 >= run && p + 1 < urg)
		p = urg - 1;
	r->urg = urg;
	r->urg_read = 0;
	return p - r->pos;
}

/* Walks an iovec array and a ring span together; to_ring 0 copies ring->iov.
 * Unless crc is NULL, what it copies is summed into *crc in the same pass. */
static size_t ring_copy(unsigned char *data, uint64_t size, uint64_t at, const struct iovec *iov,
			int iovcnt, size_t iov_skip, size_t len, int to_ring, uint32_t *crc)
{
	size_t done = 0;

	for (int i = 0; i < iovcnt && done < len; i++) {
		size_t l = iov[i].iov_len;
		unsigned char *b = iov[i].iov_base;

		if (iov_skip >= l) {
			iov_skip -= l;
			continue;
		}
		b += iov_skip;
		l -= iov_skip;
		iov_skip = 0;
		if (l > len - done)
			l = len - done;
		while (l) {
			uint64_t off = at & (size - 1);
			size_t chunk = size - off < l ? (size_t)(size - off) : l;

			if (crc)
				*crc = to_ring ? crc32c_copy(*crc, data + off, b, chunk)
					       : crc32c_copy(*crc, b, data + off, chunk);
			else if (to_ring)
				stream_copy(data + off, b, chunk);
			else
				memcpy(b, data + off, chunk);
			b += chunk;
			l -= chunk;
			at += chunk;
			done += chunk;
		}
	}
	return done;
}

size_t ring_peek_sum(const struct ring_end *r, uint64_t skip, const struct iovec *iov, int iovcnt,
		     size_t iov_skip, size_t len, uint32_t *crc)
{
	return ring_copy(r->data, r->size, r->pos + skip, iov, iovcnt, iov_skip, len, 0, crc);
}

void ring_consume(struct ring_end *r, uint64_t n)
{
	r->pos += n;
	atomic_store_explicit(&r->sh->cons, r->pos, memory_order_release);
}

/* Looked at every RING_REWIND_AT bytes produced, so that streaming, which
 * seldom finds the ring empty, reads the consumer's line no more than that. The
 * gap and len together fit in the ring, as the empty ring had room for len. */
static void rewind_if_empty(struct ring_end *r, size_t len)
{
	uint64_t off = r->pos & (r->size - 1), space;

	if (r->pos < r->rewind_at)
		return;
	r->rewind_at = r->pos + RING_REWIND_AT;
	if (off < RING_REWIND_AT || len > off || r->limit != r->size ||
	    ring_space(r, &space) < 0 || space != r->size)
		return;
	atomic_store_explicit(&r->sh->prod_skip, r->pos, memory_order_relaxed);
	r->pos = ring_round_up(r->pos, r->size);
	r->peer = r->pos;
	r->rewind_at = r->pos + RING_REWIND_AT;
}

/* The last cursor and its run are read back from our own line: whoever
 * scribbled on them changes only which urgent bytes the consumer drops. The run
 * goes first: a consumer that sees the new cursor sees its run. */
void ring_mark_urgent(struct ring_end *r)
{
	uint64_t last = atomic_load_explicit(&r->sh->prod_urg, memory_order_relaxed);
	uint64_t run = atomic_load_explicit(&r->sh->prod_urg_run, memory_order_relaxed);

	atomic_store_explicit(&r->sh->prod_urg_run,
			      last + 1 == r->pos && run && run <= last ? run : r->pos,
			      memory_order_relaxed);
	atomic_store_explicit(&r->sh->prod_urg, r->pos, memory_order_relaxed);
}

void ring_write_sum(struct ring_end *r, const struct iovec *iov, int iovcnt, size_t iov_skip,
		    size_t len, uint32_t *crc)
{
	rewind_if_empty(r, len);
	ring_copy(r->data, r->size, r->pos, iov, iovcnt, iov_skip, len, 1, crc);
	r->pos += len;
}

void ring_arm(_Atomic uint32_t *wait)
{
	uint32_t g = atomic_load_explicit(wait, memory_order_relaxed);

	atomic_store_explicit(wait, (g | 1u) + 2u, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
}

void ring_disarm(_Atomic uint32_t *wait)
{
	uint32_t g = atomic_load_explicit(wait, memory_order_relaxed);

	if (g & 1u)
		atomic_store_explicit(wait, g + 1u, memory_order_relaxed);
}

int ring_should_ring(_Atomic uint32_t *peer_wait, uint32_t *last_rung)
{
	atomic_thread_fence(memory_order_seq_cst);
	uint32_t g = atomic_load_explicit(peer_wait, memory_order_relaxed);

	if (!(g & 1u) || g == *last_rung)
		return 0;
	*last_rung = g;
	return 1;
}
