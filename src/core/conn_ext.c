/* What a connection offers an extension of its protocol (ERM, src/erm): whether
 * it may share more memory with the peer, the writer's hold that orders its
 * work with the stream, the peer's wake-up, and whether the peer is still
 * there. The extension itself is reached through conn_ext (conn.h). */
#include "conn.h"

#include "conn_int.h"
#include "hooks.h"
#include "segment.h"

/* How long a wait for a pending attach sleeps between looks. */
#define SETTLE_LOOK_NS 100000

int conn_ext_usable(struct usock *s, int fd)
{
	/* A client not even connected by its deadline stays pending: not ours. */
	while (mode_of(s) == MODE_PENDING && sys_now_ns() < s->deadline_ns) {
		if (check_connected(s, fd))
			conn_pending_check(s, fd);
		if (mode_of(s) == MODE_PENDING)
			nanosleep(&(struct timespec){0, SETTLE_LOOK_NS}, NULL);
	}
	if (!conn_attached(s) || !s->seg.lgr || s->hold)
		return 0;
	/* An end that went to another process (fork, exec, a sibling's handoff)
	 * answers on a channel that may lead elsewhere. */
	uint32_t f = atomic_load(&s->tx.sh->prod_flags) | atomic_load(&s->rx.sh->cons_flags) |
		     atomic_load(&s->rx.sh->prod_flags) | atomic_load(&s->tx.sh->cons_flags);
	return !(f & RING_F_HANDED);
}

void conn_ext_lock(struct usock *s)
{
	op_lock(s, HOLD_TX);
}

void conn_ext_unlock(struct usock *s)
{
	op_unlock(s, HOLD_TX);
}

void conn_ext_notify(struct usock *s)
{
	notify_data(s);
}

void conn_ext_wake_local(struct usock *s)
{
	if (s->regs)
		epoll_sock_rang(s, NULL);
}

int conn_ext_peer_ended(struct usock *s, int probe)
{
	if (writes_to_tcp(s))
		return 1;
	if (!probe || !s->seg.lgr || !lgr_hangs_up(s->seg.lgr, 0))
		return 0;
	/* Its process ended, unless its end went to others (then the channel
	 * speaks for none of them). */
	if (!((atomic_load(&s->rx.sh->prod_flags) | atomic_load(&s->tx.sh->cons_flags)) &
	      RING_F_HANDED))
		atomic_store(&s->peer_gone, 1);
	return atomic_load(&s->peer_gone);
}
