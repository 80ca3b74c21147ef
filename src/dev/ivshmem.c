/* The ivshmem device: one region of memory shared by the kernels attached to an
 * ivshmem device (virtual machines, and host processes mapping its file), and
 * nothing else shared between them (region.h). Arenas come from the region's
 * heap, control channels are rings in it, the registry of listeners is a table
 * in it; a peer's rings are queued on the channel and relayed to doorbells of
 * ours, and our sleeps wake by themselves to look (poller.c); a peer's death is
 * its lease running out (slots.h).
 *
 * The binding proof is the 4-tuple the client publishes in its segment: every
 * kernel attached to the region can read and write all of it, so nothing proves
 * more than that within this trust domain, and a proposal binds a connection no
 * more weakly than the region binds its peers. */
#include "ivs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../core/lgr.h"
#include "../core/segment.h"
#include "../core/sys.h"
#include "dev.h"
#include "heap.h"

/* An arena holds a few connections' segments: few allocations, and the server
 * finds an arena among few. No more than a sixteenth of a small region. */
#define ARENA_BYTES (4u << 20)

static int iv_arena_create(struct arena *a, uint64_t size)
{
	uint64_t heap = 0, off = 0;

	pthread_mutex_lock(&ivs.lock);
	if (ivs_ready() == 0 && ivs_self()) {
		heap = ivs.r.h.heap_granules * REGION_PAGE;
		if (size < ARENA_BYTES && ARENA_BYTES <= heap / 16)
			size = ARENA_BYTES;
		size = (size + REGION_PAGE - 1) & ~(uint64_t)(REGION_PAGE - 1);
		off = heap_alloc(&ivs.r, ivs.key, size, &ivs.heap_hint);
	}
	pthread_mutex_unlock(&ivs.lock);
	if (!off)
		return -ENOMEM;
	a->fd = -1;
	a->size = size;
	a->id = (uint32_t)(off / REGION_PAGE);
	a->base = region_at(&ivs.r, off);
	return 0;
}

/* The slot that owns the memory of channel c's link group: its client. */
static uint64_t client_of(const struct ivs_chan *c)
{
	return c->server ? c->peer : c->self;
}

/* An arena a proposal names lies in the heap and belongs to the proposer. */
static int iv_arena_map(struct arena *a)
{
	uint64_t off = (uint64_t)a->id * REGION_PAGE;
	int e = -EINVAL;

	pthread_mutex_lock(&ivs.lock);
	struct ivs_chan *c = ivs_chan_get(a->ctl);
	if (ivs.attached && c && heap_owned(&ivs.r, client_of(c), off, a->size)) {
		a->base = region_at(&ivs.r, off);
		e = 0;
	}
	pthread_mutex_unlock(&ivs.lock);
	return e;
}

/* An arena handed over (exec, a descriptor passed on): the first thing of the
 * region this program may see. */
static int iv_arena_ident(struct arena *a)
{
	pthread_mutex_lock(&ivs.lock);
	int e = ivs_ready();
	pthread_mutex_unlock(&ivs.lock);
	a->ident[0] = ivs.r.h.format_id;
	a->ident[1] = a->id;
	return e;
}

/* Ours to free, once the server cannot write there any more; never while a
 * connection of it is held by another process too (the slot's reclaim then
 * frees it). */
static void iv_arena_release(struct arena *a)
{
	if (!a->mine)
		return;
	pthread_mutex_lock(&ivs.lock);
	struct ivs_chan *c = ivs_chan_get(a->ctl);
	if (c && !c->shared && ivs.attached)
		ivs_chan_defer(c, (uint64_t)a->id * REGION_PAGE, a->size);
	pthread_mutex_unlock(&ivs.lock);
}

/* An eventfd of our own: the peer never holds it, we write it for it. */
static int iv_doorbell_create(int fds[2])
{
	fds[0] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	fds[1] = -1;
	return fds[0] < 0 ? -errno : 0;
}

static void iv_doorbell_ring(const struct seg_loc *loc, int fd)
{
	struct ivs_chan *c = ivs_chan_get(loc->arena->ctl);

	(void)fd;
	/* Its rings may be broken, not its memory: the queue is a fixed array. */
	if (c && !c->freed &&
	    chan_bell_push(c->end.m, c->server ? CHAN_DOWN : CHAN_UP, ivs_seg_page(loc)))
		ivs_doorbell_ring(c->peer);
	poller_busy();
}

static void iv_doorbell_clear(int fd)
{
	uint64_t n;

	if (real.read(fd, &n, sizeof(n)) < 0) {
		/* empty already */
	}
}

static void iv_seg_shared(const struct seg_loc *loc)
{
	pthread_mutex_lock(&ivs.lock);
	struct ivs_chan *c = ivs_chan_get(loc->arena->ctl);
	if (c)
		c->shared = 1;
	pthread_mutex_unlock(&ivs.lock);
}

static int iv_ctl_connect(const char *path)
{
	char *end;
	uint64_t key = strtoull(path, &end, 16);
	int h = -ECONNREFUSED;

	if (*end)
		return -EINVAL;
	pthread_mutex_lock(&ivs.lock);
	if (ivs_ready() == 0)
		h = ivs_chan_open(key);
	pthread_mutex_unlock(&ivs.lock);
	/* From now on our sleeps look at the region too. */
	if (h >= 0)
		poller_fd();
	return h;
}

static ssize_t iv_ctl_send(int ctl, const void *msg, size_t len, const int *fds, int nfds)
{
	struct ivs_chan *c = ivs_chan_get(ctl);
	int e;

	(void)fds;
	if (!c || nfds)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	e = c->dead ? -EPIPE : chan_send(&c->end, c->server ? CHAN_DOWN : CHAN_UP, msg, len);
	pthread_mutex_unlock(&c->lock);
	if (e == -EPROTO) {
		c->dead = 1;
		e = -EPIPE;
	}
	if (!e)
		ivs_doorbell_ring(c->peer);
	poller_busy();
	return e < 0 ? e : (ssize_t)len;
}

static ssize_t iv_ctl_recv(int ctl, void *msg, size_t len, int *fds, int *nfds)
{
	struct ivs_chan *c = ivs_chan_get(ctl);
	ssize_t n;

	(void)fds;
	*nfds = 0;
	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	n = c->dead ? 0 : chan_recv(&c->end, c->server ? CHAN_UP : CHAN_DOWN, msg, len);
	pthread_mutex_unlock(&c->lock);
	/* A ring its producer broke breaks the channel: it hung up. */
	if (n == -EPROTO) {
		c->dead = 1;
		return 0;
	}
	poller_busy();
	if (n != -EAGAIN)
		return n;
	pthread_mutex_lock(&ivs.lock);
	int hung = ivs_chan_hung_up(c);
	pthread_mutex_unlock(&ivs.lock);
	return hung ? 0 : -EAGAIN;
}

static int iv_ctl_hangs_up(int ctl, int ms)
{
	struct ivs_chan *c = ivs_chan_get(ctl);

	for (;; ms--) {
		pthread_mutex_lock(&ivs.lock);
		int hung = !c || ivs_chan_hung_up(c);
		pthread_mutex_unlock(&ivs.lock);
		if (hung || ms <= 0)
			return hung;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
}

static int iv_ctl_pollfd(int ctl)
{
	(void)ctl;
	return -1;
}

/* The process at the other end, when it runs in our kernel's pid namespace; its
 * user is not known. */
static int iv_ctl_peer_cred(int ctl, struct ucred *cr)
{
	struct ivs_chan *c = ivs_chan_get(ctl);
	pid_t pid = 0;

	pthread_mutex_lock(&ivs.lock);
	if (c && ivs.attached && slot_key_valid(&ivs.r, c->peer)) {
		struct region_slot *s = slot_at(&ivs.r, slot_of_key(c->peer));
		if (!memcmp(s->boot_id, ivs.me.boot_id, sizeof(s->boot_id)) && s->pidns == ivs.me.pidns)
			pid = atomic_load(&chan_at(&ivs.r, c->idx)->pid[c->server ? 0 : 1]);
	}
	pthread_mutex_unlock(&ivs.lock);
	*cr = (struct ucred){.pid = pid, .uid = (uid_t)-1, .gid = (gid_t)-1};
	return pid > 0 ? 0 : -1;
}

static void iv_ctl_close(int ctl)
{
	pthread_mutex_lock(&ivs.lock);
	struct ivs_chan *c = ivs_chan_get(ctl);
	if (c)
		ivs_chan_close(c);
	pthread_mutex_unlock(&ivs.lock);
}

static void iv_ctl_export(int ctl, uint64_t link[2])
{
	struct ivs_chan *c = ivs_chan_get(ctl);

	link[0] = c ? (uint64_t)c->idx | (uint64_t)c->server << 32 : UINT64_MAX;
	link[1] = c ? c->word : 0;
}

static int iv_ctl_adopt(const uint64_t link[2])
{
	int h = -1;

	if (!link || link[0] >> 33)
		return -1;
	pthread_mutex_lock(&ivs.lock);
	if (ivs_ready() == 0)
		h = ivs_chan_adopt((uint32_t)link[0], link[1], (int)(link[0] >> 32));
	pthread_mutex_unlock(&ivs.lock);
	if (h >= 0)
		poller_fd();
	return h;
}

/* Our endpoint is our slot: a process's forked children hold it too. */
static int iv_srv_open(struct dev_srv *ds)
{
	uint64_t key = 0;

	pthread_mutex_lock(&ivs.lock);
	if (ivs_ready() == 0)
		key = ivs_self();
	pthread_mutex_unlock(&ivs.lock);
	if (!key)
		return -1;
	snprintf(ds->name, sizeof(ds->name), "%" PRIx64, key);
	ds->lfd = 0;
	poller_fd();
	return 0;
}

static void iv_srv_close(struct dev_srv *ds)
{
	ds->lfd = -1;
	ds->name[0] = 0;
}

static int iv_srv_accept(struct dev_srv *ds)
{
	(void)ds;
	pthread_mutex_lock(&ivs.lock);
	int h = ivs.attached ? ivs_chan_take() : -1;
	pthread_mutex_unlock(&ivs.lock);
	return h;
}

static int iv_srv_watch(struct dev_srv *ds, int ctl, void *tag)
{
	struct ivs_chan *c = ivs_chan_get(ctl);

	(void)ds;
	if (!c)
		return -1;
	pthread_mutex_lock(&ivs.lock);
	c->tag = tag;
	c->watched = 1;
	pthread_mutex_unlock(&ivs.lock);
	return 0;
}

static void iv_srv_unwatch(struct dev_srv *ds, int ctl)
{
	struct ivs_chan *c = ivs_chan_get(ctl);

	(void)ds;
	pthread_mutex_lock(&ivs.lock);
	if (c)
		c->watched = 0;
	pthread_mutex_unlock(&ivs.lock);
}

/* New channels at our endpoint, and every channel we serve with a message or
 * a hang-up: a few loads per link group. */
static int iv_srv_events(struct dev_srv *ds, void **tags, int max)
{
	int n = 0, count = ivs_chan_count();

	(void)ds;
	pthread_mutex_lock(&ivs.lock);
	if (ivs.attached && ivs.key &&
	    (ivs.scanning || atomic_load_explicit(&slot_at(&ivs.r, slot_of_key(ivs.key))->chan_seq,
						  memory_order_acquire) != ivs.endpoint_seq))
		tags[n++] = NULL;
	for (int h = 0; h < count && n < max; h++) {
		struct ivs_chan *c = ivs_chan_get(h);
		if (c && c->watched && c->server && !c->closed &&
		    (chan_pending(&c->end, CHAN_UP) || ivs_chan_hung_up(c)))
			tags[n++] = c->tag;
	}
	pthread_mutex_unlock(&ivs.lock);
	return n;
}

static void iv_srv_atfork_child(struct dev_srv *ds)
{
	/* The endpoint is the slot the child holds too; its channels are
	 * forgotten with the device's (iv_atfork_child). */
	(void)ds;
}

static int iv_bind_names(const int *fds, const struct seg_hdr *h, struct addr *local,
			 struct addr *peer)
{
	(void)fds;
	return seg_bind_get(h, SEG_BIND_SRC, local) < 0 || seg_bind_get(h, SEG_BIND_DST, peer) < 0
		       ? -1
		       : 0;
}

static void iv_bind_publish(struct seg_hdr *h, int tcpfd, const struct sockaddr *dst)
{
	struct addr a;

	if (tcpfd < 0) {
		addr_from_sockaddr(&a, dst);
		addr_reached(&a);
		seg_bind_put(h, SEG_BIND_DST, &a);
	} else if (addr_sock_names(tcpfd, &a, NULL) == 0) {
		seg_bind_put(h, SEG_BIND_SRC, &a);
	}
}



static void iv_atfork_child(void)
{
	pthread_mutex_init(&ivs.lock, NULL);
	ivs.me.pid = getpid();
	/* The child holds what the parent held: its pid keeps the slot alive. */
	if (ivs.key)
		slot_add_pid(&ivs.r, ivs.key, ivs.me.pid);
	ivs_chan_atfork_child();
	ivs_bells_atfork_child();
	ivs_doorbell_atfork_child();
	poller_atfork_child();
}

const struct dev_ops dev_ivshmem = {
	.name = "ivshmem",
	.kind = DEV_IVSHMEM,
	.flags = DEV_F_BIND_LATE,
	/* A peer on our kernel is seen to exit at once; one on another kernel
	 * only when its lease runs out, far longer than a read may wait. */
	.death_wait_ms = 20,
	.arena_create = iv_arena_create,
	.arena_map = iv_arena_map,
	.arena_ident = iv_arena_ident,
	.arena_release = iv_arena_release,
	.doorbell_create = iv_doorbell_create,
	.doorbell_ring = iv_doorbell_ring,
	.doorbell_clear = iv_doorbell_clear,
	.bell_route = ivs_bells_route,
	.bell_unroute = ivs_bells_unroute,
	.seg_shared = iv_seg_shared,
	.ctl_connect = iv_ctl_connect,
	.ctl_send = iv_ctl_send,
	.ctl_recv = iv_ctl_recv,
	.ctl_hangs_up = iv_ctl_hangs_up,
	.ctl_pollfd = iv_ctl_pollfd,
	.ctl_export = iv_ctl_export,
	.ctl_adopt = iv_ctl_adopt,
	.ctl_peer_cred = iv_ctl_peer_cred,
	.ctl_close = iv_ctl_close,
	.srv_open = iv_srv_open,
	.srv_close = iv_srv_close,
	.srv_accept = iv_srv_accept,
	.srv_watch = iv_srv_watch,
	.srv_unwatch = iv_srv_unwatch,
	.srv_events = iv_srv_events,
	.srv_atfork_child = iv_srv_atfork_child,
	.bind_names = iv_bind_names,
	.bind_publish = iv_bind_publish,
	.reg_add = ivs_reg_add,
	.reg_remove = ivs_reg_remove,
	.reg_lookup = ivs_reg_lookup,
	.reg_still = ivs_reg_still,
	.reg_forget = ivs_reg_forget,
	.wake_fd = poller_fd_if_used,
	.wake_tick = poller_tick,
	.wake_soon = poller_soon,
	.wake_polls = poller_polls,
	.atfork_child = iv_atfork_child,
};
