/* Sending, as smc_tx.c does for the kernel: bytes go into the ring, or to the
 * TCP socket once the ring cannot take them any more. */
#include "conn.h"

#include <errno.h>

#include "conn_int.h"
#include "hooks.h"
#include "stats.h"

#define PUBLISH_CHUNK (16u << 10)

static ssize_t plain_sendmsg(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
	return real.sendmsg(fd, &mh, flags);
}

/* The part of iov after skip bytes, in at most max entries. */
static int iov_rest(const struct iovec *iov, int iovcnt, size_t skip, struct iovec *out, int max)
{
	int k = 0;

	for (int i = 0; i < iovcnt && k < max; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		out[k].iov_base = (char *)iov[i].iov_base + skip;
		out[k++].iov_len = iov[i].iov_len - skip;
		skip = 0;
	}
	return k;
}

void tx_limit(struct usock *s, uint64_t base)
{
	s->peer_window = atomic_load_explicit(&s->tx.sh->cons_window, memory_order_relaxed);
	ring_limit(&s->tx, tx_limit_of(s, &s->tx, base));
}

/* A send; oob is constant in each of conn_send()'s two instances, so that a
 * send that is not urgent carries none of the urgent one's work. more: the
 * rest of a piece sent short (conn_send_more()). crc: conn_send_sum()'s. */
static inline __attribute__((always_inline)) ssize_t
send_body(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags, const int oob,
	  int more, uint32_t *crc)
{
	size_t want = iov_total(iov, iovcnt), done = 0;
	uint64_t deadline = 0;
	int waited = 0;
	int nb = s->nonblock || (flags & MSG_DONTWAIT), counted_full = 0;

	op_lock(s, HOLD_TX);
	for (;;) {
		if (mode_of(s) == MODE_PENDING && s->connected)
			conn_pending_check(s, fd);
		if (!conn_accel(s))
			goto tcp;
		/* Attached: the window of a pending connection no longer holds.
		 * Widened here, under the writer's lock, which readiness copies the
		 * ring under (the attach is seen under another). */
		if (s->tx_pending_limit && conn_attached(s)) {
			s->tx_pending_limit = 0;
			tx_limit(s, tx_base(s));
		}
		if (!check_connected(s, fd)) {
			struct pollfd pf = {fd, POLLOUT, 0};
			if (real.poll(&pf, 1, 0) == 1 && (pf.revents & (POLLERR | POLLHUP)))
				goto tcp; /* the connect failed: let the kernel say how */
			if (nb) {
				errno = EAGAIN;
				goto fail;
			}
			real.poll(&pf, 1, -1);
			continue;
		}
		if (writes_to_tcp(s)) {
			if (lost_unended(s))
				conn_abort(s, fd);
			/* Before the kernel answers for a dead peer's socket. */
			if (atomic_load(&s->peer_gone))
				reset_if_peer_died(s, fd);
			/* Once part of the call went out, the call ends short and
			 * leaves the kernel's error (the peer's reset, our shutdown)
			 * to the next one, as TCP's send does: asked now, the kernel
			 * would give ECONNRESET to a send whose short count hides it,
			 * and the next call would find only EPIPE. */
			if (done)
				goto sent;
			goto tcp;
		}
		/* The consumer's cursor is read only when what it said last is not
		 * room enough; so is the peer's receive buffer, as TCP leaves a
		 * window it advertised open when the peer shrinks its buffer. */
		uint64_t space = ring_room(&s->tx);
		if (space < want - done) {
			if (tx_limited(s) && atomic_load_explicit(&s->tx.sh->cons_window,
								  memory_order_relaxed) != s->peer_window)
				tx_limit(s, tx_base(s));
			if (ring_space(&s->tx, &space) < 0) {
				conn_abort(s, fd);
				errno = ECONNRESET;
				goto fail;
			}
		}
		if (space && done < want) {
			size_t n = want - done < space ? want - done : (size_t)space;
			/* Publish large writes in pieces, so the reader copies out one
			 * piece while we copy in the next. */
			if (n > PUBLISH_CHUNK)
				n = PUBLISH_CHUNK;
			ring_write_sum(&s->tx, iov, iovcnt, done, n, crc);
			/* The urgent mark goes with the last byte of the call, and
			 * with the last before each wait for room, as tcp_sendmsg()
			 * marks what it has queued whenever it pushes. */
			int urgent = oob && (done + n == want || n == space);
			if (urgent)
				ring_mark_urgent(&s->tx);
			ring_publish(&s->tx);
			note_cpu(&s->tx.sh->prod_cpu);
			done += n;
			stat_add(STAT_BYTES_SENT, n);
			notify_data(s);
			if (urgent)
				urg_signal(s);
			if (done == want)
				break;
			continue;
		}
		if (done == want)
			break;
		if (!counted_full++)
			stat_add(STAT_RING_FULL, 1);
		if (more)
			break;
		if (nb) {
			if (mode_of(s) == MODE_PENDING)
				atomic_store_explicit(&s->tx_window_hit, 1, memory_order_relaxed);
			if (done)
				break;
			errno = EAGAIN;
			goto fail;
		}
		if (!waited++) {
			deadline = sys_deadline(&s->sndtimeo);
			signal_wait_begin();
		}
		int w = conn_wait(s, fd, POLLOUT, deadline, deadline != 0);
		if (w == -ETIMEDOUT || w == -EINTR) {
			if (done)
				break;
			errno = w == -ETIMEDOUT ? EAGAIN : EINTR;
			goto fail;
		}
	}
sent:
	op_unlock(s, HOLD_TX);
	stat_add(STAT_SEND_CALLS, 1);
	return (ssize_t)done;
tcp:
	op_unlock(s, HOLD_TX);
	/* Relaxed: a plain store, on every send of a connection that fell back. */
	atomic_store_explicit(&s->tcp_sent, 1, memory_order_relaxed);
	if (done) {
		/* Fell back in the middle of a blocking write: the rest goes on TCP. */
		if (nb || done == want)
			return (ssize_t)done;
		struct iovec rest[64];
		int k = iov_rest(iov, iovcnt, done, rest, 64);
		ssize_t r = plain_sendmsg(fd, rest, k, flags);
		return r > 0 ? (ssize_t)done + r : (ssize_t)done;
	}
	return plain_sendmsg(fd, iov, iovcnt, flags);
fail:
	op_unlock(s, HOLD_TX);
	return -1;
}

ssize_t conn_send(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags)
{
	if (!(flags & MSG_OOB))
		return send_body(s, fd, iov, iovcnt, flags, 0, 0, NULL);
	stat_add(STAT_OOB_CALLS, 1);
	/* A client whose attach is pending may yet fall back and send what the
	 * ring holds on TCP, which would know nothing of the mark in it. */
	conn_settle(s, fd);
	return send_body(s, fd, iov, iovcnt, flags, 1, 0, NULL);
}

ssize_t conn_send_sum(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags,
		      uint32_t *crc)
{
	return send_body(s, fd, iov, iovcnt, flags, 0, 0, crc);
}

ssize_t conn_send_more(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags)
{
	return send_body(s, fd, iov, iovcnt, flags, 0, 1, NULL);
}

int conn_outq(struct usock *s, int fd, int *out)
{
	uint64_t space;
	struct ring_end tx, rx;

	view(s, &tx, &rx, 1);
	if (ring_space(&tx, &space) < 0) {
		conn_abort(s, fd);
		errno = ECONNRESET;
		return -1;
	}
	/* What the reader's buffer took counts as received and acknowledged,
	 * what lies past it as not sent yet: on loopback TCP acknowledges what
	 * arrives at once, and SIOCOUTQ and SIOCOUTQNSD both come to that. */
	uint64_t unsent = tx_unsent(&tx);
	*out = unsent > 0x7fffffff ? 0x7fffffff : (int)unsent;
	return 0;
}
