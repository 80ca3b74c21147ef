/* Signalling, as smc_cdc.c does for the kernel: once a cursor moved, the peer is
 * woken on its futex or its doorbell, whichever it sleeps on; our own doorbell is
 * armed for the peer to ring, and emptied before its rings fill it. */
#include "conn.h"

#include <limits.h>
#include <linux/futex.h>

#include "../dev/dev.h"
#include "conn_int.h"
#include "hooks.h"
#include "stats.h"
#include "sys.h"

static void ring_peer(struct usock *s)
{
	atomic_fetch_add_explicit(&s->tx.sh->prod_bells, 1, memory_order_release);
	s->dev->doorbell_ring(&s->seg, s->bell);
	stat_add(STAT_DOORBELLS, 1);
}

/* A doorbell holds a few hundred rings (one byte each) before the peer's next
 * ring fails, which would leave an edge-triggered watcher unwoken. The count is
 * the peer's to write: one that lies only makes us empty the doorbell more
 * often, or fills it so that its own rings go unheard. */
#define BELL_DRAIN_AT 32u

/* A doorbell end joins a connection (s->seg is set). Kept from the segment's
 * connection before, it may hold rings meant for that one: they count as rung
 * for this one, so the doorbell is emptied early enough, and short connections
 * on a reused segment need not empty it at all. */
void bell_take(struct usock *s, int bell)
{
	uint32_t unread = s->seg.bell_unread < BELL_DRAIN_AT ? s->seg.bell_unread : BELL_DRAIN_AT;

	s->dev = s->seg.arena->dev;
	s->bell = bell;
	atomic_store_explicit(&s->bells_drained, 0u - unread, memory_order_relaxed);
	if (s->dev->bell_route)
		s->dev->bell_route(&s->seg, bell, &s->peer_lost);
}

void conn_bell_release(struct usock *s)
{
	if (s->bell >= 0 && s->seg.arena && s->dev->bell_unroute)
		s->dev->bell_unroute(&s->seg, s->bell);
}

/* Wakes a waiter the way it asked for: its futex, its doorbell, or both when a
 * blocked call and an epoll registration wait at once. */
void wake(struct usock *s, _Atomic uint32_t *how, _Atomic uint32_t *kick)
{
	uint32_t h = atomic_load_explicit(how, memory_order_relaxed);

	if (h & RING_WAKE_FUTEX) {
		atomic_fetch_add_explicit(kick, 1, memory_order_release);
		/* All: processes sharing the end after fork may each wait. */
		futex(kick, FUTEX_WAKE, INT_MAX, NULL);
		stat_add(STAT_DOORBELLS, 1);
	}
	if (h & RING_WAKE_BELL || !(h & RING_WAKE_FUTEX))
		ring_peer(s);
}

#define BELL_EMPTYING 0x80000000u

void conn_bell_wait_begin(struct usock *s)
{
	for (;;) {
		uint32_t v = atomic_load(&s->bell_users);
		/* The emptying under way may take the ring this sleep is for. A
		 * signal handler's poll may have interrupted that very emptying,
		 * which cannot end before the handler does: it goes on. */
		if ((v & BELL_EMPTYING) && !sys_in_signal()) {
			__builtin_ia32_pause();
			continue;
		}
		if (atomic_compare_exchange_weak(&s->bell_users, &v, v + 1))
			return;
	}
}

void conn_bell_wait_end(struct usock *s)
{
	atomic_fetch_sub(&s->bell_users, 1);
}

void conn_bell_clear(struct usock *s, const void *except)
{
	uint32_t none = 0;

	if (s->bell < 0)
		return;
	/* Not under a thread asleep on it in poll: it empties it when it wakes,
	 * and it is woken by any ring, so the doorbell cannot fill meanwhile. */
	if (atomic_compare_exchange_strong(&s->bell_users, &none, BELL_EMPTYING)) {
		/* Read before emptying: rings counted after this may be emptied
		 * too, and so are counted twice, which only makes the next
		 * emptying early. */
		if (s->rx.sh)
			atomic_store_explicit(
				&s->bells_drained,
				atomic_load_explicit(&s->rx.sh->prod_bells, memory_order_acquire),
				memory_order_relaxed);
		s->dev->doorbell_clear(s->bell);
		atomic_fetch_and(&s->bell_users, ~BELL_EMPTYING);
	}
	if (s->regs)
		epoll_sock_rang(s, except);
}

void conn_bell_rang(struct usock *s, const void *except)
{
	if (s->bell < 0 || !conn_accel(s))
		return;
	uint32_t n = atomic_load_explicit(&s->rx.sh->prod_bells, memory_order_acquire);
	if (n - atomic_load_explicit(&s->bells_drained, memory_order_relaxed) >= BELL_DRAIN_AT)
		conn_bell_clear(s, except);
}

/* Asks the peer to ring our doorbell for events. */
void arm_bell(struct usock *s, short events)
{
	if (events & POLLIN) {
		atomic_fetch_or_explicit(&s->rx.sh->cons_how, RING_WAKE_BELL, memory_order_relaxed);
		ring_arm(&s->rx.sh->cons_wait);
	}
	if (events & POLLOUT) {
		atomic_fetch_or_explicit(&s->tx.sh->prod_how, RING_WAKE_BELL, memory_order_relaxed);
		ring_arm(&s->tx.sh->prod_wait);
	}
}
