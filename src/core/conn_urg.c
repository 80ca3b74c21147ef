/* Urgent data (MSG_OOB), as TCP has it and SMC carries it. The last byte of an
 * urgent send is the urgent byte and the mark (tcp_sendmsg()'s snd_up); its
 * cursor travels in the producer's line (prod_urg, SMC's urg_curs). The reader
 * takes a newer cursor as tcp_check_urg() takes an urgent pointer, reads the
 * byte once with recv(MSG_OOB) (tcp_recv_urg(), smc_rx_recv_urg()), and a
 * normal read stops at the mark and, unless SO_OOBINLINE, skips the byte.
 * SIGURG comes from the sender, the one process that runs when the byte goes
 * out: the reader publishes its socket's owner in its line, and the sender
 * signals it once the link group's channel vouches for the process. */
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "../dev/dev.h"
#include "conn_int.h"
#include "stats.h"

/* ------------------------------------------------------------ the reader */

int64_t urg_update(struct usock *s, struct ring_end *rx, int commit)
{
	uint64_t urg, run;
	int r = ring_urg_news(rx, &urg, &run);

	if (r <= 0)
		return r;
	uint64_t drop = ring_urg_take(rx, urg, run);
	/* Inline, an urgent byte is a byte like any other: nothing drops. */
	if (!drop || s->oobinline)
		return 0;
	if (commit)
		ring_consume(rx, drop);
	else
		rx->pos += drop;
	return (int64_t)drop;
}

int urg_state(struct usock *s, const struct ring_end *rx)
{
	if (!ring_urg_live(rx))
		return URG_NONE;
	if (rx->urg_read)
		return URG_READ;
	/* Further from our cursor than our receive buffer holds, the byte would
	 * still be in the sender's send queue on TCP: announced, not arrived. */
	if (rx->urg - 1 - rx->pos >= conn_rcv_window(s))
		return URG_NOTYET;
	return URG_VALID;
}

uint64_t urg_inq(struct usock *s, const struct ring_end *rx, uint64_t avail)
{
	int st = urg_state(s, rx);

	/* tcp_inq(): up to the mark, once the urgent byte is there and out of
	 * line. */
	if (s->oobinline || st == URG_NONE || st == URG_NOTYET)
		return avail;
	return rx->urg - 1 - rx->pos;
}

/* The TCP socket is closed (reset, or dropped for a dead peer), and whether a
 * FIN came before: tcp_recv_urg() tells those apart. */
static int tcp_closed(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);

	return real.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) == 0 && ti.tcpi_state == TCP_CLOSE;
}

static int fin_came(struct usock *s)
{
	return (atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_acquire) & RING_PF_FIN) ||
	       atomic_load(&s->peer_end) != PEER_END_UNJUDGED;
}

ssize_t conn_recv_urg(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags,
		      int *msg_flags)
{
	uint64_t avail;
	ssize_t r = -1;
	int st;

	stat_add(STAT_OOB_CALLS, 1);
	op_lock(s, HOLD_RX);
	if (!conn_attached(s)) {
		/* No urgent byte can have come through the ring: the kernel says
		 * what TCP says then. */
		op_unlock(s, HOLD_RX);
		struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
		r = real.recvmsg(fd, &mh, flags);
		if (r >= 0 && msg_flags)
			*msg_flags = mh.msg_flags;
		return r;
	}
	if (ring_avail(&s->rx, &avail) < 0 || urg_update(s, &s->rx, 1) < 0) {
		conn_abort(s, fd);
		errno = ECONNRESET;
		goto out;
	}
	st = s->oobinline ? URG_NONE : urg_state(s, &s->rx);
	if (st == URG_NONE || st == URG_READ) {
		errno = EINVAL;
	} else if (tcp_closed(fd) && !fin_came(s)) {
		errno = ENOTCONN;
	} else if (st == URG_VALID) {
		unsigned char c;
		ring_peek(&s->rx, s->rx.urg - 1 - s->rx.pos, &(struct iovec){&c, 1}, 1, 0, 1);
		if (!(flags & MSG_PEEK))
			s->rx.urg_read = 1;
		r = iov_total(iov, iovcnt) ? 1 : 0;
		if (msg_flags)
			*msg_flags = MSG_OOB | (r ? 0 : MSG_TRUNC);
		for (int i = 0; r && !(flags & MSG_TRUNC) && i < iovcnt; i++)
			if (iov[i].iov_len) {
				*(unsigned char *)iov[i].iov_base = c;
				break;
			}
	} else if (s->shut_rd || fin_came(s) || tcp_closed(fd)) {
		/* Announced, but the stream ended before it: nothing will come. */
		r = 0;
	} else {
		/* Never waits, whatever the socket's blocking mode. */
		errno = EAGAIN;
	}
out:
	op_unlock(s, HOLD_RX);
	return r;
}

int conn_atmark(struct usock *s, int fd, int *out)
{
	uint64_t avail;
	struct ring_end tx, rx;

	view(s, &tx, &rx, 1);
	if (ring_avail(&rx, &avail) < 0 || urg_update(s, &rx, 0) < 0) {
		conn_abort(s, fd);
		errno = ECONNRESET;
		return -1;
	}
	*out = ring_urg_live(&rx) && rx.urg - 1 == rx.pos;
	return 0;
}

void conn_set_owner(struct usock *s, int type, pid_t id)
{
	pid_t me = sys_pid();

	/* The sender signals only this process or its group (see urg_signal());
	 * a thread, another process or another group is named as none of them. */
	s->sigurg = !id					     ? 0
		    : type == F_OWNER_PID && id == me	     ? me
		    : type == F_OWNER_PGRP && id == getpgrp() ? -me
							     : RING_SIGURG_UNNAMED;
	if (conn_accel(s))
		atomic_store_explicit(&s->rx.sh->cons_sigurg, s->sigurg, memory_order_relaxed);
}

/* ------------------------------------------------------------ the sender */

void urg_signal(struct usock *s)
{
	int32_t w = atomic_load_explicit(&s->tx.sh->cons_sigurg, memory_order_relaxed);

	if (!w)
		return;
	/* Pinned before it is checked: a process that exits meanwhile cannot
	 * pass its pid on to one the checks did not see. */
	pid_t claim = w == RING_SIGURG_UNNAMED ? 0 : w > 0 ? w : -w;
	int pfd = claim > 0 ? (int)syscall(SYS_pidfd_open, claim, 0) : -1;
	pid_t from = pfd >= 0 ? lgr_peer_pid(s->seg.lgr) : 0;
	long r = -1;

	int denied = 0;

	if (from && sys_descends(claim, from)) {
		pid_t g = w > 0 ? 0 : getpgid(claim);
		r = w > 0 ? syscall(SYS_pidfd_send_signal, pfd, SIGURG, NULL, 0)
			  : g > 0 ? kill(-g, SIGURG) : -1;
		denied = r && errno == EPERM;
	}
	/* A process gone by now counts as one nothing vouched for. */
	stat_add(!r ? STAT_SIGURG_SENT : denied ? STAT_SIGURG_DENIED : STAT_SIGURG_UNVERIFIED, 1);
	if (pfd >= 0)
		real.close(pfd);
}
