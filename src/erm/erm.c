/* A connection's ERM state, and the hooks through which the core reaches it
 * (conn_ext_ops): its readiness, its stamp, its teardown with the connection's
 * shared memory, and a forked child forgetting it.
 *
 * The state is made at the connection's first ERM call and stays attached to
 * the socket until the socket is freed, so that a call in another thread
 * holding the socket never finds it gone: a teardown only marks it dead and
 * lets go of what is shared. */
#include "erm.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../core/lgr.h"
#include "../core/sys.h"

/* How often a command looks at the peer's channel to learn that its process
 * ended: within this, a survivor's commands fail. */
#define PROBE_NS 100000000ull

static void *local_ring_new(void)
{
	void *p = mmap(NULL, ERM_LOCAL_CQ * sizeof(struct smc_rmem_compl_event),
		       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* locks: whether the state's locks are its own to destroy (not a forked
 * child's copies, which another thread of the parent may have held). */
static void state_free(struct erm_conn *e, int locks)
{
	if (e->area)
		munmap(e->area, ERM_AREA_SIZE);
	if (e->local)
		munmap(e->local, ERM_LOCAL_CQ * sizeof(struct smc_rmem_compl_event));
	free(e->mrs);
	free(e->sent);
	free(e->pmaps);
	if (locks) {
		pthread_mutex_destroy(&e->lock);
		pthread_mutex_destroy(&e->cq_lock);
	}
	free(e);
}

struct erm_conn *erm_get(struct usock *s, int fd)
{
	struct erm_conn *e = atomic_load_explicit(&s->ext, memory_order_acquire);

	if (e)
		return e;
	if (!conn_ext_usable(s, fd)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e || !(e->local = local_ring_new())) {
		free(e);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->cq_lock, NULL);
	e->s = s;
	e->side = s->server;
	e->conn_id = s->conn_id;
	e->lgr = s->seg.lgr;
	e->next_fd_index = 1;
	e->probed_ns = erm_coarse_ns();
	void *none = NULL;
	if (!atomic_compare_exchange_strong(&s->ext, &none, e)) {
		/* Another thread made it first. */
		state_free(e, 1);
		e = none;
	}
	return e;
}

uint64_t erm_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int erm_peer_alive(struct erm_conn *e)
{
	uint64_t now = erm_coarse_ns(), probe = now - e->probed_ns > PROBE_NS;

	if (probe)
		e->probed_ns = now;
	return !conn_ext_peer_ended(e->s, (int)probe);
}

/* ------------------------------------------------------------ hooks */

static struct erm_conn *state_of(struct usock *s)
{
	return atomic_load_explicit(&s->ext, memory_order_acquire);
}

static short hook_revents(struct usock *s)
{
	return erm_cq_pending(state_of(s)) ? POLLERR : 0;
}

static uint64_t hook_stamp(struct usock *s)
{
	struct erm_conn *e = state_of(s);
	struct erm_area *a = atomic_load_explicit(&e->area, memory_order_acquire);
	uint64_t v = atomic_load_explicit(&e->local_prod, memory_order_acquire);

	/* The sequence number at our cursor in the peer's events changes when
	 * the next one comes: untrusted, but only compared. */
	if (a) {
		uint64_t cons = atomic_load_explicit(&a->ev_cons, memory_order_relaxed);
		v += cons + atomic_load_explicit(&a->ev[cons % ERM_EVQ].seq, memory_order_acquire);
	}
	return v;
}

/* Every region goes from the peer's sight and what we mapped of its memory
 * goes; the completions already there stay readable. Marked dead first: a
 * command waiting for room in the peer's ring, holding the lock, gives up. A
 * call that looked before holds the lock, and the shared memory is there
 * until it lets go. */
static void hook_teardown(struct usock *s)
{
	struct erm_conn *e = state_of(s);

	if (atomic_exchange(&e->dead, 1))
		return;
	pthread_mutex_lock(&e->lock);
	erm_mr_revoke_all(e);
	erm_area_close_peer(e);
	pthread_mutex_unlock(&e->lock);
}

static void hook_release(struct usock *s)
{
	hook_teardown(s);
	state_free(atomic_exchange(&s->ext, NULL), 1);
}

/* A forked child holds a copy of the parent's state, whose locks another thread
 * of the parent may have held: it leaves them alone, and lets go of its copies
 * of the mappings (which are its own) without telling the peer anything. */
static void hook_forget(struct usock *s)
{
	struct erm_conn *e = atomic_exchange(&s->ext, NULL);

	erm_area_close_peer(e);
	for (uint32_t i = 0; i < e->nmrs; i++)
		if (e->mrs[i].alloc)
			erm_alloc_put(e->mrs[i].alloc);
	state_free(e, 0);
}

static const struct conn_ext_ops ops = {
	.revents = hook_revents,
	.stamp = hook_stamp,
	.teardown = hook_teardown,
	.release = hook_release,
	.forget = hook_forget,
};

void erm_init(void)
{
	conn_ext = &ops;
	erm_mem_init();
}
