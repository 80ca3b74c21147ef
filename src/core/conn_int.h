/* What the pieces of a connection (conn*.c) share. The helpers on the paths every
 * send, receive and readiness look takes are inline here, so that keeping each
 * concept in its own file costs those paths no call. */
#ifndef USMC_CONN_INT_H
#define USMC_CONN_INT_H

#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "sys.h"

/* ------------------------------------------------------------ conn.c */

static inline int mode_of(struct usock *s)
{
	return atomic_load_explicit(&s->mode, memory_order_acquire);
}

/* A data operation's hold on one direction: this process's lock, then, once the
 * connection is shared after fork, the holders' lock with the state loaded. */
static inline void op_lock(struct usock *s, enum hold_dir d)
{
	struct ring_end *e = d == HOLD_TX ? &s->tx : &s->rx;

	pthread_mutex_lock(d == HOLD_TX ? &s->tx_lock : &s->rx_lock);
	if (s->hold)
		holders_lock(s->hold, d, e);
}

static inline void op_unlock(struct usock *s, enum hold_dir d)
{
	if (s->hold)
		holders_unlock(s->hold, d, d == HOLD_TX ? &s->tx : &s->rx);
	pthread_mutex_unlock(d == HOLD_TX ? &s->tx_lock : &s->rx_lock);
}

/* The socket's extension state (conn_ext_ops), or NULL. */
static inline void *ext_of(struct usock *s)
{
	return atomic_load_explicit(&s->ext, memory_order_acquire);
}

/* The extension lets go of the connection's shared memory (conn_ext_ops). */
static inline void ext_teardown(struct usock *s)
{
	if (ext_of(s))
		conn_ext->teardown(s);
}

/* A direction view() left alone: another operation holds its lock. */
#define VIEW_BUSY(d) (1u << (d))

unsigned view(struct usock *s, struct ring_end *tx, struct ring_end *rx, int wait);
void rings_setup(struct usock *s);
void shm_teardown(struct usock *s, int clean);
void conn_abort(struct usock *s, int fd);

/* ------------------------------------------------------------ conn_setup.c */

static inline int check_connected(struct usock *s, int fd)
{
	if (s->connected)
		return 1;
	struct pollfd pf = {fd, POLLOUT, 0};
	if (real.poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT) && !(pf.revents & POLLERR)) {
		int err = 0;
		socklen_t l = sizeof(err);
		if (real.getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && !err)
			s->connected = 1;
	}
	return s->connected;
}

int tcp_has_something(int fd);

/* ------------------------------------------------------------ conn_wake.c */

static inline long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
	/* Not FUTEX_PRIVATE: the word lives in memory shared with another process. */
	return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

void wake(struct usock *s, _Atomic uint32_t *how, _Atomic uint32_t *kick);

/* Producer side: data was published or the stream ended. */
static inline void notify_data(struct usock *s)
{
	if (ring_should_ring(&s->tx.sh->cons_wait, &s->tx.last_rung))
		wake(s, &s->tx.sh->cons_how, &s->tx.sh->prod_kick);
}

/* Consumer side: room was made, or nobody will read any more. */
static inline void notify_space(struct usock *s)
{
	if (ring_should_ring(&s->rx.sh->prod_wait, &s->rx.last_rung))
		wake(s, &s->rx.sh->prod_how, &s->rx.sh->cons_kick);
}

void bell_take(struct usock *s, int bell);
void arm_bell(struct usock *s, short events);

/* ------------------------------------------------------------ conn_wait.c */

/* The core this side last ran on, for the peer's spin: nobody spins against a
 * peer on its own core. */
static inline void note_cpu(_Atomic uint32_t *mine)
{
	int cpu = sched_getcpu();

	if (cpu >= 0 && atomic_load_explicit(mine, memory_order_relaxed) != (uint32_t)cpu)
		atomic_store_explicit(mine, (uint32_t)cpu, memory_order_relaxed);
}

/* One wait of a blocking call. The call watches for signal handlers from its
 * first wait on (signal_wait_begin() there, once): a handler that runs between
 * two waits of one call interrupts it as one during a sleep does. */
int conn_wait(struct usock *s, int fd, short events, uint64_t deadline, int has_timeout);

/* ------------------------------------------------------------ conn_ready.c, conn_close.c */

/* Writes go to the kernel socket once shared memory cannot take them any more:
 * after our own shutdown, or when the peer closed or died. The kernel then gives
 * exactly TCP's answer (EPIPE, SIGPIPE, RST from the peer's closed socket). */
static inline int writes_to_tcp(struct usock *s)
{
	return s->shut_wr || atomic_load(&s->peer_gone) || atomic_load(&s->peer_lost) ||
	       (atomic_load_explicit(&s->tx.sh->cons_flags, memory_order_acquire) &
		RING_CF_CLOSED);
}

/* The peer's end was an RST: its close said so, or its process died with bytes
 * of ours unread and we reset the connection in its stead. */
static inline int peer_sent_rst(struct usock *s)
{
	return (atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_acquire) & RING_PF_RST) ||
	       atomic_load(&s->peer_end) == PEER_END_RESET;
}

static inline int eof_possible(struct usock *s)
{
	return s->shut_rd || atomic_load(&s->tcp_event) || atomic_load(&s->peer_lost) ||
	       (atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_acquire) &
		RING_PF_SHUT_WR);
}

/* The device found the peer gone for good (dev_ops.bell_route), and its stream
 * has not ended otherwise: no FIN, RST or close will ever come (a virtual machine
 * killed or frozen), so the connection is aborted as a reset one would be. */
static inline int lost_unended(struct usock *s)
{
	return atomic_load(&s->peer_lost) && !atomic_load(&s->tcp_event) &&
	       !(atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_acquire) &
		 RING_PF_SHUT_WR);
}

/* What the producer may have outstanding before the limits the program set: the
 * ring, or the window of a client whose attach is pending. */
static inline uint64_t tx_base(struct usock *s)
{
	return mode_of(s) == MODE_PENDING && cfg.pending_window < s->tx.size ? cfg.pending_window
									  : s->tx.size;
}

/* The peer's receive buffer, as tx's producer knows it: what the peer
 * published, or the kernel's default. */
static inline uint64_t tx_window(const struct ring_end *tx)
{
	uint32_t w = atomic_load_explicit(&tx->sh->cons_window, memory_order_relaxed);

	return w ? w : sys_tcp_rcvbuf();
}

/* What of tx lies past the peer's receive buffer, as of the producer's last
 * look at the consumer: what TCP would still hold unsent (SIOCOUTQNSD). */
static inline uint64_t tx_unsent(const struct ring_end *tx)
{
	uint64_t out = tx->pos - tx->peer, w = tx_window(tx);

	return out > w ? out - w : 0;
}

/* The program set something that bounds the producer below the ring. */
static inline int tx_limited(const struct usock *s)
{
	return s->sndbuf_eff || s->notsent_lowat;
}

/* The limit of tx (ours, or a copy) from base: once the program set its send
 * buffer, that buffer and the peer's receive buffer at most, about what TCP
 * holds in flight between the two sockets (unset, TCP's send buffer grows past
 * any ring, and bounds nothing); with TCP_NOTSENT_LOWAT, that much unsent at
 * most, as a write waits then. */
static inline uint64_t tx_limit_of(struct usock *s, const struct ring_end *tx, uint64_t base)
{
	uint64_t w = tx_window(tx), l = base;

	if (s->sndbuf_eff && (uint64_t)s->sndbuf_eff + w < l)
		l = (uint64_t)s->sndbuf_eff + w;
	if (s->notsent_lowat && w + (uint64_t)s->notsent_lowat < l)
		l = w + (uint64_t)s->notsent_lowat;
	return l;
}

/* Sets our producer's limit from base (under the direction's lock). */
void tx_limit(struct usock *s, uint64_t base);

/* Writable, space being the room tx has: a third of it free; once the program
 * bounded it, as tcp_poll() asks __sk_stream_is_writeable(): no more than two
 * thirds of the send buffer unsent, less than half of TCP_NOTSENT_LOWAT. */
static inline int writable(const struct usock *s, const struct ring_end *tx, uint64_t space)
{
	if (!tx_limited(s))
		return space * 3 >= tx->limit;
	uint64_t unsent = tx_unsent(tx);
	return space && (!s->sndbuf_eff || 3 * unsent <= 2 * (uint64_t)s->sndbuf_eff) &&
	       (!s->notsent_lowat || 2 * unsent < (uint64_t)s->notsent_lowat);
}

/* Bytes a read waits for: SO_RCVLOWAT, or what it asked for if fewer, and at
 * least one (tcp_recvmsg()'s target, sock_rcvlowat()). */
static inline size_t rcv_target(const struct usock *s, size_t want)
{
	size_t t = s->rcvlowat > 1 ? (size_t)s->rcvlowat : 1;

	return want && want < t ? want : t;
}

/* Events satisfied by shared memory alone (no system call), as tx and rx (ours,
 * under the operation's lock, or a view) show them. */
static inline short shm_ready(struct usock *s, struct ring_end *tx, struct ring_end *rx,
			      short events)
{
	uint64_t n;
	short r = 0;

	if (!s->connected)
		return 0;
	if (events & POLLIN) {
		if (ring_avail(rx, &n) < 0 || n || eof_possible(s))
			r |= POLLIN;
	}
	if (events & POLLOUT) {
		if (writes_to_tcp(s) || ring_space(tx, &n) < 0 || writable(s, tx, n))
			r |= POLLOUT;
	}
	return r;
}

int reset_if_peer_died(struct usock *s, int fd);

/* ------------------------------------------------------------ conn_tx.c, conn_rx.c */

static inline size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t t = 0;

	for (int i = 0; i < iovcnt; i++)
		t += iov[i].iov_len;
	return t;
}

/* ------------------------------------------------------------ conn_urg.c */

/* Our receive buffer, as getsockopt(SO_RCVBUF) reports it. */
static inline uint64_t conn_rcv_window(const struct usock *s)
{
	return s->rcvbuf_eff ? (uint64_t)s->rcvbuf_eff : sys_tcp_rcvbuf();
}

/* The producer published an urgent cursor rx has not taken. */
static inline int urg_news(const struct ring_end *rx)
{
	return atomic_load_explicit(&rx->sh->prod_urg, memory_order_relaxed) != rx->urg;
}

/* Urgent data may concern a read of rx (ring_avail() just read the producer's
 * line, which holds the urgent cursor too): a newer cursor, or a byte not
 * passed yet. A connection that never saw any pays one test. */
static inline int urg_pending(const struct ring_end *rx)
{
	return __builtin_expect((atomic_load_explicit(&rx->sh->prod_urg, memory_order_relaxed) |
				 rx->urg) != 0, 0) &&
	       (urg_news(rx) || ring_urg_live(rx));
}

/* Takes a newer urgent cursor into rx: the bytes its arrival drops (ring.h),
 * consumed when commit (rx is ours, under its lock), else only passed (a
 * copy); -1 for a forged cursor. */
int64_t urg_update(struct usock *s, struct ring_end *rx, int commit);
/* How the urgent byte stands, as TCP's urg_data: none (or passed), announced
 * but not arrived, arrived, read with MSG_OOB. */
enum { URG_NONE, URG_NOTYET, URG_VALID, URG_READ };
int urg_state(struct usock *s, const struct ring_end *rx);
/* FIONREAD of avail bytes: up to the mark when the urgent byte is there. */
uint64_t urg_inq(struct usock *s, const struct ring_end *rx, uint64_t avail);
/* Urgent data went out: SIGURG to the peer's socket owner. */
void urg_signal(struct usock *s);

/* ------------------------------------------------------------ conn_share.c */

void mark_handed(struct usock *s);
#endif
