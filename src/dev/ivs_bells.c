/* Doorbells across kernels. A peer cannot write our descriptors: it queues the
 * page of the connection's segment on the channel (chan.h), and whoever of our
 * threads looks next (poller.c) rings the connection's doorbell, an eventfd of
 * this process's, which poll and epoll watch as they watch the local device's
 * socket pairs. A connection whose channel another process drains (a forked
 * child's share of its parent's, one adopted after exec) is looked at instead:
 * its doorbell is rung when its stamp (the peer's cursors and flags) moved. */
#include "ivs.h"

#include <stdlib.h>

#include "../core/lgr.h"
#include "../core/segment.h"
#include "../core/sys.h"

struct route {
	int h;                      /* the channel handle */
	uint32_t page;
	int fd;
	_Atomic int *lost;
	const struct seg_hdr *hdr;
	int server;                 /* our side of the connection */
	uint64_t stamp;             /* what the peer had done, when looked at */
	int stamped;                /* its channel is not ours to drain: looked at by stamp */
	struct route *next;
};

#define BUCKETS 1024
static struct route *routes[BUCKETS];
/* Routes looked at by their stamps at every look: none, unless a forked child
 * or a program after exec holds connections of another's channels. Without
 * any, a look costs nothing per connection, which idle ones must not. */
static int nstamped;

static struct route **bucket(int h, uint32_t page)
{
	return &routes[((uint32_t)h * 0x9e3779b1u ^ page) % BUCKETS];
}

uint32_t ivs_seg_page(const struct seg_loc *loc)
{
	return (uint32_t)(((unsigned char *)loc->hdr - ivs.r.base) / REGION_PAGE);
}

/* What the peer did so far: its cursor in the ring we read, in the ring we
 * write, and its flags. */
static uint64_t stamp_of(const struct route *r)
{
	const struct ring_shared *rx = &r->hdr->ring[r->server ? 0 : 1];
	const struct ring_shared *tx = &r->hdr->ring[r->server ? 1 : 0];

	return atomic_load_explicit(&((struct ring_shared *)rx)->prod, memory_order_acquire) ^
	       atomic_load_explicit(&((struct ring_shared *)tx)->cons, memory_order_acquire) << 1 ^
	       (uint64_t)atomic_load_explicit(&((struct ring_shared *)rx)->prod_flags,
					      memory_order_acquire)
		       << 48;
}

void ivs_bells_route(const struct seg_loc *loc, int fd, _Atomic int *lost)
{
	struct ivs_chan *c = ivs_chan_get(loc->arena->ctl);
	struct route *r = c ? malloc(sizeof(*r)) : NULL;

	if (!r)
		return;
	pthread_mutex_lock(&ivs.lock);
	*r = (struct route){loc->arena->ctl, ivs_seg_page(loc), fd, lost, loc->hdr, c->server, 0,
			    !c->drained, NULL};
	nstamped += r->stamped;
	r->stamp = stamp_of(r);
	struct route **b = bucket(r->h, r->page);
	r->next = *b;
	*b = r;
	/* One connection end more of ours, for usmc region status. */
	if (slot_key_valid(&ivs.r, c->self))
		atomic_fetch_add(&slot_at(&ivs.r, slot_of_key(c->self))->conns, 1);
	pthread_mutex_unlock(&ivs.lock);
}

void ivs_bells_unroute(const struct seg_loc *loc, int fd)
{
	int h = loc->arena->ctl;
	uint32_t page = ivs_seg_page(loc);

	pthread_mutex_lock(&ivs.lock);
	for (struct route **pp = bucket(h, page); *pp; pp = &(*pp)->next) {
		struct route *r = *pp;
		if (r->h == h && r->page == page && r->fd == fd) {
			struct ivs_chan *c = ivs_chan_get(h);
			if (slot_key_valid(&ivs.r, c->self))
				atomic_fetch_sub(&slot_at(&ivs.r, slot_of_key(c->self))->conns, 1);
			*pp = r->next;
			nstamped -= r->stamped;
			free(r);
			break;
		}
	}
	pthread_mutex_unlock(&ivs.lock);
}

static void ring(const struct route *r)
{
	uint64_t one = 1;

	if (real.write(r->fd, &one, sizeof(one)) < 0) {
		/* saturated: it rings already */
	}
}

struct relay {
	int h;
	int rung;
};

/* A ring the peer queued for page of channel h (0: any of them). */
static void relay_one(void *arg, uint32_t page)
{
	struct relay *x = arg;

	for (int i = 0; i < BUCKETS && !page; i++)
		for (struct route *r = routes[i]; r; r = r->next)
			if (r->h == x->h) {
				ring(r);
				x->rung++;
			}
	for (struct route *r = page ? *bucket(x->h, page) : NULL; r; r = r->next)
		if (r->h == x->h && r->page == page) {
			ring(r);
			x->rung++;
		}
}

void ivs_bells_lose(int h)
{
	for (int i = 0; i < BUCKETS; i++)
		for (struct route *r = routes[i]; r; r = r->next)
			if (r->h == h) {
				atomic_store(r->lost, 1);
				ring(r);
			}
}

int ivs_bells_relay(int *polled)
{
	int n = ivs_chan_count(), rung = 0;

	*polled = nstamped > 0;
	for (int h = 0; h < n; h++) {
		struct ivs_chan *c = ivs_chan_get(h);
		if (!c || !c->drained || c->closed || c->lost)
			continue;
		if (ivs_chan_hung_up(c) && (c->freed || !ivs_alive(c->peer))) {
			c->lost = 1;
			ivs_bells_lose(h);
			continue;
		}
		struct relay x = {h, 0};
		chan_bell_pop(&c->end, c->server ? CHAN_UP : CHAN_DOWN, relay_one, &x);
		*polled |= chan_bell_pending(&c->end, c->server ? CHAN_UP : CHAN_DOWN);
		rung += x.rung;
	}
	/* The connections whose channel we do not drain: by their stamps. */
	for (int i = 0; i < BUCKETS && nstamped; i++)
		for (struct route *r = routes[i]; r; r = r->next) {
			struct ivs_chan *c = ivs_chan_get(r->h);
			if (!r->stamped || c->lost)
				continue;
			if (ivs_chan_hung_up(c) && (c->freed || !ivs_alive(c->peer))) {
				c->lost = 1;
				ivs_bells_lose(r->h);
				continue;
			}
			uint64_t st = stamp_of(r);
			if (st != r->stamp) {
				r->stamp = st;
				ring(r);
				rung++;
			}
		}
	return rung;
}

void ivs_bells_atfork_child(void)
{
	/* The parent's channels are the parent's to drain (ivs_chan_atfork_child). */
	nstamped = 0;
	for (int i = 0; i < BUCKETS; i++)
		for (struct route *r = routes[i]; r; r = r->next)
			nstamped += r->stamped = 1;
}
