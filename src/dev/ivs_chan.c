/* Channel handles of the ivshmem device: a client opens a channel to an
 * endpoint, a server takes the channels opened to its endpoint, each end sends
 * on its direction and receives on the other, and a channel hangs up when its
 * other end let go of it or its peer died.
 *
 * The rings are the client's memory, and so are its arenas: the server writes
 * into both until it lets go. So the client frees them only once the server let
 * go of the channel or died, and neither frees anything of a channel whose
 * connections another process holds too (fork, exec, a descriptor passed on):
 * that memory returns when the slot they all hold is reclaimed. */
#include "ivs.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../core/lgr.h"
#include "../core/sys.h"
#include "heap.h"

/* Handles: 256 chunks of 256, never reused, read without a lock. */
#define CHUNK 256
static struct ivs_chan **_Atomic chunks[CHUNK];
static _Atomic int next_handle;

int ivs_chan_count(void)
{
	return atomic_load_explicit(&next_handle, memory_order_acquire);
}

struct ivs_chan *ivs_chan_get(int h)
{
	if (h < 0 || h >= atomic_load_explicit(&next_handle, memory_order_acquire))
		return NULL;
	struct ivs_chan **c = atomic_load_explicit(&chunks[h / CHUNK], memory_order_acquire);
	return c ? c[h % CHUNK] : NULL;
}

/* A handle for c. Under ivs.lock. */
static int handle_new(struct ivs_chan *c)
{
	int h = atomic_load(&next_handle);

	if (h >= CHUNK * CHUNK)
		return -EMFILE;
	if (!chunks[h / CHUNK]) {
		struct ivs_chan **n = calloc(CHUNK, sizeof(*n));
		if (!n)
			return -ENOMEM;
		atomic_store_explicit(&chunks[h / CHUNK], n, memory_order_release);
	}
	chunks[h / CHUNK][h % CHUNK] = c;
	atomic_store_explicit(&next_handle, h + 1, memory_order_release);
	return h;
}

static struct ivs_chan *chan_new(uint32_t idx, uint64_t word, int server)
{
	struct ivs_chan *c = calloc(1, sizeof(*c));
	struct chan_entry *e = chan_at(&ivs.r, idx);

	if (!c)
		return NULL;
	c->idx = idx;
	c->word = word;
	c->server = server;
	c->end.m = region_at(&ivs.r, e->mem_off);
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

/* The entry still holds the channel we have (a freed and retaken one does not). */
static int same(const struct ivs_chan *c)
{
	return atomic_load_explicit(&chan_at(&ivs.r, c->idx)->word, memory_order_acquire) == c->word;
}

int ivs_chan_open(uint64_t endpoint)
{
	uint64_t self = ivs_self(), word, off;
	int idx, h;

	if (!self)
		return -ENOSPC;
	if (!slot_key_valid(&ivs.r, endpoint) || !ivs_alive(endpoint))
		return -ECONNREFUSED;
	if (!(off = heap_alloc(&ivs.r, self, CHAN_MEM_SIZE, &ivs.heap_hint)))
		return -ENOMEM;
	memset(region_at(&ivs.r, off), 0, CHAN_MEM_SIZE);
	if ((idx = chan_open(&ivs.r, self, endpoint, off, &word)) < 0) {
		heap_free(&ivs.r, self, off, CHAN_MEM_SIZE);
		return -ENFILE;
	}
	struct ivs_chan *c = chan_new((uint32_t)idx, word, 0);
	if (!c || (h = handle_new(c)) < 0) {
		atomic_store(&chan_at(&ivs.r, (uint32_t)idx)->word, (word & ~0xffull) | CHAN_FREE);
		heap_free(&ivs.r, self, off, CHAN_MEM_SIZE);
		free(c);
		return -ENOMEM;
	}
	c->self = self;
	c->peer = endpoint;
	c->drained = 1;
	atomic_store(&chan_at(&ivs.r, (uint32_t)idx)->pid[0], ivs.me.pid);
	/* The endpoint looks through the table once its count moved. */
	atomic_fetch_add_explicit(&slot_at(&ivs.r, slot_of_key(endpoint))->chan_seq, 1,
				  memory_order_release);
	ivs_doorbell_ring(endpoint);
	return h;
}

int ivs_chan_take(void)
{
	uint64_t self = ivs_self();
	struct slot_self *me = &ivs.me;

	if (!self)
		return -1;
	if (!ivs.scanning) {
		uint32_t seq = atomic_load_explicit(&slot_at(&ivs.r, slot_of_key(self))->chan_seq,
						    memory_order_acquire);
		if (seq == ivs.endpoint_seq)
			return -1;
		/* Noted before the scan: a channel opened during it moves it again. */
		ivs.endpoint_seq = seq;
		ivs.scanning = 1;
		ivs.scan_from = 0;
	}
	for (uint32_t i = ivs.scan_from; i < ivs.r.h.nchans; i++) {
		struct chan_entry *e = chan_at(&ivs.r, i);
		uint64_t w = atomic_load(&e->word), none = 0, client = atomic_load(&e->client);
		if ((w & 0xff) != CHAN_OPEN || e->endpoint != self || atomic_load(&e->server) ||
		    !slot_key_valid(&ivs.r, client) ||
		    !heap_owned(&ivs.r, client, e->mem_off, CHAN_MEM_SIZE) ||
		    !atomic_compare_exchange_strong(&e->server, &none, self))
			continue;
		struct ivs_chan *c = chan_new(i, w, 1);
		int h = c ? handle_new(c) : -1;
		if (h < 0) {
			atomic_store(&e->server, 0);
			free(c);
			continue;
		}
		c->self = self;
		c->peer = client;
		c->drained = 1;
		atomic_store(&e->pid[1], me->pid);
		ivs.scan_from = i + 1;
		return h;
	}
	ivs.scanning = 0;
	return -1;
}

int ivs_chan_adopt(uint32_t idx, uint64_t word, int server)
{
	if (!ivs.attached || idx >= ivs.r.h.nchans)
		return -1;
	struct chan_entry *e = chan_at(&ivs.r, idx);
	uint64_t client = atomic_load(&e->client);
	if (atomic_load(&e->word) != word || !heap_owned(&ivs.r, client, e->mem_off, CHAN_MEM_SIZE))
		return -1;
	struct ivs_chan *c = chan_new(idx, word, server);
	int h = c ? handle_new(c) : -1;
	if (h < 0) {
		free(c);
		return -1;
	}
	c->peer = server ? client : atomic_load(&e->server);
	c->self = server ? atomic_load(&e->server) : client;
	/* We hold its connection: our processes keep its side's slot alive. */
	slot_add_pid(&ivs.r, c->self, ivs.me.pid);
	return h;
}

/* The process at the other end runs on our kernel and has exited: no lease to
 * wait for (a forked child may hold its connections still: they say so in
 * their rings, RING_F_HANDED). Asked as often as slots' processes are
 * (SLOT_EXIT_ASK_NS). */
static int peer_exited(struct ivs_chan *c)
{
	struct chan_entry *e = chan_at(&ivs.r, c->idx);
	int32_t pid = atomic_load(&e->pid[c->server ? 0 : 1]);
	uint64_t now = sys_now_ns();

	if (pid <= 0 || !slot_key_valid(&ivs.r, c->peer) || now - c->exit_asked_ns < SLOT_EXIT_ASK_NS)
		return 0;
	c->exit_asked_ns = now;
	struct region_slot *s = slot_at(&ivs.r, slot_of_key(c->peer));
	return !memcmp(s->boot_id, ivs.me.boot_id, sizeof(s->boot_id)) && s->pidns == ivs.me.pidns &&
	       sys_pid_gone(pid);
}

int ivs_chan_hung_up(struct ivs_chan *c)
{
	if (c->dead)
		return 1;
	struct chan_entry *e = chan_at(&ivs.r, c->idx);
	uint64_t w = atomic_load(&e->word);
	/* Freed under us (its peer's slot was reclaimed), or overwritten. */
	if ((w & ~0xffull) != (c->word & ~0xffull))
		return c->dead = c->freed = 1;
	if (c->server && (w & 0xff) == CHAN_CLIENT_GONE)
		return 1;
	if (!c->server) {
		uint64_t server = atomic_load(&e->server);
		/* Not taken yet: as alive as the endpoint it was opened to. Taken,
		 * then let go: hung up. */
		if (server == CHAN_LET_GO)
			return 1;
		if (server) {
			c->peer = server;
			c->taken = 1;
		} else if (c->taken) {
			return 1;
		}
	}
	if (!ivs_alive(c->peer))
		return c->dead = 1;
	return peer_exited(c);
}

/* Frees client channel c's rings and the arenas it deferred: the server let go
 * of it, or died. Under ivs.lock. */
static int release_client(struct ivs_chan *c)
{
	struct chan_entry *e = chan_at(&ivs.r, c->idx);
	uint64_t server = atomic_load(&e->server), w = c->word;

	if (!same(c) && (atomic_load(&e->word) & ~0xffull) != (w & ~0xffull))
		return 1; /* reclaimed already */
	if (server && server != CHAN_LET_GO && ivs_alive(server))
		return 0;
	for (int i = 0; i < c->ndeferred; i++)
		heap_free(&ivs.r, c->self, c->deferred_off[i], c->deferred_len[i]);
	c->ndeferred = 0;
	uint64_t off = e->mem_off;
	uint64_t gone = (w & ~0xffull) | CHAN_CLIENT_GONE;
	if (atomic_compare_exchange_strong(&e->word, &gone, (w & ~0xffull) | CHAN_FREE) ||
	    atomic_compare_exchange_strong(&e->word, &w, (w & ~0xffull) | CHAN_FREE))
		heap_free(&ivs.r, c->self, off, CHAN_MEM_SIZE);
	return 1;
}

/* Client channels closed, whose memory waits for their server. */
static struct ivs_chan *closing[256];
static int nclosing;

void ivs_chan_close(struct ivs_chan *c)
{
	struct chan_entry *e = chan_at(&ivs.r, c->idx);

	c->closed = 1;
	if (!c->drained || c->shared || !ivs.attached)
		return;
	/* The peer, asleep, sees the hang-up now. */
	if (c->server) {
		uint64_t self = c->self;
		/* Let go: the client frees what we no longer write to, and nobody
		 * takes the channel again (chan.h). */
		if (same(c))
			atomic_compare_exchange_strong(&e->server, &self, CHAN_LET_GO);
		ivs_doorbell_ring(c->peer);
		return;
	}
	uint64_t w = c->word;
	atomic_compare_exchange_strong(&e->word, &w, (w & ~0xffull) | CHAN_CLIENT_GONE);
	ivs_doorbell_ring(c->peer);
	if (!release_client(c) && nclosing < (int)(sizeof(closing) / sizeof(closing[0])))
		closing[nclosing++] = c;
}

void ivs_chan_defer(struct ivs_chan *c, uint64_t off, uint64_t len)
{
	if (c->ndeferred < (int)(sizeof(c->deferred_off) / sizeof(c->deferred_off[0]))) {
		c->deferred_off[c->ndeferred] = off;
		c->deferred_len[c->ndeferred++] = len;
	}
	/* Past that, the memory waits for our slot's reclaim. */
}

void ivs_chan_sweep(void)
{
	for (int i = 0; i < nclosing;)
		if (release_client(closing[i]))
			closing[i] = closing[--nclosing];
		else
			i++;
}

void ivs_chan_lose_all(void)
{
	int n = atomic_load(&next_handle);

	for (int h = 0; h < n; h++) {
		struct ivs_chan *c = ivs_chan_get(h);
		if (c && !c->lost) {
			c->dead = c->lost = 1;
			ivs_bells_lose(h);
		}
	}
	nclosing = 0;
}

void ivs_chan_atfork_child(void)
{
	int n = atomic_load(&next_handle);

	/* The parent's channels stay the parent's: the child may ring through
	 * them for a connection they share, nothing more. */
	for (int h = 0; h < n; h++) {
		struct ivs_chan *c = ivs_chan_get(h);
		if (c) {
			pthread_mutex_init(&c->lock, NULL);
			c->drained = 0;
			c->watched = 0;
		}
	}
	nclosing = 0;
	ivs.scanning = 0;
}
