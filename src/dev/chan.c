#include "chan.h"

#include <errno.h>
#include <string.h>
#include <sys/types.h>

int chan_open(const struct region *r, uint64_t client, uint64_t endpoint, uint64_t mem_off,
	      uint64_t *word)
{
	for (uint32_t i = 0; i < r->h.nchans; i++) {
		struct chan_entry *c = chan_at(r, i);
		uint64_t w = atomic_load(&c->word);
		if ((w & 0xff) != CHAN_FREE)
			continue;
		uint64_t open = ((w >> 8) + 1) << 8 | CHAN_OPEN;
		/* Claimed before it is filled: the server takes it only once the
		 * endpoint's count moved, after this. */
		if (!atomic_compare_exchange_strong(&c->word, &w, open))
			continue;
		atomic_store(&c->server, 0);
		atomic_store(&c->client, client);
		c->endpoint = endpoint;
		c->mem_off = mem_off;
		*word = open;
		return (int)i;
	}
	return -1;
}

static uint32_t slots_of(enum chan_dir d)
{
	return d == CHAN_UP ? CHAN_UP_SLOTS : CHAN_DOWN_SLOTS;
}

static struct chan_msg *slot(struct chan_mem *m, enum chan_dir d, uint64_t pos)
{
	return d == CHAN_UP ? &m->up[pos % CHAN_UP_SLOTS] : &m->down[pos % CHAN_DOWN_SLOTS];
}

int chan_send(struct chan_end *e, enum chan_dir d, const void *msg, size_t len)
{
	uint64_t head = atomic_load_explicit(&e->m->msg_head[d].v, memory_order_acquire);
	uint64_t n = slots_of(d);

	if (len > CHAN_MSG_MAX)
		return -EMSGSIZE;
	if (head > e->tx_pos || e->tx_pos - head > n)
		return -EPROTO;
	if (e->tx_pos - head == n)
		return -EAGAIN;
	struct chan_msg *s = slot(e->m, d, e->tx_pos);
	s->len = (uint32_t)len;
	memcpy(s->msg, msg, len);
	atomic_store_explicit(&e->m->msg_tail[d].v, ++e->tx_pos, memory_order_release);
	return 0;
}

int chan_pending(const struct chan_end *e, enum chan_dir d)
{
	return atomic_load_explicit(&e->m->msg_tail[d].v, memory_order_relaxed) != e->rx_pos;
}

ssize_t chan_recv(struct chan_end *e, enum chan_dir d, void *msg, size_t len)
{
	uint64_t tail = atomic_load_explicit(&e->m->msg_tail[d].v, memory_order_acquire);

	if (tail == e->rx_pos)
		return -EAGAIN;
	if (tail < e->rx_pos || tail - e->rx_pos > slots_of(d))
		return -EPROTO;
	struct chan_msg *s = slot(e->m, d, e->rx_pos);
	/* Read once: the producer may write it again. */
	uint32_t n = *(volatile uint32_t *)&s->len;
	if (n > CHAN_MSG_MAX || n > len)
		return -EPROTO;
	memcpy(msg, s->msg, n);
	atomic_store_explicit(&e->m->msg_head[d].v, ++e->rx_pos, memory_order_release);
	return n;
}

int chan_bell_push(struct chan_mem *m, enum chan_dir d, uint32_t page)
{
	/* Sequentially consistent with the consumer's store of its head and load
	 * of the tail (chan_bell_pending): either we see the queue empty, or it
	 * sees our ring. */
	uint64_t t = atomic_fetch_add(&m->bell_tail[d].v, 1);
	uint64_t h = atomic_load(&m->bell_head[d].v);

	if (t - h >= CHAN_BELLS) {
		atomic_store_explicit(&m->bell_overflow[d].v, 1, memory_order_release);
		return 0;
	}
	atomic_store_explicit(&m->bells[d][t % CHAN_BELLS], page + 1, memory_order_release);
	return t == h;
}

int chan_bell_pop(struct chan_end *e, enum chan_dir d, void (*rang)(void *, uint32_t), void *arg)
{
	struct chan_mem *m = e->m;
	uint64_t t = atomic_load_explicit(&m->bell_tail[d].v, memory_order_acquire);
	int taken = 0;

	if (atomic_load_explicit(&m->bell_overflow[d].v, memory_order_relaxed) ||
	    t < e->bell_pos || t - e->bell_pos > CHAN_BELLS) {
		/* Overflowed, or a cursor a peer broke: everything may have rung.
		 * The queue starts over from where its producers stand. */
		atomic_store(&m->bell_overflow[d].v, 0);
		for (uint32_t i = 0; i < CHAN_BELLS; i++)
			atomic_store_explicit(&m->bells[d][i], 0, memory_order_relaxed);
		e->bell_pos = t;
		atomic_store(&m->bell_head[d].v, t);
		rang(arg, 0);
		return 1;
	}
	while (e->bell_pos != t) {
		uint32_t v = atomic_exchange(&m->bells[d][e->bell_pos % CHAN_BELLS], 0);
		/* Its producer took the place and has not written it yet: the rest
		 * waits for the next look. */
		if (!v)
			break;
		rang(arg, v - 1);
		e->bell_pos++;
		taken++;
	}
	atomic_store(&m->bell_head[d].v, e->bell_pos);
	return taken;
}

int chan_bell_pending(const struct chan_end *e, enum chan_dir d)
{
	return atomic_load(&e->m->bell_tail[d].v) != e->bell_pos;
}
