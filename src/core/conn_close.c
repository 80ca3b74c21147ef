/* Ending a connection, as smc_close.c does for the kernel: shutdown, close, a
 * listener's last close, and telling from a peer's FIN whether its process died
 * with bytes of ours unread, which TCP would have answered with RST. */
#include "conn.h"

#include <sched.h>
#include <stdio.h>

#include "../dev/dev.h"
#include "addr.h"
#include "config.h"
#include "conn_int.h"
#include "hooks.h"
#include "registry.h"
#include "segment.h"
#include "shortlived.h"
#include "socktab.h"

/* A peer process that ended without closing its socket (killed, or exiting
 * with it open) leaves the close to its kernel, which holds none of the bytes
 * of ours still unread in its ring and so sends FIN where TCP sends RST. It is
 * told by that FIN with no close or shutdown flag of the peer's, bytes of ours
 * unread, and the peer's channel hung up. Our socket is then reset as the RST
 * would have reset it: connect(AF_UNSPEC) makes the kernel drop it with
 * ECONNRESET (and send the RST the peer's kernel answers for nothing). Returns
 * whether the connection is so reset. A FIN that neither flag nor hang-up
 * explains in time (a peer that closed in a way the library did not see) stays
 * a FIN, without waiting again. */
int reset_if_peer_died(struct usock *s, int fd)
{
	int end = atomic_load(&s->peer_end);

	if (end != PEER_END_UNJUDGED)
		return end == PEER_END_RESET;
	if (!s->seg.lgr || s->hold || !(atomic_load(&s->tcp_event) || atomic_load(&s->peer_gone)) ||
	    atomic_load_explicit(&s->tx.sh->prod, memory_order_acquire) ==
		    atomic_load_explicit(&s->tx.sh->cons, memory_order_acquire))
		return 0;
	for (int ms = 0;; ms++) {
		uint32_t pf = atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_acquire);
		uint32_t cf = atomic_load_explicit(&s->tx.sh->cons_flags, memory_order_acquire);
		if ((pf & (RING_PF_SHUT_WR | RING_PF_CLOSING | RING_F_HANDED)) ||
		    (cf & (RING_CF_CLOSED | RING_F_HANDED)))
			return 0;
		/* How long the peer's death takes to show depends on the device
		 * (dev_ops.death_wait_ms); a peer that only shut down raises its
		 * flag as soon. */
		if (ms == s->dev->death_wait_ms) {
			atomic_store(&s->peer_end, PEER_END_FIN);
			return 0;
		}
		if (lgr_hangs_up(s->seg.lgr, 1))
			break;
	}
	end = PEER_END_UNJUDGED;
	if (atomic_compare_exchange_strong(&s->peer_end, &end, PEER_END_RESET)) {
		struct sockaddr none = {.sa_family = AF_UNSPEC};
		/* The system call itself: other threads may be reading the socket,
		 * which the kernel allows, and a thread sanitizer's connect() would
		 * take the disconnect for a new descriptor racing with them. */
		syscall(SYS_connect, fd, &none, sizeof(none));
		atomic_store(&s->peer_gone, 1);
	}
	return atomic_load(&s->peer_end) == PEER_END_RESET;
}

int conn_shutdown(struct usock *s, int fd, int how)
{
	int wr = how == SHUT_WR || how == SHUT_RDWR;

	/* A fallback would send what was written through TCP, which no byte may
	 * follow the FIN into. */
	if (wr && s->connected)
		conn_settle(s, fd);
	/* The FIN leaves first: a reader that sees the flag finds it already. */
	int r = real.shutdown(fd, how);

	if (r < 0)
		return r;
	if (wr) {
		op_lock(s, HOLD_TX);
		if (conn_accel(s) && !s->shut_wr) {
			s->shut_wr = 1;
			atomic_fetch_or_explicit(&s->tx.sh->prod_flags, RING_PF_SHUT_WR | RING_PF_FIN,
						 memory_order_release);
			notify_data(s);
		}
		op_unlock(s, HOLD_TX);
	}
	if (how == SHUT_RD || how == SHUT_RDWR)
		s->shut_rd = 1;
	/* A socket shut both ways answers further data with RST: make the peer's
	 * writes go to TCP, where its kernel will get exactly that. */
	if (conn_accel(s) && s->shut_rd && s->shut_wr) {
		atomic_fetch_or_explicit(&s->rx.sh->cons_flags, RING_CF_CLOSED, memory_order_release);
		notify_space(s);
	}
	return 0;
}

/* Is a socket with this inode still open in some process? Only asked when a
 * listener that was inherited across fork() is closed, never inside a signal
 * handler (a handler's close leaves it to fdtab_release_later()). */
static int inode_open(unsigned long ino)
{
	static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	char line[512];

	for (int t = 0; t < 2; t++) {
		FILE *f = fopen(tables[t], "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned long i = 0;
			/* sl local rem st tx:rx tr:when retr uid timeout inode */
			if (sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %lu", &i) == 1 &&
			    i == ino) {
				fclose(f);
				return 1;
			}
		}
		fclose(f);
	}
	return 0;
}

void conn_listener_closed(struct usock *s, unsigned long ino)
{
	if (!s->registered || (s->forked && inode_open(ino)))
		return;
	for (int i = 0; i < dev_count; i++) {
		const char *name = lgr_server_name(dev_list[i]);
		if (*name)
			dev_list[i]->reg_remove((struct sockaddr *)&s->bound, name);
	}
	lgr_server_listener_gone();
	s->registered = 0;
}

/* What the end of a client's accelerated connection says of its destination's
 * connections (shortlived.h). Its cursors count the bytes each way, its
 * connect() was a handshake timeout before its attach deadline, and the peer's
 * core is the one it last published a send from (none: not ours; on another
 * kernel, never ours). An end other processes held too (s->hold) is not
 * judged: its bytes are theirs as well. */
static void learn_lifetime(struct usock *s)
{
	struct addr d;
	uint64_t now = sys_now_ns();
	int cpu = sched_getcpu();

	if (!cfg.short_conn)
		return;
	addr_from_sockaddr(&d, (const struct sockaddr *)&s->dst);
	shortlived_ended(&d, s->tx.pos + s->rx.pos,
			 now - (s->deadline_ns - (uint64_t)cfg.handshake_ms * 1000000ull),
			 s->rx.pos && cpu >= 0 && (s->dev->flags & DEV_F_ONE_KERNEL) &&
				 atomic_load_explicit(&s->rx.sh->prod_cpu, memory_order_relaxed) ==
					 (uint32_t)cpu,
			 now);
}

int conn_close(struct usock *s, int fd)
{
	int m = mode_of(s), shared = s->hold != NULL;
	uint64_t avail = 0;

	socktab_closed(fd);
	epoll_sock_closed(s);
	if (s->hold) {
		struct holders *h = s->hold;
		if ((m == MODE_PENDING || m == MODE_SHM) && holders_drop(h) > 0) {
			/* Another process still holds this end: only our copies go,
			 * and with them the extension's state, which is ours. */
			ext_teardown(s);
			conn_bell_release(s);
			bell_close(&s->bell);
			lgr_seg_forget(&s->seg);
			m = MODE_PLAIN;
		} else {
			/* The last holder ends the connection from the latest state. */
			holders_peek(h, HOLD_TX, &s->tx);
			holders_peek(h, HOLD_RX, &s->rx);
		}
		s->hold = NULL;
		holders_unmap(h);
		real.close(s->hold_fd);
	}
	if (m == MODE_PENDING && !s->connected) {
		uint32_t st = SEG_PENDING;
		if (atomic_compare_exchange_strong(&s->seg.hdr->state, &st, SEG_ABANDONED))
			registry_settled((struct sockaddr *)&s->dst);
		lgr_withdraw(s->seg.lgr, s->conn_id);
		shm_teardown(s, 0);
	} else if (m == MODE_PENDING || m == MODE_SHM) {
		if (m == MODE_SHM && !s->server && !shared)
			learn_lifetime(s);
		/* Unread bytes make TCP answer a close with RST; do what it would. */
		s->closing_fin = !s->abortive;
		if (ring_avail(&s->rx, &avail) < 0 || avail) {
			struct linger lg = {1, 0};
			real.setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			s->closing_fin = 0;
		} else if (m == MODE_PENDING && s->closing_fin && !tcp_has_something(fd)) {
			/* A server that has not read our proposal yet holds a copy of
			 * the socket, and the kernel would keep our FIN until it lets
			 * go: send it now, as TCP's close does. (Bytes a plain peer
			 * sent make the close an RST, which nothing must precede.) */
			real.shutdown(fd, SHUT_WR);
		}
		/* A reader spinning for our next bytes keeps spinning through the
		 * kernel's close, after which the flags that end the stream come. */
		atomic_fetch_or_explicit(&s->tx.sh->prod_flags, RING_PF_CLOSING, memory_order_relaxed);
		return 1;
	}
	atomic_store(&s->mode, MODE_PLAIN);
	return 0;
}

void conn_close_finish(struct usock *s)
{
	int m = mode_of(s);

	/* The kernel closed our socket, so its FIN (or RST) has left: the flag
	 * tells the reader which, and it takes its EOF from the flag alone. As on
	 * TCP, TIME_WAIT stays on the side that closed first. */
	atomic_fetch_or_explicit(&s->tx.sh->prod_flags,
				 RING_PF_SHUT_WR | (s->closing_fin ? RING_PF_FIN : RING_PF_RST),
				 memory_order_release);
	atomic_fetch_or_explicit(&s->rx.sh->cons_flags, RING_CF_CLOSED, memory_order_release);
	notify_data(s);
	notify_space(s);
	shm_teardown(s, m == MODE_SHM && !atomic_load(&s->peer_gone));
	atomic_store(&s->mode, MODE_PLAIN);
}
