/* Readiness for poll, select and epoll: what the rings say merged with what the
 * TCP socket says (it carries no data, only FIN, RST and errors), and the arms
 * that ask the peer to ring our doorbell while an event loop sleeps. */
#include "conn.h"

#include "conn_int.h"

short conn_poll_prepare(struct usock *s, short events)
{
	short e = (short)(events & (POLLIN | POLLPRI | POLLRDHUP));

	if (events & POLLIN)
		e |= POLLRDHUP;
	if ((events & POLLOUT) && (!s->connected || writes_to_tcp(s)))
		e |= POLLOUT;
	return e;
}

short conn_tcp_state(struct usock *s, int fd, short seen)
{
	if (s->connected) {
		/* It carries no data: while nothing happened on it and our writes
		 * go to the ring, it is writable and nothing else. */
		if (!atomic_load(&s->tcp_event) && !writes_to_tcp(s))
			return POLLOUT | POLLWRNORM;
		/* A watch that saw the FIN knows the rest from its edges, until we
		 * write to the socket or shut it down: what can follow is an RST,
		 * which brings an error, and an error goes with the read that
		 * reports it, so only the kernel knows whether it is still there.
		 * A peer whose end was an RST is asked about too: the RST came
		 * before the word, and the watch may not have told yet. */
		if ((seen & POLLRDHUP) && !(seen & POLLERR) && !atomic_load(&s->tcp_sent) &&
		    !atomic_load(&s->shut_wr) && !atomic_load(&s->shut_rd) && !peer_sent_rst(s))
			return (short)((seen & (POLLIN | POLLPRI | POLLRDHUP | POLLHUP)) | POLLOUT |
				       POLLWRNORM);
	}
	struct pollfd pf = {fd, POLLIN | POLLOUT | POLLRDHUP | POLLPRI, 0};
	if (real.poll(&pf, 1, 0) < 0)
		return 0;
	return pf.revents;
}

void conn_note_tcp_event(struct usock *s)
{
	atomic_store(&s->tcp_event, 1);
}

/* Input as poll reports it, on a copy view() took: SO_RCVLOWAT bytes, an urgent
 * byte at our cursor not counting unless it is inline (tcp_poll()), and POLLPRI
 * while an urgent byte that arrived is unread. -1: a cursor broke. */
static short rx_ready(struct usock *s, struct ring_end *rx)
{
	/* SO_RCVLOWAT, at most what the ring holds, which no more can join. */
	uint64_t n, need = rcv_target(s, rx->size);
	int64_t drop = 0;
	short r = 0;

	if (ring_avail(rx, &n) < 0 || (urg_pending(rx) && (drop = urg_update(s, rx, 0)) < 0))
		return -1;
	n -= (uint64_t)drop;
	if (ring_urg_live(rx)) {
		if (rx->urg - 1 == rx->pos && !s->oobinline)
			need++;
		if (urg_state(s, rx) == URG_VALID)
			r |= POLLPRI;
	}
	if (n >= need)
		r |= POLLIN | POLLRDNORM;
	return r;
}

/* A copy of our producer's end as a write would find it: with the limit the
 * peer's receive buffer sets now, which a write takes up only when it needs
 * the room. */
static void tx_view(struct usock *s, struct ring_end *tx)
{
	if (tx_limited(s))
		ring_limit(tx, tx_limit_of(s, tx, tx_base(s)));
}

short conn_revents(struct usock *s, int fd, short events, short tcp)
{
	short r;
	uint64_t n;
	struct ring_end tx, rx;

	if (tcp & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))
		atomic_store(&s->tcp_event, 1);
	if (!s->connected && (tcp & POLLOUT) && !(tcp & POLLERR))
		s->connected = 1;
	if (mode_of(s) == MODE_PENDING)
		conn_pending_check(s, fd);
	if (!conn_accel(s) || !s->connected)
		return tcp;
	if ((tcp & (POLLIN | POLLRDHUP)) && !(tcp & POLLERR) && reset_if_peer_died(s, fd)) {
		struct pollfd pf = {fd, POLLIN | POLLRDHUP | POLLPRI, 0};
		tcp = real.poll(&pf, 1, 0) == 1 ? pf.revents : 0;
	}
	/* As after an RST: the stream ended, and nothing can be written any more
	 * (the dropped socket itself would say writable). A peer the device found
	 * gone for good is about to be: a read resets the connection. */
	if (atomic_load(&s->peer_end) == PEER_END_RESET || lost_unended(s))
		tcp = (short)((tcp & ~(POLLOUT | POLLWRNORM)) | POLLIN | POLLRDNORM | POLLRDHUP |
			      POLLHUP);
	r = (short)(tcp & (POLLERR | POLLHUP | POLLRDHUP | POLLIN | POLLPRI));
	/* The peer raises its flag just before its FIN leaves: report the half-close
	 * as soon as we can see it, like TCP does once the FIN is queued. */
	if (atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_acquire) & RING_PF_SHUT_WR)
		r |= POLLIN | POLLRDHUP;
	if (r & POLLIN)
		r |= POLLRDNORM;
	/* A direction another thread is working on counts as ready: that
	 * thread's operation may leave it either way, as another thread's read
	 * may take the bytes the kernel reported, and the caller looks again. */
	unsigned busy = view(s, &tx, &rx, 0);
	short in = busy & VIEW_BUSY(HOLD_RX) ? POLLIN | POLLRDNORM : rx_ready(s, &rx);
	if (in < 0) {
		conn_abort(s, fd);
		r |= POLLERR;
	} else {
		r |= in;
	}
	tx_view(s, &tx);
	if (writes_to_tcp(s)) {
		r |= (short)(tcp & (POLLOUT | POLLWRNORM));
	} else if (busy & VIEW_BUSY(HOLD_TX)) {
		r |= POLLOUT | POLLWRNORM;
	} else if (ring_space(&tx, &n) < 0) {
		conn_abort(s, fd);
		r |= POLLERR;
	} else if (writable(s, &tx, n)) {
		r |= POLLOUT | POLLWRNORM;
	}
	if (ext_of(s))
		r |= conn_ext->revents(s);
	return (short)(r & (events | POLLERR | POLLHUP | POLLNVAL));
}

int conn_arm(struct usock *s, int fd, short events)
{
	struct ring_end tx, rx;

	(void)fd;
	if (!s->connected)
		return 0;
	/* Urgent data comes as bytes do, in the peer's ring; an extension's
	 * events ring as bytes do too, whatever the caller waits for. */
	arm_bell(s, events & POLLPRI || ext_of(s) ? events | POLLIN : events);
	/* The extension's news, posted before the arm was seen, rang nobody. */
	if (ext_of(s) && conn_ext->revents(s))
		return 1;
	unsigned busy = view(s, &tx, &rx, 0);
	/* As for conn_revents(): busy counts as ready. */
	if (((events & (POLLIN | POLLPRI)) && (busy & VIEW_BUSY(HOLD_RX))) ||
	    ((events & POLLOUT) && (busy & VIEW_BUSY(HOLD_TX))))
		return 1;
	if (((events & POLLIN) && eof_possible(s)) ||
	    ((events & (POLLIN | POLLPRI)) && (rx_ready(s, &rx) & events)))
		return 1;
	tx_view(s, &tx);
	return shm_ready(s, &tx, &rx, (short)(events & POLLOUT)) != 0;
}

void conn_stamp(struct usock *s, short events, struct conn_stamp *st)
{
	*st = (struct conn_stamp){0};
	if (s->connected && conn_accel(s)) {
		if (events & (POLLIN | POLLRDHUP | POLLPRI))
			st->rx_prod = atomic_load_explicit(&s->rx.sh->prod, memory_order_acquire);
		/* Room grows as the consumer moves, and at an attach that widened
		 * a window a writer found full. */
		if (events & POLLOUT)
			st->tx_cons = atomic_load_explicit(&s->tx.sh->cons, memory_order_acquire) +
				      atomic_load_explicit(&s->tx_grown, memory_order_relaxed);
		uint32_t f = atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_acquire);
		st->ends = (f & RING_PF_SHUT_WR ? CONN_END_FIN : 0) |
			   (peer_sent_rst(s) ? CONN_END_RST : 0);
		if (ext_of(s))
			st->ext = conn_ext->stamp(s);
	}
	if (atomic_load(&s->peer_gone))
		st->ends |= CONN_END_GONE;
}

void conn_disarm(struct usock *s, short events)
{
	/* An epoll registration relies on the arm staying in place. */
	if (!conn_accel(s) || s->regs)
		return;
	if (events & (POLLIN | POLLPRI)) {
		ring_disarm(&s->rx.sh->cons_wait);
		atomic_store_explicit(&s->rx.sh->cons_how, 0, memory_order_relaxed);
	}
	if (events & POLLOUT) {
		ring_disarm(&s->tx.sh->prod_wait);
		atomic_store_explicit(&s->tx.sh->prod_how, 0, memory_order_relaxed);
	}
}

void conn_arm_wait_begin(struct usock *s)
{
	atomic_fetch_add(&s->arm_waits, 1);
}

void conn_arm_wait_end(struct usock *s)
{
	atomic_fetch_sub(&s->arm_waits, 1);
}

uint32_t conn_arm_gen(struct usock *s)
{
	return atomic_load_explicit(&s->rx.sh->cons_wait, memory_order_relaxed);
}

int conn_unarm(struct usock *s, uint32_t gen)
{
	int done = 0;

	/* A waiter counts itself before it arms (both sequentially consistent):
	 * one counted too late for us arms after our look, so a new generation
	 * fails the exchange or follows it. The socket's lock keeps the end from
	 * being shared with other processes meanwhile (conn_share takes it too);
	 * one busy is left alone. Not the direction's lock: a readiness look in
	 * another thread takes a direction whose lock is held for one a read is
	 * working on, and would report input that is not there. */
	if (pthread_mutex_trylock(&s->lock) != 0)
		return 0;
	if (!s->hold && conn_attached(s) && !atomic_load(&s->arm_waits))
		done = atomic_compare_exchange_strong(&s->rx.sh->cons_wait, &gen, gen + 1);
	pthread_mutex_unlock(&s->lock);
	return done;
}
