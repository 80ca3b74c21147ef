/* epoll for accelerated sockets.
 *
 * The application's epoll instance stays real. Accelerated sockets are watched by
 * a private epoll instance (one per application instance) that is itself
 * registered in the application's with a marker: it holds each socket's doorbell
 * and TCP socket, edge-triggered. When the marker fires, only the sockets whose
 * doorbell or TCP socket changed are looked at, so a wait costs O(ready), never
 * O(registered). Level-triggered sockets that were reported stay on a ready list
 * and are re-checked on the next wait, as the kernel re-queues them.
 *
 * A set watching an accelerated listener also watches this process's handoff
 * socket in its private instance, so that a sibling asking for a proposal we
 * hold is answered while the application sleeps (handoff.h).
 *
 * The marker must never reach the application, whatever descriptor number or
 * thread its wait comes through. So a set has its state from epoll_create() on,
 * and every number the set gets (dup, dup2, dup3, F_DUPFD) names that state;
 * every wait on any epoll descriptor goes through sift(), which takes anything
 * that looks like a marker out of what the kernel returned; and the marker is
 * no pointer but a value no application address has, so that a marker sift
 * cannot place (another process's: a set passed on, or kept across exec) is
 * dropped. It stays level-triggered: a waiter in another process must not take
 * the edge the set's own waiters need. */
#include "epoll.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "../core/handoff.h"
#include "../core/hooks.h"
#include "../core/sys.h"
#include "../dev/dev.h"
#include "fdtab.h"
#include "init.h"

struct epshadow;
struct epreg;

/* A doorbell's entry in a private instance. A segment's doorbell ends serve
 * connection after connection (both ends keep theirs), and so does the entry:
 * when its connection goes it is parked, not removed, and the next connection
 * on the same end in the same set takes it back. That saves an add and a
 * removal per connection, the costliest system calls of a short connection
 * (an add to an instance nested in the application's takes the kernel's loop
 * check). Entries are found by descriptor in this process's table of them; a
 * doorbell end's close (or its going to a sibling) first takes its entries out
 * of there and of their instances (epoll_bell_gone), so an entry in the table
 * always names the doorbell its descriptor holds. */
struct bellwatch {
	struct epshadow *sh;
	int fd;
	struct epreg *r;       /* the registration served; NULL while parked */
	unsigned rang_parked;  /* rings heard while parked */
	_Atomic int dead;      /* out of the table and the instance: freed by the set */
	struct bellwatch *sh_next, **sh_pprev; /* every entry of the set, under sh->lock */
	struct bellwatch *tab_next;            /* in the table, under watch_lock */
};

struct epreg {
	struct epshadow *sh;
	struct usock *s;
	int fd;
	uint32_t events;
	epoll_data_t data;
	int disabled;       /* EPOLLONESHOT fired */
	int deleted;        /* EPOLL_CTL_DEL: kept watched, so a later ADD costs nothing */
	int queued;         /* on sh->ready */
	uint64_t reported;  /* the wait call that last reported it */
	_Atomic int plain;  /* the socket fell back: move it to the real instance */
	struct bellwatch *bw; /* its doorbell's entry in the private instance */
	/* Edge-triggered and reported, not armed yet: the next wait looks whether
	 * anything happened since (stamp), which costs the peer no ring while the
	 * application is busy with what it was given. */
	int unarmed;
	struct conn_stamp stamp;
	short stamp_tcp;    /* tcp (below) at the stamp */
	/* What the private instance reported of the TCP socket since it was added
	 * there (the add reports what already holds). */
	short tcp;
	struct epreg *ready_next, **ready_pprev; /* on sh->ready, under ready_lock */
	/* In the list collect() works through, which it alone touches (another
	 * thread may queue the registration again meanwhile). */
	struct epreg *collect_next;
	struct epreg *sock_next, *all_next;
	struct epreg **all_pprev;   /* what points at it in sh->all: unlinking is O(1) */
	/* Armed by a wait that went to sleep, with the generation it armed: on
	 * sh->dozed until a wait back awake takes the arm back (unarm_dozed). */
	struct epreg *dozed_next, **dozed_pprev;
	uint32_t dozed_gen;
	/* Its arm was taken back, and nothing has happened on it since: the next
	 * sleep arms it for good (an idle connection costs no wait anything). */
	int undone;
	/* Edge-triggered, and its stamp is what it last reported or last found
	 * (reported, or armed to sleep): it reports again only what differs,
	 * armed or not. A wake-up that says nothing new to TCP (the attach, a
	 * ring for the other direction) is no edge. Cleared by EPOLL_CTL_ADD and
	 * MOD, which report what holds. */
	int edge_stamped;
};

struct epshadow {
	struct obj o;
	int ifd;             /* private instance, -1 until an accelerated socket joins */
	/* The marker's data in the application's instance (mark_make), and whether it
	 * is there: a wait looks at the ready list only once the set started. */
	_Atomic uint64_t mark;
	_Atomic int started;
	/* The set is itself watched by another epoll set (or may be, by poll):
	 * the kernel must see it readable whenever it has something to report. */
	_Atomic int nested;
	struct epshadow *live_next, **live_pprev; /* started sets, under live_lock */
	int kick;            /* eventfd in ifd: wakes a waiter when a socket falls back */
	pthread_mutex_t lock;       /* registrations */
	pthread_mutex_t ready_lock; /* the ready list only; taken last */
	struct epreg *all, *ready;
	uint64_t wait_seq;   /* numbers wait calls, so one call reports a socket once */
	int recheck;         /* a socket must be looked at again soon: wake up for it */
	int handoff;         /* the handoff socket is in ifd */
	_Atomic int sleepers; /* threads inside the real epoll_wait: only they need a kick */
	struct bellwatch *bws;  /* doorbell entries, parked or serving */
	_Atomic int serving;    /* of them, serving a registration: shared memory can
				 * change under a wait only while one does */
	_Atomic int bws_dead;   /* of them, removed by epoll_bell_gone */
	_Atomic uint64_t looked_ns; /* when a wait last looked at the application's instance */
	_Atomic int dozers;  /* of the sleepers, those that armed to sleep in the kernel */
	struct epreg *dozed; /* registrations they armed, under lock */
	/* The device whose wake descriptor the set's sleeps watch: one of its
	 * sockets is registered, and it wakes nobody by itself (dev_ops.wake_fd). */
	_Atomic(const struct dev_ops *) waker;
	/* The wake descriptor ifd holds, -1 for none. A forked child gets a new
	 * one of its own (ifd, shared with the parent, keeps the parent's). */
	int wake_in;
};

/* A set nested in another, or polled, with sockets of a device that wakes
 * nobody by itself: its own instance must not hold the device's wake
 * descriptor (the set would look readable to its watcher at each of the
 * device's looks), so every other wait of the process watches it instead. */
static _Atomic(const struct dev_ops *) nested_waker;

const struct dev_ops *epoll_nested_waker(void)
{
	return atomic_load_explicit(&nested_waker, memory_order_relaxed);
}

/* A parked entry heard this many rings (those its connection's peer made late,
 * at most two), so a connection on its doorbell end is watched some other way:
 * it is removed rather than wake the set for nothing at every ring. */
#define PARKED_RINGS_MAX 4
#define WATCH_BUCKETS 256

/* Started sets, found by marker: a wait through a number the set was not made
 * with (one received, or made out of the library's sight) finds its set here. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct epshadow *live;

/* Doorbell entries by descriptor. Taken last, under anything. */
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bellwatch *watched[WATCH_BUCKETS];
static _Atomic int nwatched;

static struct bellwatch **bucket_of(int fd)
{
	return &watched[(unsigned)fd % WATCH_BUCKETS];
}

/* Called with watch_lock held. */
static void tab_add(struct bellwatch *bw)
{
	struct bellwatch **b = bucket_of(bw->fd);

	bw->tab_next = *b;
	*b = bw;
	atomic_fetch_add(&nwatched, 1);
}

/* Called with watch_lock held. */
static void tab_remove(struct bellwatch *bw)
{
	for (struct bellwatch **pp = bucket_of(bw->fd); *pp; pp = &(*pp)->tab_next)
		if (*pp == bw) {
			*pp = bw->tab_next;
			atomic_fetch_sub(&nwatched, 1);
			return;
		}
}

/* Called with sh->lock held. */
static void bw_free(struct bellwatch *bw)
{
	*bw->sh_pprev = bw->sh_next;
	if (bw->sh_next)
		bw->sh_next->sh_pprev = bw->sh_pprev;
	free(bw);
}

void epoll_bell_gone(int fd)
{
	if (!atomic_load(&nwatched))
		return;
	pthread_mutex_lock(&watch_lock);
	for (struct bellwatch **pp = bucket_of(fd), *bw; (bw = *pp);) {
		if (bw->fd != fd) {
			pp = &bw->tab_next;
			continue;
		}
		*pp = bw->tab_next;
		atomic_fetch_sub(&nwatched, 1);
		/* Its set lives while the entry is in the table (a dying one takes
		 * its entries out under this lock first). A harvest running meanwhile
		 * may hold the entry already: the set frees it later. */
		real.epoll_ctl(bw->sh->ifd, EPOLL_CTL_DEL, fd, NULL);
		bw->dead = 1;
		atomic_fetch_add(&bw->sh->bws_dead, 1);
	}
	pthread_mutex_unlock(&watch_lock);
}

void epoll_atfork_child(void)
{
	/* Removing an entry from the instance here would remove the parent's:
	 * the child's sets add their own, and close theirs with their copies. */
	pthread_mutex_init(&watch_lock, NULL);
	pthread_mutex_init(&live_lock, NULL);
	memset(watched, 0, sizeof(watched));
	atomic_store(&nwatched, 0);
}

/* A parked entry heard a ring. Called with sh->lock held, from harvest. */
static void parked_rang(struct bellwatch *bw)
{
	if (bw->dead || ++bw->rang_parked <= PARKED_RINGS_MAX)
		return;
	pthread_mutex_lock(&watch_lock);
	if (!bw->dead) {
		tab_remove(bw);
		real.epoll_ctl(bw->sh->ifd, EPOLL_CTL_DEL, bw->fd, NULL);
		bw_free(bw);
	}
	pthread_mutex_unlock(&watch_lock);
}

/* Frees the entries epoll_bell_gone took out. Called with sh->lock held, where
 * no harvest can hold one, and none serves a registration any more. */
static void bws_sweep(struct epshadow *sh)
{
	if (!atomic_load(&sh->bws_dead))
		return;
	for (struct bellwatch *bw = sh->bws, *n; bw; bw = n) {
		n = bw->sh_next;
		if (bw->dead && !bw->r) {
			atomic_fetch_sub(&sh->bws_dead, 1);
			bw_free(bw);
		}
	}
}

/* Which of a registration's descriptors fired (doorbell or TCP socket), in the
 * low bit of its data. */
#define TAG_TCP ((uintptr_t)1)
/* The data of the handoff socket's entry in a private instance. */
static const char handoff_mark;
#define HANDOFF_MARK ((void *)&handoff_mark)
/* ...and of the device's wake descriptor. */
static const char wake_mark;
#define WAKE_MARK ((void *)&wake_mark)

/* A registration of a socket that may still be accelerated (its connect() is
 * to come), held by the application's instance until then. */
struct epoll_early {
	int epfd, fd;
	struct epoll_event ev;
	struct epoll_early *next;
};

static void ready_push(struct epshadow *sh, struct epreg *r)
{
	pthread_mutex_lock(&sh->ready_lock);
	if (!r->queued) {
		r->queued = 1;
		r->ready_next = sh->ready;
		r->ready_pprev = &sh->ready;
		if (sh->ready)
			sh->ready->ready_pprev = &r->ready_next;
		sh->ready = r;
	}
	pthread_mutex_unlock(&sh->ready_lock);
}

/* O(1): an event loop with thousands of level-triggered sockets on the ready
 * list closes one of them per short connection. */
static void ready_unlink(struct epshadow *sh, struct epreg *r)
{
	pthread_mutex_lock(&sh->ready_lock);
	if (r->queued) {
		*r->ready_pprev = r->ready_next;
		if (r->ready_next)
			r->ready_next->ready_pprev = r->ready_pprev;
		r->queued = 0;
	}
	pthread_mutex_unlock(&sh->ready_lock);
}

/* The marker: high 16 bits no user-space address has, 32 random bits, and 16
 * bits that follow from those, so that an application's own value (a counter,
 * a hash) is taken for one only by a 1 in 2^32 chance. */
#define MARK_TAG 0x75e3ull

static uint64_t mark_check(uint32_t key)
{
	return (uint64_t)((key * 0x9e3779b1u) >> 16);
}

static int mark_like(uint64_t v)
{
	return v >> 48 == MARK_TAG && (v & 0xffff) == mark_check((uint32_t)(v >> 16));
}

/* A marker no other started set of ours has. Called with live_lock held. */
static uint64_t mark_make(void)
{
	for (;;) {
		uint32_t key;
		if (getrandom(&key, sizeof(key), GRND_NONBLOCK) != sizeof(key))
			key = (uint32_t)(sys_now_ns() * 0x9e3779b97f4a7c15ull >> 32) ^ (uint32_t)sys_pid();
		uint64_t m = MARK_TAG << 48 | (uint64_t)key << 16 | mark_check(key);
		struct epshadow *sh = live;
		while (sh && sh->mark != m)
			sh = sh->live_next;
		if (!sh)
			return m;
	}
}

/* The started set whose marker v is, with a reference, or NULL: v came from
 * another process (a set passed on, or kept across exec, whose marker is
 * someone else's), or its set is gone. */
static struct epshadow *mark_owner(uint64_t v)
{
	struct epshadow *sh;

	pthread_mutex_lock(&live_lock);
	for (sh = live; sh && sh->mark != v; sh = sh->live_next)
		;
	if (sh && !obj_tryget(&sh->o))
		sh = NULL;
	pthread_mutex_unlock(&live_lock);
	return sh;
}

static struct epshadow *shadow_of(struct obj *o)
{
	return o && o->kind == OBJ_EPOLL ? (struct epshadow *)o : NULL;
}

/* A set's state, installed at epfd with the table's reference and the caller's. */
static struct epshadow *shadow_new(int epfd)
{
	struct epshadow *sh = obj_alloc(OBJ_EPOLL, sizeof(*sh));

	if (!sh)
		return NULL;
	atomic_store(&sh->o.refs, 2);
	sh->ifd = sh->kick = sh->wake_in = -1;
	pthread_mutex_init(&sh->lock, NULL);
	pthread_mutex_init(&sh->ready_lock, NULL);
	if (fdtab_set(epfd, &sh->o) < 0) {
		pthread_mutex_destroy(&sh->lock);
		pthread_mutex_destroy(&sh->ready_lock);
		obj_free(&sh->o);
		return NULL;
	}
	return sh;
}

/* The started set of ours that epfd, a number the table does not know, is one
 * more descriptor of: the one whose private instance the kernel finds in it. */
static struct epshadow *shadow_find(int epfd)
{
	struct epshadow *sh;

	pthread_mutex_lock(&live_lock);
	for (sh = live; sh; sh = sh->live_next) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = sh->mark};
		if (real.epoll_ctl(epfd, EPOLL_CTL_MOD, sh->ifd, &ev) == 0 && obj_tryget(&sh->o))
			break;
	}
	pthread_mutex_unlock(&live_lock);
	if (sh && fdtab_alias(epfd, &sh->o) < 0) {
		epoll_shadow_put(&sh->o);
		sh = NULL;
	}
	return sh;
}

/* The state of the set epfd names, with a reference; made if it has none yet. */
static struct epshadow *shadow_get(int epfd)
{
	struct obj *o = fdtab_get(epfd);
	struct epshadow *sh = shadow_of(o);

	if (sh || o) {
		if (!sh)
			obj_put(o);
		return sh;
	}
	return (sh = shadow_find(epfd)) ? sh : shadow_new(epfd);
}

/* Makes the set's marker fire. */
static void kick_now(struct epshadow *sh)
{
	uint64_t one = 1;

	if (real.write(sh->kick, &one, sizeof(one)) < 0) {
		/* saturated: a wake-up is pending anyway */
	}
}

/* From a signal handler, during a sleep (hooks.h). */
static void kick_signal(void *sh)
{
	kick_now(sh);
}

static void kick(struct epshadow *sh)
{
	/* The next wait looks at the ready list before it sleeps; but a set
	 * watched by another is looked at only once the kernel says so. */
	if (atomic_load(&sh->sleepers) || atomic_load(&sh->nested))
		kick_now(sh);
}

/* The set gets its private instance, and the application's instance (epfd
 * names it) the marker. Called with sh->lock held. */
static int shadow_start(struct epshadow *sh, int epfd)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET};

	if (sh->ifd >= 0)
		return 0;
	sh->ifd = sys_fd_high(real.epoll_create1(EPOLL_CLOEXEC));
	sh->kick = sys_fd_high(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (sh->ifd < 0 || sh->kick < 0)
		goto fail;
	ev.data.ptr = NULL;
	if (real.epoll_ctl(sh->ifd, EPOLL_CTL_ADD, sh->kick, &ev) < 0)
		goto fail;
	pthread_mutex_lock(&live_lock);
	ev.events = EPOLLIN;
	ev.data.u64 = sh->mark = mark_make();
	if (real.epoll_ctl(epfd, EPOLL_CTL_ADD, sh->ifd, &ev) < 0) {
		pthread_mutex_unlock(&live_lock);
		goto fail;
	}
	sh->live_next = live;
	sh->live_pprev = &live;
	if (live)
		live->live_pprev = &sh->live_next;
	live = sh;
	pthread_mutex_unlock(&live_lock);
	atomic_store(&sh->started, 1);
	/* A thread may be waiting in the kernel since before the set started
	 * (gRPC's pollers do, while another thread adds a connection): the
	 * marker wakes it, to look again as a started set's waiter. A set
	 * watched by another must not look readable for nothing: it arms every
	 * registration instead of watching by stamp, so what a waiter needs
	 * rings. */
	if (!atomic_load(&sh->nested))
		kick_now(sh);
	return 0;
fail:
	if (sh->ifd >= 0)
		real.close(sh->ifd);
	if (sh->kick >= 0)
		real.close(sh->kick);
	sh->ifd = sh->kick = -1;
	return -1;
}

/* Registrations hang off their socket, so finding one is O(1) however many
 * sockets the instance watches. Called with sh->lock held. */
static struct epreg *reg_find(struct epshadow *sh, struct usock *s, int fd)
{
	struct epreg *r;

	pthread_mutex_lock(&s->lock);
	for (r = s->regs; r; r = r->sock_next)
		if (r->sh == sh && r->fd == fd)
			break;
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* The doorbell's entry for a new registration: the one parked for its end in
 * this set, or a new one. Called with sh->lock held. */
static int bell_watch(struct epreg *r)
{
	struct epshadow *sh = r->sh;
	int fd = r->s->bell;
	struct bellwatch *bw = NULL;

	if (atomic_load(&nwatched)) {
		pthread_mutex_lock(&watch_lock);
		for (bw = *bucket_of(fd); bw; bw = bw->tab_next)
			if (bw->fd == fd && bw->sh == sh && !bw->r)
				break;
		pthread_mutex_unlock(&watch_lock);
	}
	if (!bw) {
		struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
		if (!(bw = calloc(1, sizeof(*bw))))
			return -1;
		*bw = (struct bellwatch){.sh = sh, .fd = fd, .sh_next = sh->bws, .sh_pprev = &sh->bws};
		if (sh->bws)
			sh->bws->sh_pprev = &bw->sh_next;
		sh->bws = bw;
		ev.data.ptr = bw;
		if (real.epoll_ctl(sh->ifd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			bw_free(bw);
			return -1;
		}
		pthread_mutex_lock(&watch_lock);
		tab_add(bw);
		pthread_mutex_unlock(&watch_lock);
	}
	bw->r = r;
	r->bw = bw;
	atomic_fetch_add_explicit(&sh->serving, 1, memory_order_relaxed);
	return 0;
}

/* The registration lets go of its doorbell's entry, which stays for the end's
 * next connection unless the end is gone already. Called with sh->lock held. */
static void bell_unwatch(struct epreg *r)
{
	struct bellwatch *bw = r->bw;

	r->bw = NULL;
	if (!bw)
		return;
	bw->r = NULL;
	bw->rang_parked = 0;
	atomic_fetch_sub_explicit(&r->sh->serving, 1, memory_order_relaxed);
}

/* The set sleeps on the wake descriptor of a device whose peers cannot wake it
 * (edge-triggered: every set holding it hears each time it fires), unless it
 * is nested. Called with sh->lock held. */
static void wake_watch(struct epshadow *sh, const struct dev_ops *dev)
{
	int fd = dev->wake_fd ? dev->wake_fd() : -1;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = WAKE_MARK};

	if (fd < 0)
		return;
	atomic_store(&sh->waker, dev);
	if (atomic_load(&sh->nested))
		atomic_store(&nested_waker, dev);
	else if (sh->wake_in != fd && real.epoll_ctl(sh->ifd, EPOLL_CTL_ADD, fd, &ev) == 0)
		sh->wake_in = fd;
}

static int watch(struct epreg *r, int op)
{
	struct epoll_event ev;
	struct usock *s = r->s;

	if (op == EPOLL_CTL_DEL) {
		bell_unwatch(r);
		real.epoll_ctl(r->sh->ifd, op, r->fd, NULL);
		return 0;
	}
	if (bell_watch(r) < 0)
		return -1;
	wake_watch(r->sh, s->dev);
	/* Writable says something only until connect() ends: a socket connected
	 * already (every accepted one) would report it at once, waking the set
	 * for nothing at each new connection. */
	ev.events = EPOLLIN | EPOLLRDHUP | EPOLLPRI | EPOLLET | (s->connected ? 0 : EPOLLOUT);
	ev.data.ptr = (void *)((uintptr_t)r | TAG_TCP);
	if (real.epoll_ctl(r->sh->ifd, op, r->fd, &ev) < 0) {
		bell_unwatch(r);
		return -1;
	}
	return 0;
}

static void dozed_unlink(struct epreg *r)
{
	if (!r->dozed_pprev)
		return;
	*r->dozed_pprev = r->dozed_next;
	if (r->dozed_next)
		r->dozed_next->dozed_pprev = r->dozed_pprev;
	r->dozed_pprev = NULL;
}

static void reg_free(struct epreg *r)
{
	usock_put(r->s);
	free(r);
}

/* Called with sh->lock held: unhook from the socket and the shadow. */
static void reg_unlink(struct epshadow *sh, struct epreg *r)
{
	pthread_mutex_lock(&r->s->lock);
	for (struct epreg **pp = &r->s->regs; *pp; pp = &(*pp)->sock_next)
		if (*pp == r) {
			*pp = r->sock_next;
			break;
		}
	pthread_mutex_unlock(&r->s->lock);
	*r->all_pprev = r->all_next;
	if (r->all_next)
		r->all_next->all_pprev = r->all_pprev;
	ready_unlink(sh, r);
	dozed_unlink(r);
}

/* The events a registration asks the rings about. */
static short reg_want(const struct epreg *r)
{
	return (short)(r->events & (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLRDNORM |
				    EPOLLWRNORM));
}

/* The TCP socket's state for a registration, from the edges its watch in the
 * private instance gathered (r->tcp). Until connect() ends, the TCP socket's
 * only news is that end (or its failure): no poll for every client socket an
 * event loop registers while it connects. After it, none either for a FIN,
 * which every short connection's last look at it would pay. */
static short reg_tcp_state(const struct epreg *r)
{
	if (!r->s->connected && !conn_tcp_news(r->s))
		return r->tcp;
	return conn_tcp_state(r->s, r->fd, r->tcp);
}

/* Whether r waits unarmed, and (seen, unless NULL) the socket as seen: what the
 * next look compares with (reg_unchanged). A spinning waiter reads both under
 * the ready list's lock alone (unarmed_news), the others under sh->lock: they
 * change under both. */
static void reg_mark(struct epreg *r, int unarmed, const struct conn_stamp *seen)
{
	pthread_mutex_lock(&r->sh->ready_lock);
	r->unarmed = unarmed;
	if (seen) {
		r->stamp = *seen;
		r->stamp_tcp = r->tcp;
	}
	pthread_mutex_unlock(&r->sh->ready_lock);
}

/* A registration left on the ready list unarmed, with the socket as seen then:
 * the next wait looks whether anything happened since. */
static void reg_stamp(struct epreg *r, const struct conn_stamp *seen)
{
	reg_mark(r, 1, seen);
}

/* r looked at afresh, not by its stamp. Called with sh->lock held, under which
 * r->unarmed is read. */
static void reg_unstamp(struct epreg *r)
{
	if (r->unarmed)
		reg_mark(r, 0, NULL);
}

/* A registration that is ready already must wake a thread sleeping in
 * epoll_wait, as the kernel would. One that is not asks the peer to ring only if
 * a thread sleeps in the set now; else it waits on the ready list, stamped, for
 * the next wait to look at it, and to arm it if that wait sleeps. Event loops
 * modify a registration for every message they write (wrk, ae): arming at each
 * made the peer ring for every answer. */
static void check_now(struct epshadow *sh, struct epreg *r)
{
	short want = reg_want(r);
	struct conn_stamp seen;
	/* Only an attached socket waits stamped: the stamp tells nothing of a
	 * connect() or an attach that ends. */
	int attached = r->s->connected && conn_attached(r->s);

	/* Taken before looking: whatever happens after it is news. */
	conn_stamp(r->s, want, &seen);
	reg_unstamp(r);
	r->edge_stamped = 0;
	if (conn_revents(r->s, r->fd, want, reg_tcp_state(r)) || !conn_accel(r->s)) {
		ready_push(sh, r);
		kick(sh);
	} else if (attached && !atomic_load(&sh->dozers) && !atomic_load(&sh->nested)) {
		/* A thread that arms to sleep counts itself first, then takes
		 * sh->lock (held here) to arm what is on the list. */
		reg_stamp(r, &seen);
		ready_push(sh, r);
	} else if (conn_arm(r->s, r->fd, want)) {
		ready_push(sh, r);
		kick(sh);
	}
}

/* A registration's events and data change, under the ready list's lock too: a
 * spinning waiter reads them under that one alone (unarmed_news). */
static void reg_set(struct epshadow *sh, struct epreg *r, const struct epoll_event *ev)
{
	pthread_mutex_lock(&sh->ready_lock);
	r->events = ev->events;
	r->data = ev->data;
	r->disabled = 0;
	pthread_mutex_unlock(&sh->ready_lock);
}

static int accel_ctl(struct epshadow *sh, int epfd, struct usock *s, int op, int fd,
		     struct epoll_event *ev)
{
	struct epreg *r;
	int ret = 0;

	pthread_mutex_lock(&sh->lock);
	r = reg_find(sh, s, fd);
	if (r && r->deleted) {
		if (op != EPOLL_CTL_ADD) {
			errno = ENOENT;
			ret = -1;
			goto out;
		}
		/* Event loops delete and re-add all the time; the watch never left. */
		r->deleted = 0;
		reg_set(sh, r, ev);
		check_now(sh, r);
		goto out;
	}
	if (op == EPOLL_CTL_ADD) {
		if (r) {
			errno = EEXIST;
			ret = -1;
			goto out;
		}
		if (shadow_start(sh, epfd) < 0 || !(r = sys_zalloc(sizeof(*r)))) {
			errno = ENOMEM;
			ret = -1;
			goto out;
		}
		usock_get(s);
		*r = (struct epreg){.sh = sh, .s = s, .fd = fd, .events = ev->events,
				    .data = ev->data};
		if (watch(r, EPOLL_CTL_ADD) < 0) {
			ret = -1;
			reg_free(r);
			goto out;
		}
		pthread_mutex_lock(&s->lock);
		r->sock_next = s->regs;
		s->regs = r;
		pthread_mutex_unlock(&s->lock);
		r->all_next = sh->all;
		r->all_pprev = &sh->all;
		if (sh->all)
			sh->all->all_pprev = &r->all_next;
		sh->all = r;
		check_now(sh, r);
	} else if (!r) {
		errno = ENOENT;
		ret = -1;
	} else if (op == EPOLL_CTL_MOD) {
		reg_set(sh, r, ev);
		check_now(sh, r);
	} else {
		r->deleted = 1;
		ready_unlink(sh, r);
	}
out:
	pthread_mutex_unlock(&sh->lock);
	return ret;
}

/* A socket that fell back leaves for the application's real instance (epfd
 * names it). Called with sh->lock held. */
static void reg_to_real(struct epshadow *sh, int epfd, struct epreg *r)
{
	struct epoll_event ev = {.events = r->events, .data = r->data};

	watch(r, EPOLL_CTL_DEL);
	reg_unlink(sh, r);
	if (!r->disabled && !r->deleted)
		real.epoll_ctl(epfd, EPOLL_CTL_ADD, r->fd, &ev);
	reg_free(r);
}

void epoll_sock_fallback(struct usock *s, int fd)
{
	(void)fd;
	/* Called with s->lock held, so only the leaf ready lock may be taken here;
	 * the move itself happens in the next wait. */
	for (struct epreg *r = s->regs; r; r = r->sock_next) {
		r->plain = 1;
		ready_push(r->sh, r);
		kick(r->sh);
	}
}

void epoll_sock_rang(struct usock *s, const void *except)
{
	pthread_mutex_lock(&s->lock);
	for (struct epreg *r = s->regs; r; r = r->sock_next)
		if (r->sh != except) {
			ready_push(r->sh, r);
			kick(r->sh);
		}
	pthread_mutex_unlock(&s->lock);
}

/* Keeps s->early in step with a real epoll_ctl that succeeded. */
static void early_note(struct usock *s, int epfd, int op, int fd, const struct epoll_event *ev)
{
	pthread_mutex_lock(&s->lock);
	struct epoll_early **pp = &s->early, *e;
	while (*pp && ((*pp)->epfd != epfd || (*pp)->fd != fd))
		pp = &(*pp)->next;
	if (op == EPOLL_CTL_DEL) {
		if ((e = *pp)) {
			*pp = e->next;
			free(e);
		}
	} else if (*pp) {
		(*pp)->ev = *ev;
	} else if ((e = malloc(sizeof(*e)))) {
		*e = (struct epoll_early){epfd, fd, *ev, NULL};
		*pp = e;
	}
	atomic_store(&s->has_early, s->early != NULL);
	pthread_mutex_unlock(&s->lock);
}

void epoll_sock_settled(struct usock *s)
{
	int m = atomic_load_explicit(&s->mode, memory_order_acquire);

	if (m == MODE_NEW)
		return; /* a refused connect(): it may connect again */
	if (!atomic_load(&s->has_early))
		return;
	pthread_mutex_lock(&s->lock);
	struct epoll_early *list = s->early;
	s->early = NULL;
	atomic_store(&s->has_early, 0);
	pthread_mutex_unlock(&s->lock);
	while (list) {
		struct epoll_early *e = list;
		list = e->next;
		struct epshadow *sh;
		/* The application may have closed the instance meanwhile: what the
		 * kernel no longer holds is not moved. */
		if (conn_accel(s) && real.epoll_ctl(e->epfd, EPOLL_CTL_DEL, e->fd, NULL) == 0) {
			sh = shadow_get(e->epfd);
			/* Out of memory: it stays where it was. */
			if (!sh || accel_ctl(sh, e->epfd, s, EPOLL_CTL_ADD, e->fd, &e->ev) < 0)
				real.epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->fd, &e->ev);
			if (sh)
				epoll_shadow_put(&sh->o);
		}
		free(e);
	}
}

void epoll_sock_closed(struct usock *s)
{
	pthread_mutex_lock(&s->lock);
	while (s->early) {
		struct epoll_early *e = s->early;
		s->early = e->next;
		free(e);
	}
	atomic_store(&s->has_early, 0);
	pthread_mutex_unlock(&s->lock);
	for (;;) {
		pthread_mutex_lock(&s->lock);
		struct epreg *r = s->regs;
		struct epshadow *sh = r ? r->sh : NULL;
		if (sh)
			atomic_fetch_add(&sh->o.refs, 1);
		pthread_mutex_unlock(&s->lock);
		if (!sh)
			return;
		pthread_mutex_lock(&sh->lock);
		/* Still registered? Another thread may have removed it meanwhile; one
		 * that did held sh->lock, so while we hold it r is on the socket's
		 * list or gone. */
		pthread_mutex_lock(&s->lock);
		struct epreg *x = s->regs;
		while (x && x != r)
			x = x->sock_next;
		pthread_mutex_unlock(&s->lock);
		if (x && x->sh == sh) {
			watch(r, EPOLL_CTL_DEL);
			reg_unlink(sh, r);
			reg_free(r);
		}
		pthread_mutex_unlock(&sh->lock);
		epoll_shadow_put(&sh->o);
	}
}

void epoll_shadow_put(struct obj *o)
{
	struct epshadow *sh = (struct epshadow *)o;

	if (atomic_fetch_sub(&o->refs, 1) != 1)
		return;
	if (sh->live_pprev) {
		pthread_mutex_lock(&live_lock);
		*sh->live_pprev = sh->live_next;
		if (sh->live_next)
			sh->live_next->live_pprev = sh->live_pprev;
		pthread_mutex_unlock(&live_lock);
	}
	while (sh->all) {
		struct epreg *r = sh->all;
		reg_unlink(sh, r);
		reg_free(r);
	}
	/* Its entries leave the table before the instance closes, so that
	 * epoll_bell_gone finds none of them. */
	pthread_mutex_lock(&watch_lock);
	for (struct bellwatch *bw = sh->bws; bw; bw = bw->sh_next)
		if (!bw->dead)
			tab_remove(bw);
	pthread_mutex_unlock(&watch_lock);
	while (sh->bws)
		bw_free(sh->bws);
	if (sh->ifd >= 0)
		real.close(sh->ifd);
	if (sh->kick >= 0)
		real.close(sh->kick);
	pthread_mutex_destroy(&sh->lock);
	pthread_mutex_destroy(&sh->ready_lock);
	obj_free(&sh->o);
}

/* Moves every socket whose doorbell or TCP socket fired onto the ready list.
 * Called with sh->lock held. */
static void harvest(struct epshadow *sh)
{
	struct epoll_event ev[64];
	int n, ticked;

	bws_sweep(sh);
	do {
		/* A look the device made rings doorbells: taken in too. */
		ticked = 0;
		n = real.epoll_wait(sh->ifd, ev, 64, 0);
		for (int i = 0; i < n; i++) {
			uintptr_t p = (uintptr_t)ev[i].data.ptr;
			struct epreg *r = (struct epreg *)(p & ~TAG_TCP);
			if (ev[i].data.ptr == HANDOFF_MARK) {
				handoff_serve();
				continue;
			}
			if (ev[i].data.ptr == WAKE_MARK) {
				atomic_load(&sh->waker)->wake_tick();
				ticked = 1;
				continue;
			}
			if (!r) {
				uint64_t v;
				if (real.read(sh->kick, &v, sizeof(v)) < 0) {
					/* already drained by another waiter */
				}
				continue;
			}
			if (!(p & TAG_TCP)) {
				struct bellwatch *bw = (struct bellwatch *)p;
				if (!(r = bw->r)) {
					parked_rang(bw);
					continue;
				}
				conn_bell_rang(r->s, sh);
			} else {
				/* The TCP socket carries no data: only its FIN, RST, errors
				 * and the end of connect() say anything new, the latter
				 * once to each registration (another set may have seen it
				 * first). */
				short before = r->tcp;
				r->tcp |= (short)ev[i].events;
				if (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
					conn_note_tcp_event(r->s);
				else if (before & EPOLLOUT)
					continue;
			}
			ready_push(sh, r);
		}
	} while (n == 64 || ticked);
}

/* Puts r on the list collect() hands back to the ready list at its end. */
static void keep_ready(struct epreg **keep, struct epreg *r)
{
	r->collect_next = *keep;
	*keep = r;
}

/* The ends of the stream the watch's edges tell of (bytes a plain peer sent to a
 * client waiting for its attach count as its FIN: either way, a look is due). */
static uint32_t tcp_ends(short tcp)
{
	return (tcp & (EPOLLIN | EPOLLRDHUP) ? CONN_END_FIN : 0) |
	       (tcp & (EPOLLERR | EPOLLHUP) ? CONN_END_RST : 0);
}

/* Nothing happened since reg_stamp(): no bytes, no room, and no end of the
 * stream that neither the peer's flags nor the TCP socket's edges had told of
 * (they tell of a FIN in either order; an RST after the FIN may come with no
 * flag, from a killed peer). */
static int reg_unchanged(const struct epreg *r, const struct conn_stamp *seen)
{
	return seen->rx_prod == r->stamp.rx_prod && seen->tx_cons == r->stamp.tx_cons &&
	       seen->ext == r->stamp.ext &&
	       (seen->ends | tcp_ends(r->tcp)) == (r->stamp.ends | tcp_ends(r->stamp_tcp));
}

/* A wait going to sleep armed r, which it found as seen (nothing new, or not
 * ready): noted, so that the wait, back awake, can take the arm back. Only
 * input on an attached socket: an arm for room covers the other ring too. */
static void dozed_note(struct epshadow *sh, struct epreg *r, const struct conn_stamp *seen)
{
	if ((reg_want(r) & EPOLLOUT) || !conn_attached(r->s))
		return;
	reg_mark(r, 0, seen);
	r->dozed_gen = conn_arm_gen(r->s);
	if (r->dozed_pprev)
		return;
	r->dozed_next = sh->dozed;
	r->dozed_pprev = &sh->dozed;
	if (sh->dozed)
		sh->dozed->dozed_pprev = &r->dozed_next;
	sh->dozed = r;
}

/* Back from a sleep: the registrations the sleep armed that nothing has
 * reported since go back to the ready list unarmed, looked at by their stamps,
 * as before the sleep. Left armed, each would cost its peer a ring for its next
 * bytes, while we are awake: a loop that sleeps now and then with hundreds of
 * connections in flight (redis-benchmark, redis) made its peer ring hundreds of
 * times for every sleep. One that stays quiet until the next sleep is armed for
 * good then: thousands of idle connections would otherwise be looked at by
 * every wait. Only the last thread awake does it (the others sleep on these
 * arms), and only for a socket that no other set, blocking call or process
 * waits on. Called with sh->lock held. */
static void unarm_dozed(struct epshadow *sh)
{
	struct epreg *r;

	if (atomic_load(&sh->dozers) || atomic_load(&sh->nested))
		return;
	while ((r = sh->dozed)) {
		dozed_unlink(r);
		if (r->deleted || r->disabled || r->plain)
			continue;
		struct usock *s = r->s;
		pthread_mutex_lock(&s->lock);
		int alone = s->regs == r && !r->sock_next;
		pthread_mutex_unlock(&s->lock);
		pthread_mutex_lock(&sh->ready_lock);
		/* Queued: it rang, or was looked at already. */
		int untouched = !r->queued && !r->unarmed;
		pthread_mutex_unlock(&sh->ready_lock);
		if (!alone || !untouched || !conn_unarm(s, r->dozed_gen))
			continue;
		pthread_mutex_lock(&sh->ready_lock);
		r->unarmed = 1;
		pthread_mutex_unlock(&sh->ready_lock);
		r->undone = 1;
		ready_push(sh, r);
	}
}

/* Reports ready sockets into out[0..max). Called with sh->lock held. arm: the
 * caller is about to sleep, so the registrations left unarmed that saw nothing
 * new are armed now (else they stay on the ready list, looked at by stamp). */
static int collect(struct epshadow *sh, int epfd, struct epoll_event *out, int max, int arm)
{
	struct epreg *list, *keep = NULL, *r;
	int n = 0, unarmed = 0; /* kept on the list, not armed */
	/* A set watched by another: the kernel must see what it has to report
	 * (nested), so everything is armed as before a sleep, and a registration
	 * reported level-triggered keeps the set readable (lt_ready). */
	int nested = atomic_load(&sh->nested), lt_ready = 0;

	arm |= nested;

	pthread_mutex_lock(&sh->ready_lock);
	list = sh->ready;
	sh->ready = NULL;
	for (r = list; r; r = r->ready_next) {
		r->queued = 0;
		r->collect_next = r->ready_next;
	}
	pthread_mutex_unlock(&sh->ready_lock);

	while ((r = list)) {
		list = r->collect_next;
		if (r->plain || !conn_accel(r->s)) {
			reg_to_real(sh, epfd, r);
			continue;
		}
		if (r->disabled || r->deleted)
			continue;
		if (n == max || r->reported == sh->wait_seq) {
			keep_ready(&keep, r);
			unarmed = 1;
			lt_ready |= nested && !(r->events & EPOLLET);
			continue;
		}
		struct usock *s = r->s;
		short want = reg_want(r);
		/* Taken before looking: whatever happens after it is news at the
		 * next wait. */
		struct conn_stamp seen;
		conn_stamp(s, want, &seen);
		/* Nothing since its stamp: unarmed, or edge-triggered and woken
		 * for what it told already (its ring's arm is spent all the same). */
		if ((r->unarmed || r->edge_stamped) && reg_unchanged(r, &seen)) {
			/* The same news from another source: a spinning waiter
			 * compares the stamp alone, and must not keep finding it. */
			reg_stamp(r, &seen);
			if (!arm) {
				keep_ready(&keep, r);
				unarmed = 1;
				continue;
			}
			/* Armed before the stamp: what happens after it rings. */
			conn_arm(s, r->fd, want);
			conn_stamp(s, want, &seen);
			if (reg_unchanged(r, &seen)) {
				reg_unstamp(r);
				if (!r->undone)
					dozed_note(sh, r, &r->stamp);
				continue;
			}
		}
		reg_unstamp(r);
		r->undone = 0;
		short got = conn_revents(s, r->fd, want, reg_tcp_state(r));
		if (!conn_accel(s)) {
			reg_to_real(sh, epfd, r);
			continue;
		}
		if (!got && !arm && !conn_pending(s)) {
			/* Not ready, and the caller does not sleep yet: while it spins
			 * it looks at the stamp, which costs the peer no ring. Armed
			 * before the caller sleeps. */
			reg_stamp(r, &seen);
			keep_ready(&keep, r);
			unarmed = 1;
			continue;
		}
		/* Ask the peer to ring us, then make sure we did not miss it: what
		 * came in meanwhile is reported now, not at some later wait. */
		if (!got && conn_arm(s, r->fd, want))
			got = conn_revents(s, r->fd, want, reg_tcp_state(r));
		if (!got) {
			/* Looked at again soon: a client still waiting for its attach (a
			 * decline by the registry or a plain peer rings no bell), or a
			 * socket the arm found ready that reports nothing yet. */
			if (conn_pending(s) || conn_arm(s, r->fd, want)) {
				keep_ready(&keep, r);
				sh->recheck = 1;
			} else if (arm) {
				dozed_note(sh, r, &seen);
			}
			continue;
		}
		out[n].events = (uint32_t)(unsigned short)got;
		out[n].data = r->data;
		r->reported = sh->wait_seq;
		n++;
		if (r->events & EPOLLONESHOT) {
			r->disabled = 1;
			continue;
		}
		if (r->events & EPOLLET) {
			r->edge_stamped = 1;
			if (nested)
				conn_arm(s, r->fd, want); /* its next news rings */
			reg_mark(r, !nested, &seen);
		}
		lt_ready |= nested && !(r->events & EPOLLET);
		keep_ready(&keep, r);
		unarmed = 1;
	}
	while ((r = keep)) {
		keep = r->collect_next;
		ready_push(sh, r);
	}
	/* What stays on the ready list unarmed (reported, or looked at by stamp)
	 * rings nothing until a wait arms it. Another thread asleep in the kernel
	 * must then look itself, and arm before it sleeps again: the kernel wakes
	 * another waiter for a socket it reported level-triggered, and for any
	 * socket's next event. Only a thread going to sleep is woken: one that
	 * spins comes back to the list anyway, and waking it would restart its
	 * spin, as its collect could restart ours. */
	if ((unarmed && atomic_load(&sh->dozers) > arm) || lt_ready)
		kick(sh);
	return n;
}

struct look {
	struct epshadow *sh;
	int epfd;
	struct epoll_event *events;
	int maxevents;
};

/* Whether one of the first max registrations on the ready list that were left
 * unarmed saw something since it was stamped: its peer rings nothing for it. */
static int unarmed_news(struct epshadow *sh, int max)
{
	int news = 0;
	struct conn_stamp now;

	pthread_mutex_lock(&sh->ready_lock);
	for (struct epreg *r = sh->ready; r && !news && max; r = r->ready_next)
		if (r->unarmed) {
			conn_stamp(r->s, reg_want(r), &now);
			news = !conn_stamp_same(&now, &r->stamp);
			max--;
		}
	pthread_mutex_unlock(&sh->ready_lock);
	return news;
}

/* The application's instance (epfd), sleeping for tmo at most. */
static int kernel_look(struct epshadow *sh, int epfd, struct epoll_event *events, int maxevents,
		       int tmo, const sigset_t *sigmask)
{
	int m = real.epoll_pwait(epfd, events, maxevents, tmo, sigmask);

	atomic_store_explicit(&sh->looked_ns, sys_now_ns(), memory_order_relaxed);
	return m;
}

/* How long the application's own descriptors may wait unlooked at while its
 * accelerated sockets keep every wait busy. */
#define BUSY_KERNEL_LOOK_NS 20000ull

/* Whether a wait that has n sockets to report looks at the application's
 * instance too. Only if that was not done lately: a look at the kernel costs
 * more than a message's whole trip through shared memory, and an event loop
 * ping-ponging with a peer paid one for every message. The kernel too reports
 * what it finds ready as it goes, not what became ready since. A signal mask is
 * the application's to apply: that wait is made. */
static int kernel_look_due(struct epshadow *sh, int n, int maxevents, const sigset_t *sigmask)
{
	if (!n || sigmask)
		return 1;
	return n < maxevents &&
	       sys_now_ns() - atomic_load_explicit(&sh->looked_ns, memory_order_relaxed) >=
		       BUSY_KERNEL_LOOK_NS;
}

/* A look between the kernel's looks costs a few loads per registration: it
 * stops at this many, so that a long ready list (a thousand connections just
 * served) cannot stretch it; the kernel's looks go through them all. */
#define SHALLOW_LOOK_MAX 64

/* Spinning: CONN_LOOK_NEWS for news on an unarmed registration; when deep,
 * besides, the application's instance without sleeping (its own descriptors,
 * and the marker when a doorbell rang). */
static int look_now(void *arg, int deep)
{
	struct look *l = arg;

	if (unarmed_news(l->sh, deep ? INT_MAX : SHALLOW_LOOK_MAX))
		return CONN_LOOK_NEWS;
	return deep ? kernel_look(l->sh, l->epfd, l->events, l->maxevents, 0, NULL) : 0;
}

/* What sift() found besides the application's events. */
struct sifted {
	int own;                /* the set's own marker */
	struct epshadow *other; /* another set of ours, with a reference */
	int foreign;            /* a marker that is nobody's here */
};

/* Takes every marker out of events[from, from + m), which a wait returned, and
 * returns how many events are left. sh's own marker (sh may be NULL) is noted;
 * so is the first marker of another set of this process's (a number that
 * reached that set's instance out of the library's sight, and was not known
 * for it yet). A marker that is nobody's here is another process's: dropped. */
static int sift(struct epshadow *sh, struct epoll_event *events, int from, int m,
		struct sifted *f)
{
	uint64_t mine = sh ? atomic_load_explicit(&sh->mark, memory_order_relaxed) : 0;
	int kept = from;

	for (int i = from; i < from + m; i++) {
		uint64_t v = events[i].data.u64;
		struct epshadow *o;
		if (!mark_like(v))
			events[kept++] = events[i];
		else if (v == mine)
			f->own = 1;
		else if (f->other && f->other->mark == v)
			continue;
		else if (!f->other && (o = mark_owner(v)))
			f->other = o;
		else
			f->foreign = 1;
	}
	return kept;
}

/* Another process's marker is level-triggered and stays until that process
 * looks at its set: a wait that found nothing else pauses a millisecond (the
 * application's signal mask applies) rather than spin on it. -1 with EINTR
 * when a signal came. */
#define FOREIGN_PAUSE_NS 1000000ull

static int foreign_pause(uint64_t deadline, const sigset_t *sigmask)
{
	uint64_t ns = FOREIGN_PAUSE_NS, now = sys_now_ns();

	if (deadline && deadline - now < ns)
		ns = deadline > now ? deadline - now : 0;
	struct timespec ts = {0, (long)ns};
	return ppoll(NULL, 0, &ts, sigmask) < 0 && errno == EINTR ? -1 : 0;
}

/* What sh has to report now, into out[0, max). arm: as a wait about to sleep
 * collects. */
static int serve(struct epshadow *sh, int epfd, struct epoll_event *out, int max, int arm)
{
	pthread_mutex_lock(&sh->lock);
	harvest(sh);
	int n = collect(sh, epfd, out, max, arm);
	pthread_mutex_unlock(&sh->lock);
	return n;
}

/* Another set's marker came through a wait on one set: that set is looked at
 * here, and armed, since nobody may be waiting in it. */
static int serve_other(struct epshadow *other, int epfd, struct epoll_event *out, int max)
{
	int n = max > 0 ? serve(other, epfd, out, max, 1) : 0;

	epoll_shadow_put(&other->o);
	return n;
}

static int shadow_wait(struct epshadow *sh, int epfd, struct epoll_event *events, int maxevents,
		       int timeout, const sigset_t *sigmask)
{
	uint64_t deadline = timeout > 0 ? sys_now_ns() + (uint64_t)timeout * 1000000ull : 0;
	int slept = 0, r, quiet = 0;

	/* Once for the call: a handler that runs between two rounds (after one
	 * looked for handlers, before the next sleeps) must still interrupt it. */
	signal_wait_begin();
	for (;;) {
		/* When the wait began, for a device that polls (wake_soon). */
		uint64_t began = !quiet && atomic_load_explicit(&sh->waker, memory_order_relaxed)
					 ? sys_now_ns()
					 : 0;
		/* Counted before looking at the ready list: a registration made ready
		 * by another thread after that look must kick us out of the sleep. */
		atomic_fetch_add(&sh->sleepers, 1);
		pthread_mutex_lock(&sh->lock);
		sh->wait_seq++;
		sh->recheck = 0;
		int n = collect(sh, epfd, events, maxevents, 0);
		int recheck = sh->recheck;
		pthread_mutex_unlock(&sh->lock);

		int tmo = n ? 0 : timeout < 0 ? -1 : timeout == 0 ? 0 : sys_ms_left(deadline);
		if (recheck && (tmo < 0 || tmo > CONN_PENDING_RECHECK_MS))
			tmo = CONN_PENDING_RECHECK_MS;
		/* A signal mask is the application's to apply while it waits: with
		 * one, go straight to the real wait. A set whose sockets all carry
		 * their bytes over TCP (a server whose clients are all plain, its
		 * listener in the set) does not spin either: nothing the spin looks
		 * at comes sooner than the kernel's wake-up, which plain TCP waits for
		 * too. Nor does a round after a wake-up that brought nothing (a
		 * device's look, every millisecond or so while idle): nothing
		 * happened that an answer could follow. */
		struct look l = {sh, epfd, events + n, maxevents - n};
		int m = sigmask || quiet || !atomic_load_explicit(&sh->serving, memory_order_relaxed)
				? 0
				: conn_busy_wait(look_now, &l, tmo, dev_polls(atomic_load(&sh->waker)));
		if (m == CONN_LOOK_NEWS) {
			atomic_fetch_sub(&sh->sleepers, 1);
			continue;
		}
		/* A handler that ran while we spun interrupts the wait, as it
		 * would have interrupted the kernel's. */
		if (!m && !n && signal_caught()) {
			atomic_fetch_sub(&sh->sleepers, 1);
			errno = EINTR;
			r = -1;
			break;
		}
		int doze = !m && tmo;
		/* A nested set's device is ours to watch too. */
		const struct dev_ops *nw = epoll_nested_waker();
		if (doze && nw && sh->wake_in < 0 && !atomic_load(&sh->nested)) {
			pthread_mutex_lock(&sh->lock);
			wake_watch(sh, nw);
			pthread_mutex_unlock(&sh->lock);
		}
		const struct dev_ops *waker = atomic_load(&sh->waker);
		/* After a round that brought nothing, the device's interval grows:
		 * how long that round took (a preempted one on a busy machine) is
		 * no sign that anything happened. */
		if (doze && waker && !quiet)
			waker->wake_soon(began);
		if (doze) {
			/* Going to sleep: every registration must be armed first.
			 * Counted before: what another thread leaves unarmed after
			 * this collect must wake us. */
			atomic_fetch_add(&sh->dozers, 1);
			pthread_mutex_lock(&sh->lock);
			/* Made before a fork, the set watches the parent's wake
			 * descriptor: a child watches its own too. */
			if (waker && sh->wake_in >= 0 && sh->wake_in != waker->wake_fd())
				wake_watch(sh, waker);
			n = collect(sh, epfd, events, maxevents, 1);
			recheck = sh->recheck;
			pthread_mutex_unlock(&sh->lock);
			if (n)
				tmo = 0;
			else if (recheck && (tmo < 0 || tmo > CONN_PENDING_RECHECK_MS))
				tmo = CONN_PENDING_RECHECK_MS;
		}
		if (!m && kernel_look_due(sh, n, maxevents, sigmask)) {
			/* A handler that runs from the last look on kicks the set,
			 * so the sleep returns and the wait reports EINTR. */
			if (tmo && signal_sleep_begin(kick_signal, sh))
				m = -1, errno = EINTR;
			else
				m = kernel_look(sh, epfd, events + n, maxevents - n, tmo, sigmask);
			if (tmo)
				signal_sleep_end();
		}
		if (doze)
			atomic_fetch_sub(&sh->dozers, 1);
		slept |= doze;
		atomic_fetch_sub(&sh->sleepers, 1);
		if (m < 0) {
			r = n ? n : -1;
			break;
		}
		struct sifted f = {0};
		int kept = sift(sh, events, n, m, &f);
		if (f.own)
			kept += serve(sh, epfd, events + kept, maxevents - kept, 0);
		if (f.other)
			kept += serve_other(f.other, epfd, events + kept, maxevents - kept);
		r = kept;
		if (kept || tmo == 0 || (timeout > 0 && sys_now_ns() >= deadline))
			break;
		/* Woken for a handler (its kick), or a handler ran meanwhile. */
		if (signal_caught()) {
			errno = EINTR;
			r = -1;
			break;
		}
		if (f.foreign && !f.own && foreign_pause(deadline, sigmask) < 0) {
			r = -1;
			break;
		}
		quiet = 1;
	}
	/* Back to the application: what the sleep armed and nothing rang is
	 * taken back. Not before: a wait that sleeps again at once (a spurious
	 * wake-up) needs those arms, and taking them back would arm them for good
	 * at its next sleep. */
	if (slept) {
		int e = errno;
		pthread_mutex_lock(&sh->lock);
		unarm_dozed(sh);
		pthread_mutex_unlock(&sh->lock);
		errno = e;
	}
	return r;
}

/* A new set has its state from the start, so that every number it gets names
 * the same (dup_track follows dup, dup2, dup3 and F_DUPFD), whichever comes
 * first: the copy or the first registration. Nothing is made inside a signal
 * handler, whose interrupted code may hold the pool's lock: such a set is
 * found later by its marker (shadow_find). */
static int shadow_made(int epfd)
{
	if (epfd >= 0 && usmc_active() && !sys_in_signal()) {
		struct epshadow *sh = shadow_new(epfd);
		if (sh)
			epoll_shadow_put(&sh->o);
	}
	return epfd;
}

int epoll_create(int size)
{
	return shadow_made(real.epoll_create(size));
}

int epoll_create1(int flags)
{
	return shadow_made(real.epoll_create1(flags));
}

/* The set is watched by another epoll set (or by poll): from now on the kernel
 * must see it readable whenever it has something to report, and nothing may
 * wait unarmed for a wait in it to look. */
void epoll_shadow_nest(struct obj *o)
{
	struct epshadow *sh = shadow_of(o);

	if (!sh || atomic_exchange(&sh->nested, 1) || !atomic_load(&sh->started))
		return;
	/* What waits on its ready list unarmed is armed now, and the set made
	 * readable if one of them has something to report: not by what fired
	 * before (the kick of its start), which is taken in first. */
	int news = 0;
	pthread_mutex_lock(&sh->lock);
	harvest(sh);
	const struct dev_ops *waker = atomic_load(&sh->waker);
	if (waker) {
		if (sh->wake_in >= 0)
			real.epoll_ctl(sh->ifd, EPOLL_CTL_DEL, sh->wake_in, NULL);
		sh->wake_in = -1;
		atomic_store(&nested_waker, waker);
	}
	pthread_mutex_lock(&sh->ready_lock);
	for (struct epreg *r = sh->ready; r; r = r->ready_next) {
		struct conn_stamp seen;
		short want = reg_want(r);
		conn_stamp(r->s, want, &seen);
		conn_arm(r->s, r->fd, want);
		if ((!r->unarmed || !reg_unchanged(r, &seen)) &&
		    conn_revents(r->s, r->fd, want, reg_tcp_state(r)))
			news = 1;
	}
	pthread_mutex_unlock(&sh->ready_lock);
	pthread_mutex_unlock(&sh->lock);
	if (news)
		kick(sh);
}

/* An accelerated listener joined the set: siblings accepting on its socket may
 * ask us for proposals while we wait in it. Edge-triggered: a set inherited
 * across fork names the parent's socket, which must not keep waking the child. */
static void watch_handoff(int epfd)
{
	struct epshadow *sh = shadow_get(epfd);
	int hfd = handoff_fd();

	if (!sh)
		return;
	pthread_mutex_lock(&sh->lock);
	if (!sh->handoff && hfd >= 0 && shadow_start(sh, epfd) == 0) {
		struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = HANDOFF_MARK};
		sh->handoff = real.epoll_ctl(sh->ifd, EPOLL_CTL_ADD, hfd, &ev) == 0;
	}
	pthread_mutex_unlock(&sh->lock);
	epoll_shadow_put(&sh->o);
}

FDTAB_WRAP(int, epoll_ctl, fd, (int epfd, int op, int fd, struct epoll_event *ev),
	   (epfd, op, fd, ev))
{
	/* Registered before connect(): what the connection becomes decides where its
	 * events come from, so a fresh socket needs its state now. */
	struct obj *o = op == EPOLL_CTL_ADD ? fdtab_get_made(fd) : fdtab_get(fd);
	struct usock *s = sock_of(o);
	/* One reading decides: a connect() in another thread may move the mode on
	 * while the kernel registers the socket. */
	int m = s ? atomic_load(&s->mode) : MODE_PLAIN, r;

	if (!o)
		return real.epoll_ctl(epfd, op, fd, ev);
	if ((m != MODE_SHM && m != MODE_PENDING) || (op != EPOLL_CTL_DEL && !ev)) {
		r = real.epoll_ctl(epfd, op, fd, ev);
		int e = errno;
		if (r == 0 && s && op == EPOLL_CTL_ADD && conn_listening(s))
			watch_handoff(epfd);
		if (r == 0 && op == EPOLL_CTL_ADD && o->kind == OBJ_EPOLL) {
			epoll_shadow_nest(o);
			/* A wait in this set may be the only one the process makes: it
			 * must be ours, to watch what the nested set's sleeps would
			 * have, for a device that wakes nobody by itself. */
			struct epshadow *outer = dev_wakes_none() ? shadow_get(epfd) : NULL;
			if (outer) {
				pthread_mutex_lock(&outer->lock);
				shadow_start(outer, epfd);
				pthread_mutex_unlock(&outer->lock);
				epoll_shadow_put(&outer->o);
			}
		}
		if (r == 0 && m == MODE_NEW) {
			early_note(s, epfd, op, fd, ev);
			/* That connect() may have looked for early registrations before
			 * this one was noted: then it is moved here. */
			if (atomic_load(&s->mode) != MODE_NEW)
				epoll_sock_settled(s);
		}
		obj_put(o);
		errno = e;
		return r;
	}
	struct epshadow *sh = shadow_get(epfd);
	if (!sh) {
		obj_put(o);
		errno = ENOMEM;
		return -1;
	}
	r = accel_ctl(sh, epfd, s, op, fd, ev);
	epoll_shadow_put(&sh->o);
	obj_put(o);
	return r;
}

enum { CALL_WAIT, CALL_PWAIT, CALL_PWAIT2 };

/* The kernel's wait, made as the application made it (epoll_wait is not
 * epoll_pwait to a seccomp filter). */
static int kernel_wait(int call, int epfd, struct epoll_event *events, int maxevents, int timeout,
		       const struct timespec *ts, const sigset_t *sigmask)
{
	if (call == CALL_WAIT)
		return real.epoll_wait(epfd, events, maxevents, timeout);
	if (call == CALL_PWAIT2)
		return real.epoll_pwait2(epfd, events, maxevents, ts, sigmask);
	return real.epoll_pwait(epfd, events, maxevents, timeout, sigmask);
}

static int wait_common(int call, int epfd, struct epoll_event *events, int maxevents,
		       int timeout, const struct timespec *ts, const sigset_t *sigmask);

/* A wait on a set that has started (sh, looked at without a reference). */
static __attribute__((noinline)) int wait_started(int epfd, struct epoll_event *events,
						  int maxevents, int timeout, const sigset_t *sigmask)
{
	struct obj *o = fdtab_get(epfd);
	struct epshadow *sh = shadow_of(o);

	if (!sh) {
		/* Closed meanwhile: the kernel says what it says. */
		if (o)
			obj_put(o);
		return real.epoll_pwait(epfd, events, maxevents, timeout, sigmask);
	}
	int r = shadow_wait(sh, epfd, events, maxevents, timeout, sigmask);
	epoll_shadow_put(&sh->o);
	return r;
}

/* The kernel's wait returned m events of which one looks like a marker: ours,
 * another set's of this process, or another process's. Sifted; when nothing
 * is left, waits again for the rest of the time (deadline), in the set that has
 * started if it was ours. */
static __attribute__((noinline)) int wait_marked(int epfd, struct epoll_event *events,
						 int maxevents, int m, int timeout,
						 uint64_t deadline, const sigset_t *sigmask)
{
	struct obj *o = fdtab_get(epfd);
	struct epshadow *sh = shadow_of(o);
	struct sifted f = {0};

	if (o && !sh)
		obj_put(o);
	int n = sift(sh, events, 0, m, &f);
	if (f.other && !sh && !sys_in_signal() && fdtab_alias(epfd, &f.other->o) == 0) {
		/* The number is one more of that set's: waited on as such. */
		epoll_shadow_put(&f.other->o);
		f.own = 1;
	} else if (f.other) {
		n += serve_other(f.other, epfd, events + n, maxevents - n);
	}
	if (sh)
		epoll_shadow_put(&sh->o);
	if (n)
		return n;
	if (timeout > 0) {
		timeout = sys_ms_left(deadline);
		if (!timeout && !f.own)
			return 0;
	} else if (!timeout && !f.own) {
		return 0;
	}
	if (f.foreign && !f.own && foreign_pause(deadline, sigmask) < 0)
		return -1;
	return wait_common(sigmask ? CALL_PWAIT : CALL_WAIT, epfd, events, maxevents, timeout,
			   NULL, sigmask);
}

/* Every wait on every epoll descriptor comes here. A set that has started (an
 * accelerated socket joined it) is waited on by shadow_wait. Any other, or a
 * number the table does not know, by the kernel; a set that starts meanwhile
 * wakes such a wait through its marker (shadow_start kicks it), and the wait
 * looks again as a started set's. Whatever the kernel returns is sifted, so no
 * marker of ours or anyone's reaches the application: for a set with nothing
 * accelerated in it, that is the one cost, a test of each event's data. timeout
 * is in ms; ts is epoll_pwait2's, used as given. */
static int wait_common(int call, int epfd, struct epoll_event *events, int maxevents,
		       int timeout, const struct timespec *ts, const sigset_t *sigmask)
{
	/* A look without a reference, only at whether the set started: a set's
	 * memory stays a set's (obj.h), and the wait takes one if so. */
	_Atomic(struct obj *) *slot = fdtab_slot(epfd);
	struct epshadow *sh = slot ? shadow_of(atomic_load_explicit(slot, memory_order_acquire))
				   : NULL;

	if (sh && maxevents > 0 && atomic_load_explicit(&sh->started, memory_order_acquire))
		return wait_started(epfd, events, maxevents, timeout, sigmask);
	uint64_t deadline = timeout > 0 ? sys_now_ns() : 0;
	int m = kernel_wait(call, epfd, events, maxevents, timeout, ts, sigmask);

	for (int i = 0; i < m; i++)
		if (events[i].data.u64 >> 48 == MARK_TAG)
			return wait_marked(epfd, events, maxevents, m, timeout,
					   deadline + (ts ? (uint64_t)ts->tv_sec * 1000000000ull +
								    (uint64_t)ts->tv_nsec
							  : (uint64_t)timeout * 1000000ull),
					   sigmask);
	return m;
}

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
	return wait_common(CALL_WAIT, epfd, events, maxevents, timeout, NULL, NULL);
}

int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout,
		const sigset_t *sigmask)
{
	return wait_common(CALL_PWAIT, epfd, events, maxevents, timeout, NULL, sigmask);
}

int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
		 const struct timespec *timeout, const sigset_t *sigmask)
{
	int ms = -1;

	if (!real.epoll_pwait2) {
		errno = ENOSYS;
		return -1;
	}
	if (timeout) {
		uint64_t ns = (uint64_t)timeout->tv_sec * 1000000000ull + (uint64_t)timeout->tv_nsec;
		ms = ns / 1000000ull > 0x7fffffff ? 0x7fffffff : (int)((ns + 999999) / 1000000ull);
	}
	return wait_common(CALL_PWAIT2, epfd, events, maxevents, ms, timeout, sigmask);
}
