/* Receiving, as smc_rx.c does for the kernel: bytes come out of the ring, and
 * its end is told from the peer's flags, or from the TCP socket when they are
 * not enough. */
#include "conn.h"

#include <errno.h>

#include "conn_int.h"
#include "hooks.h"
#include "stats.h"

static ssize_t plain_recvmsg(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
	return real.recvmsg(fd, &mh, flags);
}

/* A read, or a peek when peek; constant in each of conn_recv()'s two instances,
 * so that a read carries none of a peek's bookkeeping. crc: conn_recv_sum()'s
 * (a read's). */
static inline __attribute__((always_inline)) ssize_t
recv_body(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags, const int peek,
	  uint32_t *crc)
{
	size_t want = iov_total(iov, iovcnt), done = 0;
	/* off: what a peek looked past already (a read consumes it instead). */
	uint64_t deadline = 0, avail, off = 0;
	int waited = 0;
	int nb = s->nonblock || (flags & MSG_DONTWAIT);
	/* What the call waits for: a byte, unless MSG_WAITALL or SO_RCVLOWAT
	 * says more; a peek, which consumes nothing, no more than the ring can
	 * hold. */
	size_t target = 1;
	if (__builtin_expect((flags & MSG_WAITALL) || s->rcvlowat > 1, 0)) {
		target = (flags & MSG_WAITALL) && !peek ? want : rcv_target(s, want);
		if (peek && target > s->rx.size)
			target = s->rx.size;
	}

	op_lock(s, HOLD_RX);
	for (;;) {
		if (mode_of(s) == MODE_PENDING && s->connected)
			conn_pending_check(s, fd);
		if (!conn_accel(s))
			goto tcp;
		if (!check_connected(s, fd)) {
			if (nb) {
				errno = EAGAIN;
				goto fail;
			}
			struct pollfd pf = {fd, POLLOUT, 0};
			real.poll(&pf, 1, -1);
			if (pf.revents & (POLLERR | POLLHUP))
				goto tcp;
			continue;
		}
		int64_t drop = 0;
		if (ring_avail(&s->rx, &avail) < 0 ||
		    (urg_pending(&s->rx) && (drop = urg_update(s, &s->rx, 1)) < 0)) {
			conn_abort(s, fd);
			if (done)
				break;
			errno = ECONNRESET;
			goto fail;
		}
		avail -= (uint64_t)drop;
		off -= off < (uint64_t)drop ? off : (uint64_t)drop;
		avail -= off;
		/* Where the urgent byte stands from what this call looked at. */
		uint64_t mark = ring_urg_live(&s->rx) ? s->rx.urg - 1 - s->rx.pos - off : UINT64_MAX;
		if (want == 0 && (avail || nb))
			break; /* TCP: a zero-length read returns at once unless it must wait */
		if (avail && want) {
			/* Bytes of the server's say it attached: a client whose look
			 * for the attach came a moment too early takes note now,
			 * before its close could end the connection still pending,
			 * never counted as accelerated. */
			if (mode_of(s) == MODE_PENDING)
				conn_pending_check(s, fd);
			size_t n = want - done < avail ? want - done : (size_t)avail;
			if (mark < n) {
				/* A read stops at the urgent byte once it copied anything;
				 * one that starts there skips it, unless it is inline
				 * (tcp_recvmsg()). */
				if (mark == 0 && done)
					break;
				if (mark == 0 && !s->oobinline) {
					if (peek) {
						off++;
					} else {
						ring_consume(&s->rx, 1);
						stat_add(STAT_BYTES_RECV, 1);
					}
					continue;
				}
				if (mark)
					n = (size_t)mark;
			}
			ring_peek_sum(&s->rx, off, iov, iovcnt, done, n, crc);
			done += n;
			if (peek) {
				off += n;
			} else {
				ring_consume(&s->rx, n);
				note_cpu(&s->rx.sh->cons_cpu);
				stat_add(STAT_BYTES_RECV, n);
				/* Waking a writer for a sliver of room only to sleep
				 * again wastes two system calls: wait for a third. */
				if ((s->rx.size - (avail - n)) * 3 >= s->rx.size)
					notify_space(s);
			}
			if (done >= target || done == want)
				break;
			continue;
		}
		if (eof_possible(s)) {
			if (lost_unended(s)) {
				conn_abort(s, fd);
				if (done)
					break;
				errno = ECONNRESET;
				goto fail;
			}
			if (s->shut_rd)
				break;
			/* Bytes published before the flag are visible now; look again. */
			if (ring_avail(&s->rx, &avail) == 0 && avail > off)
				continue;
			/* A peer that ends with FIN sent it before it said so: EOF now,
			 * without asking the kernel. Without the mark, an RST may be
			 * coming: TCP decides. */
			if ((atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_acquire) &
			     (RING_PF_SHUT_WR | RING_PF_FIN)) == (RING_PF_SHUT_WR | RING_PF_FIN) &&
			    !atomic_load(&s->tcp_event))
				break;
			reset_if_peer_died(s, fd);
			char c;
			ssize_t r = real.recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
			if (r == 0)
				break;
			if (r > 0) {
				/* Payload on the TCP socket of an attached connection: the
				 * peer broke the protocol, and the stream cannot be trusted. */
				conn_abort(s, fd);
				if (done)
					break;
				errno = ECONNRESET;
				goto fail;
			}
			if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
				/* After its reset's error, a dropped socket is no longer
				 * connected; TCP's answers end of file. */
				if (done || (errno == ENOTCONN &&
					     atomic_load(&s->peer_end) == PEER_END_RESET))
					break;
				/* Consume the error from the kernel exactly once, as TCP does. */
				int e = errno;
				real.recv(fd, &c, 1, MSG_DONTWAIT);
				errno = e;
				goto fail;
			}
		}
		if (done >= target)
			break;
		if (nb) {
			if (done)
				break;
			errno = EAGAIN;
			goto fail;
		}
		if (!waited++) {
			deadline = sys_deadline(&s->rcvtimeo);
			signal_wait_begin();
		}
		int w = conn_wait(s, fd, POLLIN, deadline, deadline != 0);
		if (w == -ETIMEDOUT || w == -EINTR) {
			if (done)
				break;
			errno = w == -ETIMEDOUT ? EAGAIN : EINTR;
			goto fail;
		}
	}
	op_unlock(s, HOLD_RX);
	if (done)
		stat_add(STAT_RECV_CALLS, 1);
	return (ssize_t)done;
tcp:
	op_unlock(s, HOLD_RX);
	if (done)
		return (ssize_t)done;
	return plain_recvmsg(fd, iov, iovcnt, flags);
fail:
	op_unlock(s, HOLD_RX);
	return -1;
}

ssize_t conn_recv(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags)
{
	if (flags & MSG_OOB)
		return conn_recv_urg(s, fd, iov, iovcnt, flags, NULL);
	if (flags & MSG_PEEK)
		return recv_body(s, fd, iov, iovcnt, flags, 1, NULL);
	return recv_body(s, fd, iov, iovcnt, flags, 0, NULL);
}

ssize_t conn_recv_sum(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags,
		      uint32_t *crc)
{
	return recv_body(s, fd, iov, iovcnt, flags, 0, crc);
}

int conn_fionread(struct usock *s, int fd, int *out)
{
	uint64_t avail;
	struct ring_end tx, rx;

	view(s, &tx, &rx, 1);
	if (ring_avail(&rx, &avail) < 0 || (urg_pending(&rx) && urg_update(s, &rx, 0) < 0)) {
		conn_abort(s, fd);
		errno = ECONNRESET;
		return -1;
	}
	avail = urg_inq(s, &rx, rx.peer - rx.pos);
	*out = avail > 0x7fffffff ? 0x7fffffff : (int)avail;
	return 0;
}
