/* The socket's life, and what every stage of a connection does to it alike:
 * the locks a data operation holds, the rings as this end sees them, and tearing
 * the shared memory down. The stages themselves are in conn_*.c. */
#include "conn.h"

#include <string.h>

#include "accept.h"
#include "conn_int.h"
#include "segment.h"
#include "stats.h"

const struct conn_ext_ops *conn_ext;

struct usock *usock_new(int family, int nonblock)
{
	struct usock *s = obj_alloc(OBJ_SOCK, sizeof(*s));

	if (!s)
		return NULL;
	atomic_init(&s->mode, MODE_NEW);
	/* By value: every TCP socket, plain ones included, gets three, and a
	 * default mutex needs nothing pthread_mutex_init() would check. */
	s->lock = s->rx_lock = s->tx_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	s->family = family;
	s->nonblock = nonblock;
	s->bell = -1;
	s->accept_ep = -1;
	return s;
}

void usock_get(struct usock *s)
{
	atomic_fetch_add(&s->o.refs, 1);
}

void usock_put(struct usock *s)
{
	if (atomic_fetch_sub(&s->o.refs, 1) != 1)
		return;
	accept_forget(s);
	if (ext_of(s))
		conn_ext->release(s);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->rx_lock);
	pthread_mutex_destroy(&s->tx_lock);
	obj_free(&s->o);
}

void conn_set_limit(struct usock *s, int fd, enum conn_limit which, int v)
{
	static const int names[] = {SO_SNDBUF, SO_RCVBUF, SO_RCVLOWAT};
	socklen_t l = sizeof(v);

	/* The kernel doubles a buffer size and enforces a minimum, and caps
	 * SO_RCVLOWAT by the receive buffer: what it reports counts. */
	if (which == CONN_SNDBUF)
		s->sndbuf = v;
	else if (which == CONN_RCVBUF)
		s->rcvbuf = v;
	if (which != CONN_NOTSENT_LOWAT &&
	    real.getsockopt(fd, SOL_SOCKET, names[which], &v, &l) < 0)
		return;
	*(which == CONN_SNDBUF	   ? &s->sndbuf_eff
	  : which == CONN_RCVBUF   ? &s->rcvbuf_eff
	  : which == CONN_RCVLOWAT ? &s->rcvlowat
				   : &s->notsent_lowat) = v;
	if (!conn_accel(s) || which == CONN_RCVLOWAT)
		return;
	/* Taken for new writes: bytes already in the ring stay. */
	enum hold_dir d = which == CONN_RCVBUF ? HOLD_RX : HOLD_TX;
	op_lock(s, d);
	if (d == HOLD_TX) {
		tx_limit(s, tx_base(s));
	} else {
		/* The peer's writer, if it waits for room, may have more now. */
		atomic_store_explicit(&s->rx.sh->cons_window, (uint32_t)v, memory_order_relaxed);
		notify_space(s);
	}
	op_unlock(s, d);
}

/* How often a readiness look tries a direction's lock before it counts it busy:
 * another thread's look holds it for a few loads, an operation far longer. */
#define VIEW_TRIES 64

/* Copies one direction under its lock: current even when another holder moved
 * the cursors. Unless told to wait, a direction whose lock another operation
 * holds is not copied (VIEW_BUSY(d)): a signal handler's poll() may have
 * interrupted that very operation. A newer urgent cursor is taken on the way,
 * as TCP takes an urgent pointer when it arrives, not at the next read: what
 * its arrival drops depends on where the reader stands then. */
static unsigned view_end(struct usock *s, enum hold_dir d, struct ring_end *e, int wait)
{
	pthread_mutex_t *m = d == HOLD_TX ? &s->tx_lock : &s->rx_lock;
	uint64_t avail;

	if (wait) {
		pthread_mutex_lock(m);
	} else {
		int tries = 0;
		while (pthread_mutex_trylock(m) != 0) {
			if (++tries == VIEW_TRIES)
				return VIEW_BUSY(d);
			__builtin_ia32_pause();
		}
	}
	*e = d == HOLD_TX ? s->tx : s->rx;
	if (s->hold)
		holders_peek(s->hold, d, e);
	if (d == HOLD_RX && e->sh && urg_news(e)) {
		if (s->hold)
			holders_lock(s->hold, d, &s->rx);
		/* A broken cursor is left for the caller's own look to find. */
		if (ring_avail(&s->rx, &avail) == 0)
			urg_update(s, &s->rx, 1);
		*e = s->rx;
		if (s->hold)
			holders_unlock(s->hold, d, &s->rx);
	}
	pthread_mutex_unlock(m);
	return 0;
}

/* Readiness looks at copies of both directions; returns the busy ones. */
unsigned view(struct usock *s, struct ring_end *tx, struct ring_end *rx, int wait)
{
	return view_end(s, HOLD_TX, tx, wait) | view_end(s, HOLD_RX, rx, wait);
}

/* The rings as seen from this end: the client produces into ring 0 and consumes
 * ring 1, the server the other way round. */
void rings_setup(struct usock *s)
{
	struct seg_hdr *h = s->seg.hdr;
	int tx = s->server ? 1 : 0, rx = !tx;

	ring_end_init(&s->tx, &h->ring[tx], seg_ring_data(h, tx, s->seg.ring_size),
		      s->seg.ring_size[tx]);
	ring_end_init(&s->rx, &h->ring[rx], seg_ring_data(h, rx, s->seg.ring_size),
		      s->seg.ring_size[rx]);
	/* What was set before the connection existed. */
	if (s->sigurg)
		atomic_store_explicit(&s->rx.sh->cons_sigurg, s->sigurg, memory_order_relaxed);
	if (s->rcvbuf_eff)
		atomic_store_explicit(&s->rx.sh->cons_window, (uint32_t)s->rcvbuf_eff,
				      memory_order_relaxed);
}

/* Rings a peer may still make after we counted its rings for the last time
 * (one per wait word of ours it found armed): counted as unread all the same. */
#define BELL_LATE_RINGS 2u

/* clean: the connection ended by close, its doorbell holds nothing the next
 * connection on the segment could mistake, and both ends keep theirs. */
void shm_teardown(struct usock *s, int clean)
{
	int bell = s->bell;

	ext_teardown(s);
	/* What the peer sent on the channel for its extension goes too, used or
	 * not. */
	if (s->seg.hdr && s->seg.lgr && atomic_load(&s->seg.hdr->ext[!s->server]))
		lgr_ext_drop(s->seg.lgr, s->conn_id);
	conn_bell_release(s);
	/* A peer that closed says so in its line; one that was seen gone without
	 * that was killed, and its process may have taken its link group along. */
	if (s->seg.hdr && s->seg.lgr && s->rx.sh &&
	    (atomic_load(&s->peer_gone) || atomic_load(&s->tcp_event)) &&
	    !(atomic_load(&s->rx.sh->prod_flags) & RING_PF_SHUT_WR))
		lgr_peer_vanished(s->seg.lgr);

	if (!clean || !s->seg.hdr)
		bell_close(&s->bell);
	else if (s->rx.sh)
		s->seg.bell_unread = atomic_load_explicit(&s->rx.sh->prod_bells, memory_order_acquire) -
				     atomic_load_explicit(&s->bells_drained, memory_order_relaxed) +
				     BELL_LATE_RINGS;
	if (s->seg.hdr)
		lgr_seg_release(s, s->server ? LGR_SERVER : LGR_CLIENT, clean ? bell : -1);
	s->bell = -1;
	memset(&s->seg, 0, sizeof(s->seg));
}

/* Shared state broke its invariants: this connection is over. We get ECONNRESET
 * now; the peer gets our FIN at once, and the kernel's RST for anything it still
 * writes (its writes go to TCP from here on) or when we close (linger 0). */
void conn_abort(struct usock *s, int fd)
{
	struct linger lg = {1, 0};

	/* Ours, not the peer's death: its end needs no judging. */
	int unjudged = PEER_END_UNJUDGED;
	atomic_compare_exchange_strong(&s->peer_end, &unjudged, PEER_END_FIN);
	if (!atomic_exchange(&s->peer_gone, 1)) {
		stat_add(STAT_CONN_ABORT, 1);
		real.setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		real.shutdown(fd, SHUT_RDWR);
	}
	atomic_store(&s->tcp_event, 1);
	s->shut_wr = 1;
	atomic_fetch_or_explicit(&s->tx.sh->prod_flags, RING_PF_SHUT_WR, memory_order_release);
	atomic_fetch_or_explicit(&s->rx.sh->cons_flags, RING_CF_CLOSED, memory_order_release);
	/* Whoever sleeps on the other side should find out now, not by its FIN. */
	notify_data(s);
	notify_space(s);
}
