#include "lgr.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif
#include <unistd.h>

#include "../dev/dev.h"
#include "addr.h"
#include "config.h"
#include "conn.h"
#include "handoff.h"
#include "hooks.h"
#include "stats.h"
#include "sys.h"

/* ---------------------------------------------------------------- common */

static struct lgr *lgr_new(const struct dev_ops *dev, enum lgr_role role, int ctl)
{
	struct lgr *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->dev = dev;
	g->role = role;
	g->ctl = ctl;
	g->refs = 1;
	pthread_mutex_init(&g->lock, NULL);
	return g;
}

static void seg_list_free(struct seg_ref *r)
{
	while (r) {
		struct seg_ref *n = r->next;
		bell_close(&r->bell);
		free(r);
		r = n;
	}
}

/* At most this many memfds wait for their connections per link group: a peer
 * that sends more (for connections that never ask) cannot fill our table of
 * descriptors. */
#define EXT_IN_MAX 1024

static void ext_list_free(struct lgr_ext_fd *x)
{
	while (x) {
		struct lgr_ext_fd *n = x->next;
		real.close(x->fd);
		free(x);
		x = n;
	}
}

/* A memfd the peer sent (the message decoded), kept for its connection.
 * Called with g->lock held. */
static void ext_keep(struct lgr *g, const struct clc_ext_fd *m, int fd)
{
	struct lgr_ext_fd *x = g->n_ext_in < EXT_IN_MAX ? malloc(sizeof(*x)) : NULL;

	if (!x) {
		stat_add(STAT_HANDSHAKE_ERR, 1);
		real.close(fd);
		return;
	}
	*x = (struct lgr_ext_fd){m->conn_id, m->index, sys_fd_high(fd), m->size, g->ext_in};
	g->ext_in = x;
	g->n_ext_in++;
}

/* A new arena of dev's (make: ours, to carve; else as a proposal named it),
 * mapped, for the link group whose channel is ctl. */
static struct arena *arena_new(const struct dev_ops *dev, int ctl, int make, int fd, uint32_t id,
			       uint64_t size)
{
	struct arena *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	*a = (struct arena){.dev = dev, .fd = fd, .id = id, .size = size, .ctl = ctl, .mine = make};
	if ((make ? dev->arena_create(a, size) : dev->arena_map(a)) < 0) {
		free(a);
		return NULL;
	}
	stat_add(STAT_ARENA_MAPS, 1);
	return a;
}

static void arena_free(struct arena *a)
{
	a->dev->arena_release(a);
	free(a);
}

/* Always under the link group's own lock, whatever else is held: connections
 * closing in other threads drop their references under it alone. */
static void lgr_hold(struct lgr *g)
{
	pthread_mutex_lock(&g->lock);
	g->refs++;
	pthread_mutex_unlock(&g->lock);
}

void lgr_put(struct lgr *g)
{
	pthread_mutex_lock(&g->lock);
	int left = --g->refs;
	pthread_mutex_unlock(&g->lock);
	if (left)
		return;
	for (struct arena *a = g->arenas, *n; a; a = n) {
		n = a->next;
		arena_free(a);
	}
	seg_list_free(g->free);
	seg_list_free(g->zombies);
	bellcache_clear(&g->kept);
	ext_list_free(g->ext_in);
	if (g->ctl >= 0)
		g->dev->ctl_close(g->ctl);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

static struct arena *arena_find(struct lgr *g, uint32_t id)
{
	for (struct arena *a = g->arenas; a; a = a->next)
		if (a->id == id)
			return a;
	return NULL;
}

/* ---------------------------------------------------------------- client */

static pthread_mutex_t clients_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lgr *clients;

/* Called with clients_lock held. */
static void client_unlist(struct lgr *g)
{
	for (struct lgr **pp = &clients; *pp; pp = &(*pp)->next)
		if (*pp == g) {
			*pp = g->next;
			lgr_put(g);
			return;
		}
}

struct lgr *lgr_client_get(const struct dev_ops *dev, const char *path)
{
	struct lgr *g;

	pthread_mutex_lock(&clients_lock);
	for (g = clients; g; g = g->next)
		if (g->dev == dev && !strcmp(g->peer, path) && !g->dead)
			break;
	if (!g) {
		int ctl = dev->ctl_connect(path);
		if (ctl >= 0) {
			g = lgr_new(dev, LGR_CLIENT, ctl);
			if (g) {
				snprintf(g->peer, sizeof(g->peer), "%s", path);
				g->next = clients;
				clients = g;
			} else {
				dev->ctl_close(ctl);
			}
		}
	}
	if (g)
		lgr_hold(g);
	pthread_mutex_unlock(&clients_lock);
	return g;
}

static void client_mark_dead(struct lgr *g)
{
	pthread_mutex_lock(&clients_lock);
	if (!g->dead) {
		g->dead = 1;
		client_unlist(g);
	}
	pthread_mutex_unlock(&clients_lock);
}

/* Called with g->lock held. A zombie becomes reusable once the server let go. */
static struct seg_ref *seg_take_free(struct lgr *g, uint64_t size)
{
	for (struct seg_ref **pp = &g->zombies; *pp;) {
		struct seg_ref *r = *pp;
		struct seg_hdr *h = (struct seg_hdr *)(r->arena->base + r->off);
		if ((atomic_load(&h->released) & SEG_REL_BOTH) == SEG_REL_BOTH) {
			*pp = r->next;
			r->next = g->free;
			g->free = r;
		} else {
			pp = &r->next;
		}
	}
	for (struct seg_ref **pp = &g->free; *pp; pp = &(*pp)->next)
		if ((*pp)->size == size) {
			struct seg_ref *r = *pp;
			*pp = r->next;
			return r;
		}
	return NULL;
}

/* Called with g->lock held. bell gets the doorbell end kept with a reused
 * segment, or -1, and unread the rings it may hold. */
static int seg_carve(struct lgr *g, uint64_t size, struct arena **ap, uint64_t *off, int *bell,
		     uint32_t *unread)
{
	struct seg_ref *r = seg_take_free(g, size);
	struct arena *a;

	*bell = -1;
	*unread = 0;
	if (r) {
		struct seg_hdr *h = (struct seg_hdr *)(r->arena->base + r->off);
		*ap = r->arena;
		*off = r->off;
		*bell = r->bell;
		*unread = r->bell_unread;
		if (!(atomic_load(&h->released) & SEG_REL_BELL_KEPT))
			bell_close(bell);
		free(r);
		return 0;
	}
	for (a = g->arenas; a; a = a->next)
		if (a->size - a->bump >= size)
			break;
	if (!a) {
		if (!(a = arena_new(g->dev, g->ctl, 1, -1, 0, size)))
			return -ENOMEM;
		a->unsent = 1;
		/* A device that names its arenas itself has set the id. */
		if (!a->id)
			a->id = ++g->next_arena_id;
		a->next = g->arenas;
		g->arenas = a;
	}
	*ap = a;
	*off = a->bump;
	a->bump += size;
	return 0;
}

/* A new doorbell for a connection: our end, and the one that goes to the server.
 * Returns 0 or -errno. */
static int bell_new(const struct dev_ops *dev, int *ours, int *theirs)
{
	int pair[2];

	if (dev->doorbell_create(pair) < 0)
		return -ENOMEM;
	stat_add(STAT_BELL_PAIRS, 1);
	*ours = sys_fd_high(pair[0]);
	*theirs = pair[1];
	return 0;
}

int lgr_propose(struct lgr *g, struct usock *s, int tcpfd, const struct sockaddr *dst,
		const uint64_t ring_size[2], struct seg_loc *loc, int *bell)
{
	struct clc_proposal p;
	struct arena *a;
	uint64_t off, size = seg_bytes(ring_size);
	int fds[CLC_FD_MAX], nfds = 0, theirs = -1, kept = 0, e;
	int passes = (g->dev->flags & DEV_F_PASSES_FDS) != 0;
	uint32_t unread;

	pthread_mutex_lock(&g->lock);
	if (g->dead) {
		pthread_mutex_unlock(&g->lock);
		return -EPIPE;
	}
	e = seg_carve(g, size, &a, &off, bell, &unread);
	if (!e && *bell < 0) {
		unread = 0;
		e = bell_new(g->dev, bell, &theirs);
	} else if (!e) {
		kept = 1;
	}
	if (e) {
		pthread_mutex_unlock(&g->lock);
		return e;
	}
	struct seg_hdr *h = (struct seg_hdr *)(a->base + off);
	memset(h, 0, sizeof(*h));
	h->magic = SEG_MAGIC;
	atomic_store_explicit(&h->state, SEG_PENDING, memory_order_release);
	if (g->dev->bind_publish)
		g->dev->bind_publish(h, -1, dst);

	clc_proposal_init(&p);
	p.arena_id = a->id;
	p.conn_id = ++g->next_conn_id;
	p.seg_off = off;
	p.seg_size = size;
	p.ring_size[0] = ring_size[0];
	p.ring_size[1] = ring_size[1];
	/* What the device passes along, in CLC_FD_* order; without, the server
	 * makes its own doorbell end and finds the arena by its id. */
	if (passes)
		fds[nfds++] = tcpfd;
	if (kept)
		p.flags |= CLC_F_BELL_KEPT;
	else if (theirs >= 0)
		fds[nfds++] = theirs;
	if (a->unsent) {
		p.flags |= CLC_F_NEW_ARENA;
		p.arena_size = a->size;
		if (passes)
			fds[nfds++] = a->fd;
	}
	ssize_t n = g->dev->ctl_send(g->ctl, &p, sizeof(p), fds, nfds);
	bell_close(&theirs);
	if (n != (ssize_t)sizeof(p)) {
		/* The doorbell goes too: the server may or may not have kept its end. */
		bell_close(bell);
		struct seg_ref *r = malloc(sizeof(*r));
		if (r) {
			*r = (struct seg_ref){a, off, size, -1, 0, g->free};
			g->free = r;
		}
		pthread_mutex_unlock(&g->lock);
		if (n != -EAGAIN)
			client_mark_dead(g);
		return n < 0 ? (int)n : -EPROTO;
	}
	a->unsent = 0;
	*loc = (struct seg_loc){g, a, off, size, {ring_size[0], ring_size[1]}, h, unread, 0};
	s->conn_id = p.conn_id;
	s->pending_next = g->pending;
	s->pending_pprev = &g->pending;
	if (g->pending)
		g->pending->pending_pprev = &s->pending_next;
	g->pending = s;
	g->refs++;
	pthread_mutex_unlock(&g->lock);
	return 0;
}

void lgr_withdraw(struct lgr *g, uint64_t conn_id)
{
	struct clc_withdraw w;

	clc_withdraw_init(&w, conn_id);
	g->dev->ctl_send(g->ctl, &w, sizeof(w), NULL, 0);
}

void lgr_client_poll(struct lgr *g)
{
	union clc_msg m;
	char buf[256];
	int fds[CLC_FD_MAX];

	int broken = 0;

	pthread_mutex_lock(&g->lock);
	for (;;) {
		int nfds = CLC_FD_MAX;
		ssize_t n = g->dev->ctl_recv(g->ctl, buf, sizeof(buf), fds, &nfds);
		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			pthread_mutex_unlock(&g->lock);
			client_mark_dead(g);
			pthread_mutex_lock(&g->lock);
			/* Nobody will attach now: every pending connection falls back. */
			for (struct usock *s = g->pending; s; s = s->pending_next)
				atomic_store(&s->declined, DECL_NO_DEVICE + 1);
			break;
		}
		int e = clc_decode(buf, (size_t)n, g->dev->flags & DEV_F_PASSES_FDS ? nfds : CLC_NFDS_NONE, &m);
		if (!e && m.hdr.type == CLC_EXT_FD) {
			ext_keep(g, &m.ext_fd, fds[0]);
			continue;
		}
		for (int i = 0; i < nfds; i++)
			real.close(fds[i]);
		if (e || m.hdr.type != CLC_DECLINE) {
			stat_add(STAT_HANDSHAKE_ERR, 1);
			continue;
		}
		enum decline why = decline_from_code(m.decline.reason);
		for (struct usock *s = g->pending; s; s = s->pending_next)
			if (s->conn_id == m.decline.conn_id)
				atomic_store(&s->declined, (int)why + 1);
		/* The server could not take an arena we announced, or no longer knows
		 * ours: every later proposal here would be declined the same way. New
		 * connections get a new link group, with arenas announced afresh. */
		broken |= why == DECL_MEMORY || why == DECL_PROTOCOL;
	}
	pthread_mutex_unlock(&g->lock);
	if (broken)
		client_mark_dead(g);
}

void lgr_client_look(struct lgr *g, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&g->looked_ns, memory_order_relaxed);

	if (now - last < LGR_LOOK_NS ||
	    !atomic_compare_exchange_strong_explicit(&g->looked_ns, &last, now, memory_order_relaxed,
						     memory_order_relaxed))
		return;
	lgr_client_poll(g);
}

/* Arenas handed over across exec() or by a sibling: no link group owns them,
 * their connections do. One whose last connection went stays mapped for a
 * while, most recently idle first: a sibling hands over connection after
 * connection from the same client's arena, and mapping it for each (checks,
 * mmap, a descriptor moved, then munmap, and faults on its pages again) cost a
 * prefork server about a tenth of its `Connection: close` rate. An idle arena
 * goes at the first adoption or release after ADOPT_IDLE_NS, or when more than
 * ADOPT_IDLE_MAX are idle; a process that adopts nothing more keeps at most
 * those mapped. */
#define ADOPT_IDLE_MAX 2
#define ADOPT_IDLE_NS 2000000000ull

static pthread_mutex_t adopted_lock = PTHREAD_MUTEX_INITIALIZER;
static struct arena *adopted;

/* Called with adopted_lock held. */
static void adopted_trim(uint64_t now)
{
	int idle = 0;

	for (struct arena **pp = &adopted, *a; (a = *pp);) {
		if (!a->refs && (now - a->idle_since > ADOPT_IDLE_NS || ++idle > ADOPT_IDLE_MAX)) {
			*pp = a->next;
			arena_free(a);
		} else {
			pp = &a->next;
		}
	}
}

struct arena *lgr_arena_adopt(const struct dev_ops *dev, int fd, uint32_t id, uint64_t size,
			      const uint64_t link[2])
{
	struct arena want = {.dev = dev, .fd = fd, .id = id, .size = size}, *a;

	if (dev->arena_ident(&want) < 0) {
		if (fd >= 0)
			real.close(fd);
		return NULL;
	}
	pthread_mutex_lock(&adopted_lock);
	for (a = adopted; a; a = a->next)
		if (a->dev == dev && a->ident[0] == want.ident[0] && a->ident[1] == want.ident[1])
			break;
	if (a) {
		if (fd >= 0)
			real.close(fd);
	} else if ((a = arena_new(dev, dev->ctl_adopt ? dev->ctl_adopt(link) : -1, 0, fd, id,
				  size))) {
		if (a->fd >= 0)
			a->fd = sys_fd_high(a->fd);
		a->ident[0] = want.ident[0];
		a->ident[1] = want.ident[1];
		a->next = adopted;
		adopted = a;
	} else if (fd >= 0) {
		real.close(fd);
	}
	if (a)
		a->refs++;
	adopted_trim(sys_now_ns());
	pthread_mutex_unlock(&adopted_lock);
	return a;
}

static void arena_unadopt(struct arena *a);

/* Called with the link group's lock held. */
static void unpend(struct usock *s)
{
	if (!s->pending_pprev)
		return;
	*s->pending_pprev = s->pending_next;
	if (s->pending_next)
		s->pending_next->pending_pprev = s->pending_pprev;
	s->pending_pprev = NULL;
}

void lgr_unpend(struct usock *s)
{
	struct lgr *g = s->seg.lgr;

	/* The link is read under the lock too: a connection proposed after ours
	 * rewrites it. */
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	unpend(s);
	pthread_mutex_unlock(&g->lock);
}

void lgr_seg_forget(struct seg_loc *loc)
{
	if (loc->lgr)
		lgr_put(loc->lgr);
	else
		arena_unadopt(loc->arena);
	memset(loc, 0, sizeof(*loc));
}

static void arena_unadopt(struct arena *a)
{
	uint64_t now = sys_now_ns();

	pthread_mutex_lock(&adopted_lock);
	if (--a->refs == 0) {
		for (struct arena **pp = &adopted; *pp; pp = &(*pp)->next)
			if (*pp == a) {
				*pp = a->next;
				break;
			}
		a->idle_since = now;
		a->next = adopted;
		adopted = a;
	}
	adopted_trim(now);
	pthread_mutex_unlock(&adopted_lock);
}

void lgr_seg_release(struct usock *s, enum lgr_role role, int bell)
{
	struct seg_loc *loc = &s->seg;
	struct lgr *g = loc->lgr;
	uint32_t bit = role == LGR_CLIENT ? SEG_REL_CLIENT : SEG_REL_SERVER;

	if (!g) {
		/* Adopted after exec() or from a sibling: the segment goes back to a
		 * link group of the process before, the sibling or the peer, which
		 * find it released. A sibling holding the doorbell end too has kept
		 * it: closing our descriptor leaves the socket open. */
		if (bell >= 0 && loc->bell_held)
			bit |= SEG_REL_BELL_KEPT;
		bell_close(&bell);
		atomic_fetch_or(&loc->hdr->released, bit);
		arena_unadopt(loc->arena);
		return;
	}
	if (role == LGR_SERVER) {
		/* Kept before the release is seen: the client may propose the
		 * segment again the moment it is. */
		pthread_mutex_lock(&g->lock);
		if (bell >= 0 && !g->dead &&
		    bellcache_put(&g->kept, bellcache_key(loc->arena->id, loc->off), bell,
				  loc->bell_unread) == 0) {
			bell = -1;
			bit |= SEG_REL_BELL_KEPT;
		}
		pthread_mutex_unlock(&g->lock);
		bell_close(&bell);
	}
	uint32_t old = atomic_fetch_or(&loc->hdr->released, bit);

	if (role == LGR_CLIENT) {
		struct seg_ref *r = malloc(sizeof(*r));
		pthread_mutex_lock(&g->lock);
		unpend(s);
		if (!r || g->dead)
			bell_close(&bell);
		if (r) {
			*r = (struct seg_ref){loc->arena, loc->off, loc->size, bell, loc->bell_unread,
					      NULL};
			if (((old | bit) & SEG_REL_BOTH) == SEG_REL_BOTH) {
				r->next = g->free;
				g->free = r;
			} else {
				r->next = g->zombies;
				g->zombies = r;
			}
		}
		pthread_mutex_unlock(&g->lock);
	}
	lgr_put(g);
}

/* ---------------------------------------------------------------- server */

struct prop {
	struct lgr *lgr;
	struct clc_proposal p;
	int fds[CLC_FD_ARENA];
	uint32_t bell_unread;   /* of a kept doorbell end */
	struct addr cl_local, cl_peer;
	uint64_t born_ns;
	struct prop *next;
};

#define NBUCKETS 1024

static struct {
	pthread_mutex_t lock;
	struct dev_srv ds[DEV_KINDS]; /* our endpoint on each device */
	int open;               /* endpoints open */
	struct prop *unresolved;
	struct prop *bucket[NBUCKETS];
	int nlisteners;
	struct lgr *lgrs;       /* link groups whose channels the endpoints watch */
	struct lgr *last;       /* where the last matched proposal came from (a reference) */
	/* Connections accepted as plain while a late binding was awaited
	 * (take_proposal): a proposal that binds to one of them afterwards is
	 * declined at once, so that its client falls back without waiting. */
	struct gave_up {
		struct addr local, peer;
	} gave_up[16];
	unsigned ngave_up;
} srv = {.lock = PTHREAD_MUTEX_INITIALIZER,
	 .ds = {[0 ... DEV_KINDS - 1] = {.lfd = -1, .ep = -1}}};

int lgr_server_listening(void)
{
	return srv.nlisteners > 0;
}

const char *lgr_server_name(const struct dev_ops *dev)
{
	return srv.ds[dev->kind].name;
}

int lgr_server_start(void)
{
	pthread_mutex_lock(&srv.lock);
	for (int i = 0; i < dev_count; i++) {
		struct dev_srv *ds = &srv.ds[dev_list[i]->kind];
		if (ds->lfd < 0 && dev_list[i]->srv_open(ds) == 0)
			srv.open++;
	}
	int e = srv.open ? 0 : -1;
	if (!e)
		srv.nlisteners++;
	pthread_mutex_unlock(&srv.lock);
	return e;
}

static void prop_drop(struct prop *p, uint32_t decline)
{
	struct arena *a = arena_find(p->lgr, p->p.arena_id);

	/* We will never attach this segment: say so, or the client keeps it aside
	 * for good, waiting for our release (its bounds were checked on arrival). */
	if (a) {
		struct seg_hdr *h = (struct seg_hdr *)(a->base + p->p.seg_off);
		if (atomic_load(&h->state) != SEG_ATTACHED)
			atomic_fetch_or(&h->released, SEG_REL_SERVER);
	}
	if (p->fds[CLC_FD_TCP] >= 0)
		real.close(p->fds[CLC_FD_TCP]);
	bell_close(&p->fds[CLC_FD_BELL]);
	if (decline)
		lgr_server_decline(p->lgr, p->p.conn_id, decline);
	lgr_put(p->lgr);
	free(p);
}

/* Removes every proposal for which keep() says no. Called with srv.lock held. */
static void props_filter(int (*drop)(struct prop *, const void *), const void *arg,
			 uint32_t decline)
{
	struct prop **lists[NBUCKETS + 1];

	lists[0] = &srv.unresolved;
	for (int i = 0; i < NBUCKETS; i++)
		lists[i + 1] = &srv.bucket[i];
	for (int i = 0; i <= NBUCKETS; i++)
		for (struct prop **pp = lists[i]; *pp;) {
			struct prop *p = *pp;
			if (drop(p, arg)) {
				*pp = p->next;
				prop_drop(p, decline);
			} else {
				pp = &p->next;
			}
		}
}

struct conn_key {
	const struct lgr *g;
	uint64_t id;
};

static int prop_is(struct prop *p, const void *k)
{
	const struct conn_key *key = k;
	return p->lgr == key->g && p->p.conn_id == key->id;
}

static int prop_any(struct prop *p, const void *unused)
{
	(void)p;
	(void)unused;
	return 1;
}

/* The client process is gone (or its channel broke). Its queued proposals stay:
 * a client may connect, write and exit before we accept, and its bytes are in
 * an arena we have mapped. Unmatched ones expire like any other. */
static void server_lgr_dead(struct lgr *g)
{
	/* Once: a proposal of a dead group may make it the last match again,
	 * and its channel, read again, says again that it is gone. */
	if (g->dead)
		return;
	g->dev->srv_unwatch(&srv.ds[g->dev->kind], g->ctl);
	if (srv.last == g) {
		srv.last = NULL;
		lgr_put(g);
	}
	for (struct lgr **pp = &srv.lgrs; *pp; pp = &(*pp)->next)
		if (*pp == g) {
			*pp = g->next;
			break;
		}
	g->dead = 1;
	lgr_put(g);
}

static void server_take_proposal(struct lgr *g, const struct clc_proposal *p, const int *got)
{
	struct arena *a;
	int fds[CLC_FD_MAX] = {-1, -1, -1}, k = 0, kept = (p->flags & CLC_F_BELL_KEPT) != 0;
	uint32_t unread = 0;

	/* Into the full layout: the TCP socket, the doorbell, the arena, for a
	 * device that passes them. */
	if (g->dev->flags & DEV_F_PASSES_FDS) {
		fds[CLC_FD_TCP] = got[k++];
		if (!kept)
			fds[CLC_FD_BELL] = got[k++];
		if (p->flags & CLC_F_NEW_ARENA)
			fds[CLC_FD_ARENA] = got[k++];
	}

	/* Ids only grow: a replayed or reordered proposal is refused outright. */
	if (p->conn_id <= g->next_conn_id) {
		stat_add(STAT_HANDSHAKE_ERR, 1);
		if (fds[CLC_FD_ARENA] >= 0)
			real.close(fds[CLC_FD_ARENA]);
		goto drop;
	}
	g->next_conn_id = p->conn_id;

	if (p->flags & CLC_F_NEW_ARENA) {
		int fd = fds[CLC_FD_ARENA];
		a = arena_find(g, p->arena_id)
			    ? NULL
			    : arena_new(g->dev, g->ctl, 0, fd, p->arena_id, p->arena_size);
		if (a && a->fd >= 0)
			a->fd = sys_fd_high(a->fd);
		else if (!a && fd >= 0)
			real.close(fd);
		if (!a) {
			stat_add(STAT_HANDSHAKE_ERR, 1);
			lgr_server_decline(g, p->conn_id, decline_code(DECL_MEMORY));
			goto drop;
		}
		a->next = g->arenas;
		g->arenas = a;
	}
	a = arena_find(g, p->arena_id);
	if (!a || p->seg_off > a->size || p->seg_size > a->size - p->seg_off) {
		stat_add(STAT_HANDSHAKE_ERR, 1);
		lgr_server_decline(g, p->conn_id, decline_code(DECL_PROTOCOL));
		goto drop;
	}
	/* The segment's doorbell: our end kept from its last connection, or a new
	 * one replacing it. */
	uint64_t key = bellcache_key(p->arena_id, p->seg_off);
	pthread_mutex_lock(&g->lock);
	if (kept)
		fds[CLC_FD_BELL] = bellcache_take(&g->kept, key, &unread);
	else
		bellcache_drop(&g->kept, key);
	pthread_mutex_unlock(&g->lock);
	/* A device that passes none: our end is made here. */
	int none = -1;
	if (!kept && fds[CLC_FD_BELL] < 0 && bell_new(g->dev, &fds[CLC_FD_BELL], &none) < 0) {
		lgr_server_decline(g, p->conn_id, decline_code(DECL_MEMORY));
		goto drop;
	}
	if (fds[CLC_FD_BELL] < 0) {
		stat_add(STAT_HANDSHAKE_ERR, 1);
		lgr_server_decline(g, p->conn_id, decline_code(DECL_PROTOCOL));
		goto drop;
	}
	struct prop *n = sys_zalloc(sizeof(*n));
	if (!n) {
		lgr_server_decline(g, p->conn_id, decline_code(DECL_MEMORY));
		goto drop;
	}
	n->lgr = g;
	n->p = *p;
	memcpy(n->fds, fds, sizeof(n->fds));
	n->bell_unread = unread;
	n->born_ns = sys_now_ns();
	lgr_hold(g);
	n->next = srv.unresolved;
	srv.unresolved = n;
	return;
drop:
	if (fds[CLC_FD_TCP] >= 0)
		real.close(fds[CLC_FD_TCP]);
	bell_close(&fds[CLC_FD_BELL]);
}

/* Takes in one message from a link group's channel. Returns 0 when there was
 * none (or the channel died). */
static int server_read_one(struct lgr *g)
{
	char buf[256];
	int fds[CLC_FD_MAX], nfds = CLC_FD_MAX;
	union clc_msg m;
	ssize_t n = g->dev->ctl_recv(g->ctl, buf, sizeof(buf), fds, &nfds);

	if (n == -EAGAIN)
		return 0;
	if (n <= 0 && n != -EPROTO) {
		server_lgr_dead(g);
		return 0;
	}
	int e = n < 0 ? CLC_EFDS
		      : clc_decode(buf, (size_t)n,
				   g->dev->flags & DEV_F_PASSES_FDS ? nfds : CLC_NFDS_NONE, &m);
	if (!e && m.hdr.type == CLC_PROPOSAL) {
		server_take_proposal(g, &m.proposal, fds);
		return 1;
	}
	if (!e && m.hdr.type == CLC_EXT_FD) {
		pthread_mutex_lock(&g->lock);
		ext_keep(g, &m.ext_fd, fds[0]);
		pthread_mutex_unlock(&g->lock);
		return 1;
	}
	for (int i = 0; i < nfds; i++)
		real.close(fds[i]);
	if (!e && m.hdr.type == CLC_WITHDRAW) {
		struct conn_key k = {g, m.withdraw.conn_id};
		props_filter(prop_is, &k, 0);
		return 1;
	}
	stat_add(STAT_HANDSHAKE_ERR, 1);
	return 1;
}

static void server_read(struct lgr *g)
{
	while (server_read_one(g))
		;
}

/* Takes in the link groups new at dev's endpoint, and what each has to say. */
static void server_accept(const struct dev_ops *dev, struct dev_srv *ds)
{
	int ctl;

	while ((ctl = dev->srv_accept(ds)) >= 0) {
		struct lgr *g = lgr_new(dev, LGR_SERVER, ctl);
		if (!g) {
			dev->ctl_close(ctl);
			continue;
		}
		if (dev->srv_watch(ds, ctl, g) < 0) {
			lgr_put(g);
			continue;
		}
		g->next = srv.lgrs;
		srv.lgrs = g;
		server_read(g);
	}
}

/* Takes in every queued link group and message. Called with srv.lock held. */
static void server_drain(void)
{
	void *tags[64];
	int n;

	for (int d = 0; d < dev_count; d++) {
		const struct dev_ops *dev = dev_list[d];
		struct dev_srv *ds = &srv.ds[dev->kind];
		if (ds->ep < 0 && ds->lfd < 0)
			continue;
		do {
			n = dev->srv_events(ds, tags, 64);
			for (int i = 0; i < n; i++) {
				struct lgr *g = tags[i];
				if (!g)
					server_accept(dev, ds);
				else if (!g->dead)
					server_read(g);
			}
		} while (n == 64);
	}
}

/* The header of the segment a proposal names (its bounds were checked on
 * arrival). */
static struct seg_hdr *prop_hdr(const struct prop *p)
{
	struct arena *a = arena_find(p->lgr, p->p.arena_id);

	return (struct seg_hdr *)(a->base + p->p.seg_off);
}

static int prop_stale(struct prop *p, const void *now)
{
	return *(const uint64_t *)now - p->born_ns > (uint64_t)cfg.handshake_ms * 2000000ull;
}

/* Moves proposals whose client socket is now connected into the buckets, and,
 * now and then, expires those nobody accepted (a socket connected to
 * some other listener, a NAT we could not recognise): each holds descriptors. */
/* p binds to a connection accepted as plain already. */
static int went_plain(const struct prop *p)
{
	unsigned n = srv.ngave_up < 16 ? srv.ngave_up : 16;

	for (unsigned i = 0; i < n; i++)
		if (addr_equal(&srv.gave_up[i].local, &p->cl_peer) &&
		    addr_equal(&srv.gave_up[i].peer, &p->cl_local))
			return 1;
	return 0;
}

static void server_resolve(void)
{
	static uint64_t last_sweep;
	uint64_t now = sys_now_ns(), stale = (uint64_t)cfg.handshake_ms * 2000000ull;

	if (now - last_sweep > (stale / 4 < 1000000000ull ? stale / 4 : 1000000000ull)) {
		last_sweep = now;
		props_filter(prop_stale, &now, decline_code(DECL_TIMEOUT));
	}

	for (struct prop **pp = &srv.unresolved; *pp;) {
		struct prop *p = *pp;
		if (p->lgr->dev->bind_names(p->fds, prop_hdr(p), &p->cl_local, &p->cl_peer) == 0) {
			*pp = p->next;
			if (went_plain(p)) {
				prop_drop(p, decline_code(DECL_TIMEOUT));
				continue;
			}
			struct prop **b = &srv.bucket[p->cl_local.port % NBUCKETS];
			p->next = *b;
			*b = p;
		} else if (now - p->born_ns > stale) {
			/* Its connect never completed and nobody withdrew it. */
			*pp = p->next;
			prop_drop(p, decline_code(DECL_TIMEOUT));
		} else {
			pp = &p->next;
		}
	}
}

uint64_t lgr_accepted_netns(const struct lgr_accepted *c)
{
	uint64_t cookie = atomic_load_explicit(c->netns_cookie, memory_order_relaxed);
	socklen_t l = sizeof(cookie);

	if (!cookie && real.getsockopt(c->fd, SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &l) == 0)
		atomic_store_explicit(c->netns_cookie, cookie, memory_order_relaxed);
	return cookie;
}

/* The rest of the binding proof, once the 4-tuple matched the client socket's
 * own names: loopback never crosses namespaces, so for a loopback connection the
 * client's socket must live in the listener's (cookie), else it is a socket with
 * the same 4-tuple elsewhere, not the accepted one's peer. Returns hit, or NULL
 * when there is none or it failed (declined and dropped). */
static struct prop *bound_in(struct prop *hit, const struct addr *peer, uint64_t cookie)
{
	uint64_t theirs = 0;
	socklen_t l = sizeof(theirs);

	/* A kernel without cookies cannot tell, nor a device that passes no
	 * socket; the 4-tuple decides. */
	if (!hit || hit->fds[CLC_FD_TCP] < 0 || !addr_is_loopback(peer) || !cookie ||
	    real.getsockopt(hit->fds[CLC_FD_TCP], SOL_SOCKET, SO_NETNS_COOKIE, &theirs, &l) < 0 ||
	    theirs == cookie)
		return hit;
	stat_add(STAT_HANDSHAKE_ERR, 1);
	prop_drop(hit, decline_code(DECL_BINDING));
	return NULL;
}

/* Removes and returns the resolved proposal whose client socket mirrors ours. */
static struct prop *take_match(const struct addr *local, const struct addr *peer)
{
	for (struct prop **pp = &srv.bucket[peer->port % NBUCKETS]; *pp; pp = &(*pp)->next) {
		struct prop *p = *pp;
		if (addr_equal(&p->cl_local, peer) && addr_equal(&p->cl_peer, local)) {
			*pp = p->next;
			return p;
		}
	}
	return NULL;
}

/* How long an acceptor waits for the names of a client of a device that binds
 * late (DEV_F_BIND_LATE): it publishes them as soon as its connect() returns,
 * which is about when the connection reaches accept(). */
#define BIND_WAIT_NS (20 * 1000000ull)

/* A proposal of a device that binds late, still without its client's names,
 * that connects to local. */
static int awaits(struct prop *p, const void *local)
{
	struct addr dst;

	if (!(p->lgr->dev->flags & DEV_F_BIND_LATE) ||
	    seg_bind_get(prop_hdr(p), SEG_BIND_DST, &dst) < 0)
		return 0;
	addr_reached(&dst);
	return addr_equal(&dst, local);
}

static int awaited(const struct addr *local)
{
	for (struct prop *p = srv.unresolved; p; p = p->next)
		if (awaits(p, local))
			return 1;
	return 0;
}

/* The proposal whose client socket mirrors local/peer, taken out of the table,
 * reading what the channels hold as far as needed. Called with srv.lock held. */
static struct prop *take_proposal(const struct addr *local, const struct addr *peer)
{
	server_resolve();
	struct prop *hit = take_match(local, peer);
	/* A client's proposal comes just before its connection: most likely next in
	 * the channel the last one came from. Read that one message by message
	 * before looking at every channel. */
	for (struct lgr *g = srv.last; !hit && g && !g->dead && server_read_one(g);) {
		server_resolve();
		hit = take_match(local, peer);
	}
	if (!hit) {
		server_drain();
		server_resolve();
		hit = take_match(local, peer);
	}
	if (!hit && awaited(local)) {
		uint64_t until = sys_now_ns() + BIND_WAIT_NS;
		while (!hit && awaited(local) && sys_now_ns() < until) {
			sched_yield();
			server_drain();
			server_resolve();
			hit = take_match(local, peer);
		}
		/* If one of them was this connection's, which goes on as plain
		 * TCP, its client falls back as soon as its names come. */
		if (!hit)
			srv.gave_up[srv.ngave_up++ % 16] = (struct gave_up){*local, *peer};
	}
	return hit;
}

int lgr_accepted_init(struct lgr_accepted *c, int fd, const struct sockaddr *peer,
		      const struct sockaddr_storage *bound, _Atomic uint64_t *netns_cookie)
{
	c->fd = fd;
	c->netns_cookie = netns_cookie;
	addr_from_sockaddr(&c->peer, peer);
	addr_from_sockaddr(&c->local, (const struct sockaddr *)bound);
	return addr_is_any(&c->local) ? addr_sock_names(fd, &c->local, NULL) : 0;
}

int lgr_server_match(const struct lgr_accepted *c, struct seg_loc *loc, int *bell,
		     uint64_t *conn_id)
{
	const struct addr *local = &c->local, *peer = &c->peer;
	struct prop *hit = NULL;

	pthread_mutex_lock(&srv.lock);
	if (!srv.open) {
		pthread_mutex_unlock(&srv.lock);
		return 0;
	}
	hit = take_proposal(local, peer);
	if (hit && hit->lgr != srv.last) {
		if (srv.last)
			lgr_put(srv.last);
		srv.last = hit->lgr;
		lgr_hold(srv.last);
	}
	if (!hit) {
		/* A proposal aimed at us from a client port that arrived from another
		 * address has been translated on the way (NAT): the 4-tuples can never
		 * mirror, so tell its client now instead of letting it time out. */
		for (struct prop **pp = &srv.bucket[peer->port % NBUCKETS]; *pp;) {
			struct prop *p = *pp;
			if (p->cl_local.port == peer->port && addr_equal(&p->cl_peer, local)) {
				*pp = p->next;
				prop_drop(p, decline_code(DECL_BINDING));
			} else {
				pp = &p->next;
			}
		}
	}
	pthread_mutex_unlock(&srv.lock);
	if (!(hit = bound_in(hit, peer, lgr_accepted_netns(c))))
		return 0;

	struct arena *a = arena_find(hit->lgr, hit->p.arena_id);
	*loc = (struct seg_loc){hit->lgr, a, hit->p.seg_off, hit->p.seg_size,
				{hit->p.ring_size[0], hit->p.ring_size[1]},
				(struct seg_hdr *)(a->base + hit->p.seg_off), hit->bell_unread, 0};
	*conn_id = hit->p.conn_id;
	if (hit->fds[CLC_FD_TCP] >= 0)
		real.close(hit->fds[CLC_FD_TCP]);
	*bell = hit->fds[CLC_FD_BELL];
	free(hit); /* its link group reference now belongs to loc */
	return 1;
}

int lgr_server_give(const struct addr *local, const struct addr *peer, uint64_t netns_cookie,
		    int (*send)(void *ctx, const struct lgr_gift *gift), void *ctx)
{
	struct prop *hit;

	pthread_mutex_lock(&srv.lock);
	if (!srv.open) {
		pthread_mutex_unlock(&srv.lock);
		return 0;
	}
	hit = take_proposal(local, peer);
	pthread_mutex_unlock(&srv.lock);
	/* The namespace is the asker's listener's. */
	if (!(hit = bound_in(hit, peer, netns_cookie)))
		return 0;
	/* While the sibling waits for this answer its client cannot have been
	 * served, so it still holds its socket and closing our copy costs little. */
	if (hit->fds[CLC_FD_TCP] >= 0)
		real.close(hit->fds[CLC_FD_TCP]);
	hit->fds[CLC_FD_TCP] = -1;

	struct arena *a = arena_find(hit->lgr, hit->p.arena_id);
	struct lgr_gift gift = {.p = hit->p, .fds = {hit->fds[CLC_FD_BELL], a->fd}, .nfds = 2};
	struct clc_proposal *p = &gift.p;
	/* The arena's own descriptor goes along: sending copies it, and it stays
	 * the link group's (a device that names arenas names it, and the channel
	 * it rings the client through). So does the doorbell end's, kept for the
	 * segment's next connection as if ours had ended (how many rings it holds
	 * then is the sibling's to count). */
	if (a->fd < 0) {
		gift.dev = hit->lgr->dev->kind;
		hit->lgr->dev->ctl_export(a->ctl, gift.link);
		gift.nfds = 1;
	}
	p->flags = CLC_F_NEW_ARENA | CLC_F_BELL_HELD;
	/* A kept end may still be watched here for its last connection: the
	 * sibling's connection must not wake us. */
	epoll_bell_gone(gift.fds[CLC_HFD_BELL]);
	p->arena_size = a->size;
	int bell = gift.fds[CLC_HFD_BELL];
	if (send(ctx, &gift) < 0) {
		/* It stays ours, and we cannot attach it: the client falls back. */
		prop_drop(hit, decline_code(DECL_MEMORY));
		return 0;
	}
	/* Kept only once sent: until then a second proposal for the segment (a
	 * broken client) could close it and hand its number to another file. If
	 * keeping fails the sibling still says kept, and the segment's next
	 * proposal is declined: one connection falls back. */
	struct lgr *g = hit->lgr;
	pthread_mutex_lock(&g->lock);
	if (!g->dead &&
	    bellcache_put(&g->kept, bellcache_key(p->arena_id, p->seg_off), bell, SEG_BELL_UNKNOWN) == 0)
		bell = -1;
	pthread_mutex_unlock(&g->lock);
	bell_close(&bell);
	lgr_put(g);
	free(hit);
	return 1;
}

int lgr_server_adopt(const struct clc_handoff *h, int *fds, struct seg_loc *loc, int *bell)
{
	const struct clc_proposal *p = &h->p;
	const struct dev_ops *dev = dev_of_kind((int)h->dev);
	struct arena *a = !dev ? NULL
			       : lgr_arena_adopt(dev, h->dev ? -1 : fds[CLC_HFD_ARENA], p->arena_id,
						 p->arena_size, h->link);

	if (!h->dev)
		fds[CLC_HFD_ARENA] = -1;
	/* The decoder bounded the segment; the arena we mapped must hold it too. */
	if (!a || p->seg_off > a->size || p->seg_size > a->size - p->seg_off) {
		stat_add(STAT_HANDSHAKE_ERR, 1);
		if (a)
			arena_unadopt(a);
		real.close(fds[CLC_HFD_BELL]);
		return 0;
	}
	/* A sibling's kept doorbell end comes without its count. */
	*loc = (struct seg_loc){NULL, a, p->seg_off, p->seg_size, {p->ring_size[0], p->ring_size[1]},
				(struct seg_hdr *)(a->base + p->seg_off), SEG_BELL_UNKNOWN,
				(p->flags & CLC_F_BELL_HELD) != 0};
	*bell = fds[CLC_HFD_BELL];
	return 1;
}

/* ---------------------------------------------------------------- extensions */

int lgr_ext_send(struct lgr *g, uint64_t conn_id, uint32_t index, int fd, uint64_t size)
{
	struct clc_ext_fd m;

	/* Memory of one kernel's processes travels as a descriptor, which only a
	 * channel of the local device carries. */
	if (!(g->dev->flags & DEV_F_PASSES_FDS))
		return -EOPNOTSUPP;
	clc_ext_fd_init(&m, conn_id, index, size);
	ssize_t n = g->dev->ctl_send(g->ctl, &m, sizeof(m), &fd, 1);
	return n == (ssize_t)sizeof(m) ? 0 : n < 0 ? (int)n : -EPROTO;
}

/* Called with g->lock held. */
static int ext_find(struct lgr *g, uint64_t conn_id, uint32_t index, uint64_t *size)
{
	for (struct lgr_ext_fd **pp = &g->ext_in, *x; (x = *pp); pp = &x->next)
		if (x->conn_id == conn_id && x->index == index) {
			int fd = x->fd;
			*size = x->size;
			*pp = x->next;
			g->n_ext_in--;
			free(x);
			return fd;
		}
	return -1;
}

int lgr_ext_take(struct lgr *g, uint64_t conn_id, uint32_t index, uint64_t *size)
{
	pthread_mutex_lock(&g->lock);
	int fd = ext_find(g, conn_id, index, size);
	pthread_mutex_unlock(&g->lock);
	if (fd >= 0 || g->dead)
		return fd;
	/* Not read yet: the channel's reader on each side is who keeps it. */
	if (g->role == LGR_CLIENT) {
		lgr_client_poll(g);
	} else {
		pthread_mutex_lock(&srv.lock);
		if (!g->dead)
			server_read(g);
		pthread_mutex_unlock(&srv.lock);
	}
	pthread_mutex_lock(&g->lock);
	fd = ext_find(g, conn_id, index, size);
	pthread_mutex_unlock(&g->lock);
	return fd;
}

void lgr_ext_drop(struct lgr *g, uint64_t conn_id)
{
	struct lgr_ext_fd *gone = NULL;

	pthread_mutex_lock(&g->lock);
	for (struct lgr_ext_fd **pp = &g->ext_in, *x; (x = *pp);) {
		if (x->conn_id == conn_id) {
			*pp = x->next;
			x->next = gone;
			gone = x;
			g->n_ext_in--;
		} else {
			pp = &x->next;
		}
	}
	pthread_mutex_unlock(&g->lock);
	ext_list_free(gone);
}

int lgr_peer_cred(struct lgr *g, struct ucred *cred)
{
	return g && g->ctl >= 0 ? g->dev->ctl_peer_cred(g->ctl, cred) : -1;
}

pid_t lgr_peer_pid(struct lgr *g)
{
	struct ucred cr;

	return lgr_peer_cred(g, &cr) < 0 ? 0 : cr.pid;
}

int lgr_hangs_up(struct lgr *g, int ms)
{
	return g->dead || (g->ctl >= 0 && g->dev->ctl_hangs_up(g->ctl, ms));
}

void lgr_peer_vanished(struct lgr *g)
{
	if (g->dead || !lgr_hangs_up(g, 0))
		return;
	if (g->role == LGR_CLIENT) {
		client_mark_dead(g);
		return;
	}
	/* What the client queued before it died is read first: a connection it made
	 * may not have been accepted yet. The hang-up at the end buries the group. */
	pthread_mutex_lock(&srv.lock);
	if (!g->dead)
		server_read(g);
	pthread_mutex_unlock(&srv.lock);
}

void lgr_server_decline(struct lgr *g, uint64_t conn_id, uint32_t code)
{
	struct clc_decline d;

	if (!g)
		return; /* handed off by a sibling: the client's channel is the sibling's */

	clc_decline_init(&d, conn_id, code);
	g->dev->ctl_send(g->ctl, &d, sizeof(d), NULL, 0);
}

#define SERVER_LOOK_NS (10 * 1000000ull)

void lgr_server_look(void)
{
	static _Atomic uint64_t looked;
	uint64_t now = sys_now_ns(), last = atomic_load_explicit(&looked, memory_order_relaxed);

	/* Never waiting: a look is no reason to stall an accept under way. */
	if (now - last < SERVER_LOOK_NS || !atomic_compare_exchange_strong(&looked, &last, now) ||
	    pthread_mutex_trylock(&srv.lock))
		return;
	if (srv.lgrs)
		server_drain();
	pthread_mutex_unlock(&srv.lock);
}

void lgr_server_take_news(void)
{
	pthread_mutex_lock(&srv.lock);
	if (srv.lgrs)
		server_drain();
	pthread_mutex_unlock(&srv.lock);
}

void lgr_server_listener_gone(void)
{
	int last = 0;

	pthread_mutex_lock(&srv.lock);
	if (--srv.nlisteners == 0 && srv.open) {
		last = 1;
		server_drain();
		props_filter(prop_any, NULL, decline_code(DECL_NO_DEVICE));
		/* Link groups already open keep their channels; new clients find no
		 * endpoint here any more. */
		for (int i = 0; i < dev_count; i++) {
			struct dev_srv *ds = &srv.ds[dev_list[i]->kind];
			if (ds->lfd >= 0)
				dev_list[i]->srv_close(ds);
		}
		srv.open = 0;
	}
	pthread_mutex_unlock(&srv.lock);
	/* Outside srv.lock: answering siblings takes it under the handoff's locks. */
	if (last)
		handoff_close();
}

/* In a forked child: a link group of the parent's that the child must not use.
 * Its descriptors here are copies: closing them leaves the parent's intact.
 * Connections the child holds keep the structure until they close. */
static void forget_in_child(struct lgr *g)
{
	pthread_mutex_init(&g->lock, NULL);
	g->dead = 1;
	g->dev->ctl_close(g->ctl);
	g->ctl = -1;
	bellcache_clear(&g->kept);
	ext_list_free(g->ext_in);
	g->ext_in = NULL;
	g->n_ext_in = 0;
	for (struct seg_ref *r = g->free; r; r = r->next)
		bell_close(&r->bell);
	for (struct seg_ref *r = g->zombies; r; r = r->next)
		bell_close(&r->bell);
	lgr_put(g);
}

void lgr_atfork_child(void)
{
	/* The child shares the parent's listeners, and with them the control socket
	 * and the link groups proposals arrive on. Client link groups are not
	 * shared: segment allocation state cannot be split between two processes,
	 * so the child opens its own. The descriptors are our copies, so closing
	 * them leaves the parent's intact. */
	pthread_mutex_init(&clients_lock, NULL);
	pthread_mutex_init(&srv.lock, NULL);
	/* The parent's channels stay the parent's, and their connections that the
	 * child holds need them no more (a dead peer's FIN still arrives on TCP):
	 * the child watches the endpoints for new link groups only. */
	for (struct lgr *g = srv.lgrs, *n; g; g = n) {
		n = g->next;
		forget_in_child(g);
	}
	srv.lgrs = NULL;
	if (srv.last)
		lgr_put(srv.last);
	srv.last = NULL;
	for (int i = 0; i < dev_count; i++)
		dev_list[i]->srv_atfork_child(&srv.ds[dev_list[i]->kind]);
	for (struct lgr *g = clients, *n; g; g = n) {
		n = g->next;
		forget_in_child(g);
	}
	clients = NULL;
}
