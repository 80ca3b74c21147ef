#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../dev/dev.h"
#include "addr.h"
#include "accept.h"
#include "admit.h"
#include "config.h"
#include "handoff.h"
#include "hooks.h"
#include "registry.h"
#include "segment.h"
#include "socktab.h"
#include "stats.h"
#include "sys.h"

static const struct dev_ops *dev = &dev_lo;

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
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->rx_lock);
	pthread_mutex_destroy(&s->tx_lock);
	obj_free(&s->o);
}

static int mode_of(struct usock *s)
{
	return atomic_load_explicit(&s->mode, memory_order_acquire);
}

/* A data operation's hold on one direction: this process's lock, then, once the
 * connection is shared after fork, the holders' lock with the state loaded. */
static void op_lock(struct usock *s, enum hold_dir d)
{
	struct ring_end *e = d == HOLD_TX ? &s->tx : &s->rx;

	pthread_mutex_lock(d == HOLD_TX ? &s->tx_lock : &s->rx_lock);
	if (s->hold)
		holders_lock(s->hold, d, e);
}

static void op_unlock(struct usock *s, enum hold_dir d)
{
	if (s->hold)
		holders_unlock(s->hold, d, d == HOLD_TX ? &s->tx : &s->rx);
	pthread_mutex_unlock(d == HOLD_TX ? &s->tx_lock : &s->rx_lock);
}

#define VIEW_BUSY(d) (1u << (d))

/* Copies one direction under its lock: current even when another holder moved
 * the cursors. Unless told to wait, a direction whose lock another operation
 * holds is not copied (VIEW_BUSY(d)): a signal handler's poll() may have
 * interrupted that very operation. */
static unsigned view_end(struct usock *s, enum hold_dir d, struct ring_end *e, int wait)
{
	pthread_mutex_t *m = d == HOLD_TX ? &s->tx_lock : &s->rx_lock;

	if (wait)
		pthread_mutex_lock(m);
	else if (pthread_mutex_trylock(m) != 0)
		return VIEW_BUSY(d);
	*e = d == HOLD_TX ? s->tx : s->rx;
	if (s->hold)
		holders_peek(s->hold, d, e);
	pthread_mutex_unlock(m);
	return 0;
}

/* Readiness looks at copies of both directions; returns the busy ones. */
static unsigned view(struct usock *s, struct ring_end *tx, struct ring_end *rx, int wait)
{
	return view_end(s, HOLD_TX, tx, wait) | view_end(s, HOLD_RX, rx, wait);
}

static void ring_peer(struct usock *s)
{
	atomic_fetch_add_explicit(&s->tx.sh->prod_bells, 1, memory_order_release);
	dev->doorbell_ring(s->bell);
	stat_add(STAT_DOORBELLS, 1);
}

/* A doorbell holds a few hundred rings (one byte each) before the peer's next
 * ring fails, which would leave an edge-triggered watcher unwoken. The count is
 * the peer's to write: one that lies only makes us empty the doorbell more
 * often, or fills it so that its own rings go unheard. */
#define BELL_DRAIN_AT 32u
/* Rings a peer may still make after we counted its rings for the last time
 * (one per wait word of ours it found armed): counted as unread all the same. */
#define BELL_LATE_RINGS 2u

/* A doorbell end joins a connection (s->seg is set). Kept from the segment's
 * connection before, it may hold rings meant for that one: they count as rung
 * for this one, so the doorbell is emptied early enough, and short connections
 * on a reused segment need not empty it at all. */
static void bell_take(struct usock *s, int bell)
{
	uint32_t unread = s->seg.bell_unread < BELL_DRAIN_AT ? s->seg.bell_unread : BELL_DRAIN_AT;

	s->bell = bell;
	atomic_store_explicit(&s->bells_drained, 0u - unread, memory_order_relaxed);
}

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
	/* Not FUTEX_PRIVATE: the word lives in memory shared with another process. */
	return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

/* Wakes a waiter the way it asked for: its futex, its doorbell, or both when a
 * blocked call and an epoll registration wait at once. */
static void wake(struct usock *s, _Atomic uint32_t *how, _Atomic uint32_t *kick)
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

/* Producer side: data was published or the stream ended. */
static void notify_data(struct usock *s)
{
	if (ring_should_ring(&s->tx.sh->cons_wait, &s->tx.last_rung))
		wake(s, &s->tx.sh->cons_how, &s->tx.sh->prod_kick);
}

/* Consumer side: room was made, or nobody will read any more. */
static void notify_space(struct usock *s)
{
	if (ring_should_ring(&s->rx.sh->prod_wait, &s->rx.last_rung))
		wake(s, &s->rx.sh->prod_how, &s->rx.sh->cons_kick);
}

/* The rings as seen from this end: the client produces into ring 0 and consumes
 * ring 1, the server the other way round. */
static void rings_setup(struct usock *s)
{
	struct seg_hdr *h = s->seg.hdr;
	int tx = s->server ? 1 : 0, rx = !tx;

	ring_end_init(&s->tx, &h->ring[tx], seg_ring_data(h, tx, s->seg.ring_size),
		      s->seg.ring_size[tx]);
	ring_end_init(&s->rx, &h->ring[rx], seg_ring_data(h, rx, s->seg.ring_size),
		      s->seg.ring_size[rx]);
}

/* clean: the connection ended by close, its doorbell holds nothing the next
 * connection on the segment could mistake, and both ends keep theirs. */
static void shm_teardown(struct usock *s, int clean)
{
	int bell = s->bell;

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
static void conn_abort(struct usock *s, int fd)
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

static uint64_t ring_for(int requested, uint64_t dflt)
{
	uint64_t v = requested > 0 ? (uint64_t)requested : dflt, p = CLC_RING_MIN;

	while (p < v && p < CLC_RING_MAX)
		p <<= 1;
	return p;
}

/* The socket is plain TCP from now on: counted and published with its reason. */
static void fell_back(struct usock *s, int fd, enum decline why)
{
	atomic_store(&s->mode, MODE_PLAIN);
	stat_fallback(s->server ? SIDE_SERVER : SIDE_CLIENT, why);
	socktab_fell_back(fd, s->server, why);
}

/* Whether a connect() to an address of the socket's family may find usmc there:
 * not when the policy or the registry says no (why: which). */
static int may_accel(int smc, int fd, const struct sockaddr *addr, char *path, size_t n,
		     enum decline *why)
{
	*why = DECL_POLICY;
	return admit_connect(smc, fd, addr) && registry_lookup(addr, path, n, why) >= 0;
}

int conn_fresh_stays_plain(int family, int fd, const struct sockaddr *addr, socklen_t len,
			   enum decline *why)
{
	char path[4200];

	return addr_is_inet(addr, len) && addr->sa_family == family &&
	       !may_accel(0, fd, addr, path, sizeof(path), why);
}

void conn_fresh_fell_back(int fd, enum decline why)
{
	stat_fallback(SIDE_CLIENT, why);
	socktab_fell_back(fd, 0, why);
}

/* ------------------------------------------------------------ connect */

int conn_connect(struct usock *s, int fd, const struct sockaddr *addr, socklen_t len)
{
	char path[4200];
	enum decline why;
	struct lgr *g = NULL;
	int bell, r, e;

	if (mode_of(s) != MODE_NEW) {
		r = real.connect(fd, addr, len);
		if ((r == 0 || errno == EISCONN) && conn_accel(s))
			s->connected = 1;
		return r;
	}
	if (!addr_is_inet(addr, len) || addr->sa_family != s->family)
		return real.connect(fd, addr, len);
	if (!may_accel(s->smc, fd, addr, path, sizeof(path), &why))
		goto plain;
	why = DECL_NO_DEVICE;
	g = lgr_client_get(path);
	if (!g) {
		registry_forget(addr, path);
		goto plain;
	}
	uint64_t rs[2] = {ring_for(s->sndbuf, cfg.send_ring), ring_for(s->rcvbuf, cfg.recv_ring)};
	registry_proposing(addr);
	e = lgr_propose(g, s, fd, rs, &s->seg, &bell);
	if (e == -EPIPE || e == -ECONNRESET) {
		/* The listener's process is gone: its entry goes too. */
		why = DECL_NO_DEVICE;
		registry_forget(addr, path);
		goto plain;
	}
	if (e) {
		why = DECL_MEMORY;
		goto plain;
	}
	lgr_put(g); /* the segment holds its own reference */
	g = NULL;
	rings_setup(s);
	s->tx.cap = cfg.pending_window < s->tx.size ? cfg.pending_window : s->tx.size;
	bell_take(s, bell);
	s->deadline_ns = sys_now_ns() + (uint64_t)cfg.handshake_ms * 1000000ull;
	/* A peer answering within a millisecond is usmc: no probe before that. */
	s->recheck_ns = sys_now_ns() + 1000000ull;
	memcpy(&s->dst, addr, len < sizeof(s->dst) ? len : sizeof(s->dst));
	atomic_store(&s->mode, MODE_PENDING);
	r = real.connect(fd, addr, len);
	e = errno;
	if (r == 0) {
		s->connected = 1;
	} else if (e != EINPROGRESS && e != EINTR) {
		/* Refused or unreachable: nothing to attach; the socket may connect again. */
		lgr_withdraw(s->seg.lgr, s->conn_id);
		shm_teardown(s, 0);
		atomic_store(&s->mode, MODE_NEW);
	}
	socktab_note(fd, s);
	errno = e;
	return r;
plain:
	if (g)
		lgr_put(g);
	r = real.connect(fd, addr, len);
	e = errno;
	if (r == 0 || e == EINPROGRESS || e == EINTR)
		fell_back(s, fd, why);
	errno = e;
	return r;
}

/* ------------------------------------------------------------ accept */

/* How often a process accepting on a port marked ambiguous looks whether the
 * others have gone (a reload's old workers finishing their connections). */
#define RECLAIM_NS 1000000000ull

/* A listener's first accept in this process: claim it in the registry, which
 * marks the port ambiguous when another live process accepts on it too. While
 * it is so marked, claim again now and then: the last one left clears it. */
static void claim_listener(struct usock *l)
{
	pid_t me = sys_pid();

	if (!l->registered)
		return;
	if (atomic_load_explicit(&l->accepting, memory_order_relaxed) == me) {
		if (!registry_port_shared((struct sockaddr *)&l->bound))
			return;
		uint64_t now = sys_now_ns(), due = atomic_load_explicit(&l->reclaim_ns,
									 memory_order_relaxed);
		if (now < due || !atomic_compare_exchange_strong(&l->reclaim_ns, &due,
								 now + RECLAIM_NS))
			return;
	}
	atomic_store_explicit(&l->accepting, me, memory_order_relaxed);
	registry_claim_acceptor((struct sockaddr *)&l->bound);
}

static void mark_handed(struct usock *s);

/* Whether to ask the siblings for the proposal of a connection accepted on l that
 * we hold none for: only on a port several processes accept on, unless one of them
 * failed to answer lately, and only while a client may still wait for the attach
 * of a proposal to the port: one moved its count (registry_proposals()) less than
 * the longest a client waits (USMC_HANDSHAKE_TIMEOUT_MS) before we last saw the
 * count move. Otherwise the connection comes from a plain client, and asking
 * about it would only make it wait for the siblings' answers. */
static int worth_asking(struct usock *l, unsigned port)
{
	if (!registry_port_shared((struct sockaddr *)&l->bound) || !registry_handoff_ok(port))
		return 0;
	uint64_t seen = atomic_load_explicit(&l->proposals_seen, memory_order_relaxed);
	uint32_t n = registry_proposals(port), now_ms = (uint32_t)(sys_now_ns() / 1000000ull);

	if ((uint32_t)(seen >> 32) != n) {
		atomic_store_explicit(&l->proposals_seen, (uint64_t)n << 32 | now_ms,
				      memory_order_relaxed);
		return 1;
	}
	/* Unsigned: after a wrap of the clock the answer is "recent", which only asks. */
	return now_ms - (uint32_t)seen < cfg.handshake_ms;
}

void conn_accepted(struct usock *l, struct usock *s, int fd, const struct sockaddr *peer)
{
	int bell;
	uint64_t id;
	struct seg_loc loc;
	struct lgr_accepted c;

	claim_listener(l);
	s->server = 1;
	s->connected = 1;
	if (lgr_accepted_init(&c, fd, peer, &l->bound, &l->netns_cookie) < 0 ||
	    (lgr_server_match(&c, &loc, &bell, &id) != 1 &&
	     (!worth_asking(l, c.local.port) || handoff_fetch(&c, &loc, &bell, &id) != 1))) {
		fell_back(s, fd, DECL_NO_PROPOSAL);
		return;
	}
	s->seg = loc;
	s->conn_id = id;
	bell_take(s, sys_fd_high(bell));
	uint32_t st = SEG_PENDING;
	enum decline why = DECL_PROTOCOL;
	if (loc.hdr->magic != SEG_MAGIC) {
		stat_add(STAT_HANDSHAKE_ERR, 1);
		lgr_server_decline(loc.lgr, id, decline_code(DECL_PROTOCOL));
		st = 0;
	} else if (!admit_accepted(l, fd, peer)) {
		lgr_server_decline(loc.lgr, id, decline_code(why = DECL_POLICY));
		st = 0;
	}
	if (!st || !atomic_compare_exchange_strong(&loc.hdr->state, &st, SEG_ATTACHED)) {
		/* The client gave up before we came (or the segment is garbage). */
		shm_teardown(s, 0);
		fell_back(s, fd, st ? DECL_TIMEOUT : why);
		return;
	}
	rings_setup(s);
	/* Handed over by a sibling: the client's channel leads to the sibling, and
	 * its hanging up (the sibling exiting) says nothing about us. */
	if (!loc.lgr)
		mark_handed(s);
	atomic_store(&s->mode, MODE_SHM);
	stat_accel(SIDE_SERVER, s->tx.size, s->rx.size);
	socktab_note(fd, s);
	/* The client may already sleep for room in its pending window. One that
	 * sleeps for data has nothing to gain from the attach: the data wakes it. */
	notify_space(s);
}

int conn_listen(struct usock *s, int fd, int backlog)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);
	int v6only = 0;
	socklen_t ol = sizeof(v6only);
	int r = real.listen(fd, backlog);

	if (r < 0 || mode_of(s) != MODE_NEW)
		return r;
	if (getsockname(fd, (struct sockaddr *)&ss, &l) < 0)
		return r;
	if (!admit_listen(s, (struct sockaddr *)&ss)) {
		atomic_store(&s->mode, MODE_PLAIN);
		stat_fallback(SIDE_SERVER, DECL_POLICY);
		return r;
	}
	if (s->family == AF_INET6)
		real.getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &ol);
	if (lgr_server_start() < 0)
		return r;
	if (registry_add((struct sockaddr *)&ss, v6only, lgr_server_name()) < 0) {
		lgr_server_listener_gone();
		return r;
	}
	stat_open();
	s->bound = ss;
	s->registered = 1;
	atomic_store(&s->mode, MODE_LISTEN);
	socktab_note(fd, s);
	return r;
}

/* ------------------------------------------------------------ pending */

static void become_shm(struct usock *s, int fd)
{
	lgr_unpend(s);
	s->tx.cap = s->tx.size;
	atomic_store(&s->mode, MODE_SHM);
	stat_accel(SIDE_CLIENT, s->tx.size, s->rx.size);
	socktab_note(fd, s);
}

static int send_all_plain(int fd, const unsigned char *p, size_t n)
{
	while (n) {
		ssize_t w = real.send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		struct pollfd pf = {fd, POLLOUT, 0};
		real.poll(&pf, 1, -1);
	}
	return 0;
}

/* The client won the race against the attach: the connection is plain TCP, and
 * what the application already wrote is still in the ring, unread. Send it on
 * TCP before anything else so the stream stays exact. */
static void client_fall_back(struct usock *s, int fd, enum decline why)
{
	send_all_plain(fd, s->tx.data, s->tx.pos);
	lgr_withdraw(s->seg.lgr, s->conn_id);
	shm_teardown(s, 0);
	fell_back(s, fd, why);
	epoll_sock_fallback(s, fd);
}

static int tcp_has_something(int fd)
{
	char c;
	ssize_t r = real.recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	return r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

void conn_pending_check(struct usock *s, int fd)
{
	pthread_mutex_lock(&s->lock);
	if (mode_of(s) != MODE_PENDING) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	uint32_t st = atomic_load_explicit(&s->seg.hdr->state, memory_order_acquire);
	if (st == SEG_ATTACHED) {
		become_shm(s, fd);
		pthread_mutex_unlock(&s->lock);
		return;
	}
	int why = -1, d = atomic_load(&s->declined);
	uint64_t now = sys_now_ns(), again = now >= s->recheck_ns;
	if (again)
		s->recheck_ns = now + CONN_PENDING_RECHECK_MS * 1000000ull;
	if (d)
		why = d - 1;
	else if (s->connected && !s->shut_rd &&
		 (atomic_load(&s->tcp_event) || (again && !s->regs && tcp_has_something(fd))))
		/* An epoll registration watches the TCP socket already: what a
		 * plain peer says marks tcp_event at the next wait, no probe. */
		why = DECL_PEER_SPOKE_TCP;
	else if (again && !registry_still((struct sockaddr *)&s->dst, s->seg.lgr->peer))
		why = DECL_AMBIGUOUS;
	else if (again && registry_port_shared((struct sockaddr *)&s->dst) &&
		 (!registry_handoff_ok(addr_port((struct sockaddr *)&s->dst)) ||
		  now - (s->deadline_ns - (uint64_t)cfg.handshake_ms * 1000000ull) >
			  HANDOFF_CLIENT_WAIT_MS * 1000000ull))
		/* Several processes accept there: the one that took the connection
		 * asks the others for our proposal, which takes far less than this,
		 * and marks the port when one did not answer. */
		why = DECL_AMBIGUOUS;
	else if (again && (lgr_client_look(s->seg.lgr, now), (d = atomic_load(&s->declined))))
		why = d - 1;
	else if (now >= s->deadline_ns)
		why = DECL_TIMEOUT;
	if (why >= 0) {
		st = SEG_PENDING;
		if (atomic_compare_exchange_strong(&s->seg.hdr->state, &st, SEG_ABANDONED))
			client_fall_back(s, fd, (enum decline)why);
		else if (st == SEG_ATTACHED)
			become_shm(s, fd);
	}
	pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------ readiness */

static int check_connected(struct usock *s, int fd)
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

/* Writes go to the kernel socket once shared memory cannot take them any more:
 * after our own shutdown, or when the peer closed or died. The kernel then gives
 * exactly TCP's answer (EPIPE, SIGPIPE, RST from the peer's closed socket). */
static int writes_to_tcp(struct usock *s)
{
	return s->shut_wr || atomic_load(&s->peer_gone) ||
	       (atomic_load_explicit(&s->tx.sh->cons_flags, memory_order_acquire) &
		RING_CF_CLOSED);
}

/* The peer's end was an RST: its close said so, or its process died with bytes
 * of ours unread and we reset the connection in its stead. */
static int peer_sent_rst(struct usock *s)
{
	return (atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_acquire) & RING_PF_RST) ||
	       atomic_load(&s->peer_end) == PEER_END_RESET;
}

/* How long a look that found the peer's FIN without its close flag waits for its
 * channel to hang up: an ending process closes its TCP socket first (the
 * channel's descriptor is among its highest), and the rest follows within
 * microseconds. A peer that only shut down raises its flag as soon. */
#define PEER_DEATH_WAIT_MS 20

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
static int reset_if_peer_died(struct usock *s, int fd)
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
		if (ms == PEER_DEATH_WAIT_MS) {
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

static int eof_possible(struct usock *s)
{
	return s->shut_rd || atomic_load(&s->tcp_event) ||
	       (atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_acquire) &
		RING_PF_SHUT_WR);
}

static int writable(const struct ring_end *tx, uint64_t space)
{
	return space * 3 >= tx->cap;
}

/* Events satisfied by shared memory alone (no system call), as tx and rx (ours,
 * under the operation's lock, or a view) show them. */
static short shm_ready(struct usock *s, struct ring_end *tx, struct ring_end *rx, short events)
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
		if (writes_to_tcp(s) || ring_space(tx, &n) < 0 || writable(tx, n))
			r |= POLLOUT;
	}
	return r;
}

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

void conn_bell_clear(struct usock *s, const void *except)
{
	if (s->bell < 0)
		return;
	/* Read before emptying: rings counted after this may be emptied too,
	 * and so are counted twice, which only makes the next emptying early. */
	if (s->rx.sh)
		atomic_store_explicit(&s->bells_drained,
				      atomic_load_explicit(&s->rx.sh->prod_bells, memory_order_acquire),
				      memory_order_relaxed);
	dev->doorbell_clear(s->bell);
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

void conn_note_tcp_event(struct usock *s)
{
	atomic_store(&s->tcp_event, 1);
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
	 * (the dropped socket itself would say writable). */
	if (atomic_load(&s->peer_end) == PEER_END_RESET)
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
	if (busy & VIEW_BUSY(HOLD_RX)) {
		r |= POLLIN | POLLRDNORM;
	} else if (ring_avail(&rx, &n) < 0) {
		conn_abort(s, fd);
		r |= POLLERR;
	} else if (n) {
		r |= POLLIN | POLLRDNORM;
	}
	if (writes_to_tcp(s)) {
		r |= (short)(tcp & (POLLOUT | POLLWRNORM));
	} else if (busy & VIEW_BUSY(HOLD_TX)) {
		r |= POLLOUT | POLLWRNORM;
	} else if (ring_space(&tx, &n) < 0) {
		conn_abort(s, fd);
		r |= POLLERR;
	} else if (writable(&tx, n)) {
		r |= POLLOUT | POLLWRNORM;
	}
	return (short)(r & (events | POLLERR | POLLHUP | POLLNVAL));
}

/* Asks the peer to ring our doorbell for events. */
static void arm_bell(struct usock *s, short events)
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

int conn_arm(struct usock *s, int fd, short events)
{
	struct ring_end tx, rx;

	(void)fd;
	if (!s->connected)
		return 0;
	arm_bell(s, events);
	unsigned busy = view(s, &tx, &rx, 0);
	/* As for conn_revents(): busy counts as ready. */
	if (((events & POLLIN) && (busy & VIEW_BUSY(HOLD_RX))) ||
	    ((events & POLLOUT) && (busy & VIEW_BUSY(HOLD_TX))))
		return 1;
	return shm_ready(s, &tx, &rx, events) != 0;
}

void conn_stamp(struct usock *s, short events, struct conn_stamp *st)
{
	*st = (struct conn_stamp){0};
	if (s->connected && conn_accel(s)) {
		if (events & (POLLIN | POLLRDHUP))
			st->rx_prod = atomic_load_explicit(&s->rx.sh->prod, memory_order_acquire);
		if (events & POLLOUT)
			st->tx_cons = atomic_load_explicit(&s->tx.sh->cons, memory_order_acquire);
		uint32_t f = atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_acquire);
		st->ends = (f & RING_PF_SHUT_WR ? CONN_END_FIN : 0) |
			   (peer_sent_rst(s) ? CONN_END_RST : 0);
	}
	if (atomic_load(&s->peer_gone))
		st->ends |= CONN_END_GONE;
}

void conn_disarm(struct usock *s, short events)
{
	/* An epoll registration relies on the arm staying in place. */
	if (!conn_accel(s) || s->regs)
		return;
	if (events & POLLIN) {
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
	 * fails the exchange or follows it. The lock keeps the end from being
	 * shared with other processes meanwhile; one busy is left alone. */
	if (pthread_mutex_trylock(&s->rx_lock) != 0)
		return 0;
	if (!s->hold && conn_attached(s) && !atomic_load(&s->arm_waits))
		done = atomic_compare_exchange_strong(&s->rx.sh->cons_wait, &gen, gen + 1);
	pthread_mutex_unlock(&s->rx_lock);
	return done;
}

/* How often a thread asleep on its futex looks at the TCP socket and the link
 * group's channel anyway: a peer killed outright rings nothing, but its FIN and
 * its channel's hang-up arrive, and are seen within this time. */
#define FUTEX_SLICE_NS 200000000ull

/* The peer process's channel hung up: it died, unless its end went to other
 * processes, which its kernel socket then stays open for. */
static void channel_hung_up(struct usock *s)
{
	if (!((atomic_load(&s->rx.sh->prod_flags) | atomic_load(&s->tx.sh->cons_flags)) &
	      RING_F_HANDED))
		atomic_store(&s->peer_gone, 1);
}

/* Marks our lines: our end is going to other processes. */
static void mark_handed(struct usock *s)
{
	atomic_fetch_or(&s->tx.sh->prod_flags, RING_F_HANDED);
	atomic_fetch_or(&s->rx.sh->cons_flags, RING_F_HANDED);
}

/* The sleep of a blocking call on an attached connection: one futex_wait, no
 * descriptors. Returns like conn_wait(). */
static int futex_wait_one(struct usock *s, int fd, short events, uint64_t deadline, int has_timeout)
{
	int in = events & POLLIN;
	_Atomic uint32_t *how = in ? &s->rx.sh->cons_how : &s->tx.sh->prod_how;
	_Atomic uint32_t *kick = in ? &s->rx.sh->prod_kick : &s->tx.sh->cons_kick;
	_Atomic uint32_t *wait = in ? &s->rx.sh->cons_wait : &s->tx.sh->prod_wait;
	uint32_t k = atomic_load_explicit(kick, memory_order_acquire);
	uint64_t now = sys_now_ns(), slice = FUTEX_SLICE_NS;

	if (deadline && deadline - now < slice)
		slice = deadline > now ? deadline - now : 0;
	conn_arm_wait_begin(s);
	atomic_fetch_or_explicit(how, RING_WAKE_FUTEX, memory_order_relaxed);
	ring_arm(wait);
	if (shm_ready(s, &s->tx, &s->rx, events)) {
		conn_disarm(s, events);
		conn_arm_wait_end(s);
		return 0;
	}
	struct timespec ts = {(time_t)(slice / 1000000000ull), (long)(slice % 1000000000ull)};
	enum hold_dir d = in ? HOLD_RX : HOLD_TX;
	signal_wait_begin();
	op_unlock(s, d);
	long r = slice ? futex(kick, FUTEX_WAIT, k, &ts) : (errno = ETIMEDOUT, -1);
	int e = errno;
	op_lock(s, d);
	atomic_fetch_and_explicit(how, ~RING_WAKE_FUTEX, memory_order_relaxed);
	conn_disarm(s, events);
	conn_arm_wait_end(s);
	if (r == 0 || e == EAGAIN)
		return 0;
	if (e == EINTR)
		return !has_timeout && signal_wait_restart() ? 0 : -EINTR;
	/* A slice ran out: look for what rings no bell. */
	struct pollfd pf[2] = {{fd, (short)(in ? POLLIN | POLLRDHUP : 0), 0},
			       {s->seg.lgr ? s->seg.lgr->ctl : -1, 0, 0}};
	if (real.poll(pf, 2, 0) > 0) {
		if (pf[0].revents)
			atomic_store(&s->tcp_event, 1);
		if (pf[1].revents & (POLLHUP | POLLERR))
			channel_hung_up(s);
	}
	return deadline && sys_now_ns() >= deadline ? -ETIMEDOUT : 0;
}

/* Busy-polling before sleeping. A reader or writer whose peer answers within
 * USMC_BUSY_POLL_US, or keeps moving its cursor (draining or filling the ring on
 * another core), wins by spinning rather than sleeping and being woken two
 * system calls later. Spinning cannot win when the peer runs on our own core
 * (it would only delay it), so each side publishes the core it last ran on and
 * nobody spins against a peer on its own. */
#define SPIN_MAX_NS 50000ull
#define PUBLISH_CHUNK (16u << 10)

static void note_cpu(_Atomic uint32_t *mine)
{
	int cpu = sched_getcpu();

	if (cpu >= 0 && atomic_load_explicit(mine, memory_order_relaxed) != (uint32_t)cpu)
		atomic_store_explicit(mine, (uint32_t)cpu, memory_order_relaxed);
}

/* The spin of a blocking call, on a copy of its direction taken under the lock it
 * holds. The lock is let go for the spin: a non-blocking call or a readiness look
 * in another thread must neither wait for it nor take it for an operation under
 * way. What the copy shows ready is only a reason to look again, locked. */
static int spin(struct usock *s, short events)
{
	int in = events == POLLIN;
	enum hold_dir d = in ? HOLD_RX : HOLD_TX;
	_Atomic uint64_t *cur = in ? &s->rx.sh->prod : &s->tx.sh->cons;
	_Atomic uint32_t *peer_cpu = in ? &s->rx.sh->prod_cpu : &s->tx.sh->cons_cpu;
	uint64_t idle = (uint64_t)cfg.busy_poll_us * 1000ull;
	/* A client waiting for its attach spins up to the limit: the server has
	 * its connection and attaches soon, and sleeping now would cost the answer
	 * a futex wake and a wake-up across cores. It does not know the server's
	 * core yet, so it yields between looks: a server on its own core then runs
	 * instead of waiting for the spin to end. */
	int pending = mode_of(s) == MODE_PENDING, yield = pending, closing = 0, cpu, r = 0;

	/* Sleeping waits (no budget) ask for no core either. */
	if (!idle || cfg.ncpus < 2 || (cpu = sched_getcpu()) < 0 ||
	    (!pending && atomic_load_explicit(peer_cpu, memory_order_relaxed) == (uint32_t)cpu))
		return 0;
	uint64_t start = sys_now_ns(), now = start, moved = start;
	uint64_t seen = atomic_load_explicit(cur, memory_order_relaxed);
	uint64_t limit = idle > SPIN_MAX_NS ? idle : SPIN_MAX_NS;
	struct ring_end e = in ? s->rx : s->tx;

	op_unlock(s, d);
	while (now - start < limit && (pending || closing || now - moved < idle)) {
		/* events is one direction, so shm_ready() reads only e. */
		r = shm_ready(s, &e, &e, events) != 0;
		if (r)
			break;
		if (yield)
			sched_yield();
		else
			__builtin_ia32_pause();
		if (pending &&
		    atomic_load_explicit(&s->seg.hdr->state, memory_order_acquire) != SEG_PENDING) {
			/* Attached: the server's answer is its next step, so the
			 * attach counts as the peer moving. The room a writer waits
			 * for grows only once the caller has seen the attach. */
			if ((r = !in))
				break;
			pending = 0;
			moved = sys_now_ns();
		}
		/* The peer is closing: its close, which follows at once, is near. */
		if (in && !closing)
			closing = (atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_relaxed) &
				   RING_PF_CLOSING) != 0;
		uint64_t c = atomic_load_explicit(cur, memory_order_relaxed);
		now = sys_now_ns();
		if (c != seen) {
			seen = c;
			moved = now;
		}
	}
	op_lock(s, d);
	return r;
}

int conn_busy_wait(int (*look)(void *, int deep), void *arg, int timeout_ms)
{
	uint64_t budget = (uint64_t)cfg.busy_poll_us * 1000ull;

	if (!budget || timeout_ms == 0 || cfg.ncpus < 2)
		return 0;
	if (timeout_ms > 0 && budget > (uint64_t)timeout_ms * 1000000ull)
		budget = (uint64_t)timeout_ms * 1000000ull;
	uint64_t now = sys_now_ns(), end = now + budget, deep_at = now;
	int r;

	for (;;) {
		int deep = now >= deep_at;
		if ((r = look(arg, deep)))
			return r;
		if (deep) {
			/* Which peer will answer is not known here, so yield after
			 * the kernel's look: one on our own core then runs instead
			 * of waiting for our spin to end. */
			sched_yield();
			deep_at = sys_now_ns() + CONN_DEEP_LOOK_NS;
		} else {
			__builtin_ia32_pause();
		}
		if ((now = sys_now_ns()) >= end)
			return 0;
	}
}

/* Sleeps until the doorbell rings, the TCP socket reports something, the link
 * group's channel speaks or hangs up, or the deadline passes. Returns 0 to
 * re-check, -ETIMEDOUT or -EINTR. */
static int conn_wait(struct usock *s, int fd, short events, uint64_t deadline, int has_timeout)
{
	struct pollfd pf[3];
	struct lgr *g = s->seg.lgr;
	int pending = mode_of(s) == MODE_PENDING;

	uint64_t dl = deadline;
	if (pending && (!dl || s->recheck_ns < dl))
		dl = s->recheck_ns;
	if (s->connected && (events == POLLIN || events == POLLOUT) && spin(s, events))
		return 0;
	if (s->connected && (events == POLLIN || events == POLLOUT)) {
		/* The attach wakes the futex like data does; what rings nothing (a
		 * decline, a plain peer) is looked for at the next recheck. */
		int r = futex_wait_one(s, fd, events, dl, has_timeout);
		return r == -ETIMEDOUT && dl != deadline ? 0 : r;
	}
	pf[0] = (struct pollfd){fd, (short)((events & POLLIN) || pending ? POLLIN | POLLRDHUP : 0), 0};
	if (!s->connected)
		pf[0].events |= POLLOUT;
	pf[1] = (struct pollfd){g && g->ctl >= 0 ? g->ctl : -1, (short)(pending ? POLLIN : 0), 0};
	pf[2] = (struct pollfd){s->bell, POLLIN, 0};
	conn_arm_wait_begin(s);
	if (s->connected)
		arm_bell(s, events);
	if (shm_ready(s, &s->tx, &s->rx, events)) {
		conn_disarm(s, events);
		conn_arm_wait_end(s);
		return 0;
	}
	enum hold_dir d = events & POLLIN ? HOLD_RX : HOLD_TX;
	signal_wait_begin();
	op_unlock(s, d);
	int r = real.poll(pf, 3, sys_ms_left(dl));
	int e = errno;
	op_lock(s, d);
	conn_disarm(s, events);
	conn_arm_wait_end(s);
	if (r < 0) {
		if (e == EINTR && !has_timeout && signal_wait_restart())
			return 0;
		return -e;
	}
	if (r == 0)
		return deadline && sys_now_ns() >= deadline ? -ETIMEDOUT : 0;
	if (pf[2].revents)
		conn_bell_clear(s, NULL);
	if (pf[0].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))
		atomic_store(&s->tcp_event, 1);
	if (!s->connected && (pf[0].revents & POLLOUT))
		check_connected(s, fd);
	if (pf[1].revents) {
		if (pending)
			lgr_client_poll(g);
		if (pf[1].revents & (POLLHUP | POLLERR))
			channel_hung_up(s);
	}
	return 0;
}

/* ------------------------------------------------------------ data */

static ssize_t plain_sendmsg(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
	return real.sendmsg(fd, &mh, flags);
}

static ssize_t plain_recvmsg(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
	return real.recvmsg(fd, &mh, flags);
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t t = 0;

	for (int i = 0; i < iovcnt; i++)
		t += iov[i].iov_len;
	return t;
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

ssize_t conn_send(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags)
{
	size_t want = iov_total(iov, iovcnt), done = 0;
	uint64_t deadline = 0;
	int nb = s->nonblock || (flags & MSG_DONTWAIT), counted_full = 0;

	if (flags & MSG_OOB) {
		/* Urgent data has no place in a byte ring. */
		stat_add(STAT_OOB_CALLS, 1);
		errno = EOPNOTSUPP;
		return -1;
	}
	op_lock(s, HOLD_TX);
	for (;;) {
		if (mode_of(s) == MODE_PENDING && s->connected)
			conn_pending_check(s, fd);
		if (!conn_accel(s))
			goto tcp;
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
			/* Before the kernel answers for a dead peer's socket. */
			if (atomic_load(&s->peer_gone))
				reset_if_peer_died(s, fd);
			goto tcp;
		}
		/* The consumer's cursor is read only when what it said last is not
		 * room enough. */
		uint64_t space = ring_room(&s->tx);
		if (space < want - done && ring_space(&s->tx, &space) < 0) {
			conn_abort(s, fd);
			errno = ECONNRESET;
			goto fail;
		}
		if (space && done < want) {
			size_t n = want - done < space ? want - done : (size_t)space;
			/* Publish large writes in pieces, so the reader copies out one
			 * piece while we copy in the next. */
			if (n > PUBLISH_CHUNK)
				n = PUBLISH_CHUNK;
			ring_produce(&s->tx, iov, iovcnt, done, n);
			note_cpu(&s->tx.sh->prod_cpu);
			done += n;
			stat_add(STAT_BYTES_SENT, n);
			notify_data(s);
			if (done == want)
				break;
			continue;
		}
		if (done == want)
			break;
		if (!counted_full++)
			stat_add(STAT_RING_FULL, 1);
		if (nb) {
			if (done)
				break;
			errno = EAGAIN;
			goto fail;
		}
		if (!deadline)
			deadline = sys_deadline(&s->sndtimeo);
		int w = conn_wait(s, fd, POLLOUT, deadline, deadline != 0);
		if (w == -ETIMEDOUT || w == -EINTR) {
			if (done)
				break;
			errno = w == -ETIMEDOUT ? EAGAIN : EINTR;
			goto fail;
		}
	}
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

ssize_t conn_recv(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags)
{
	size_t want = iov_total(iov, iovcnt), done = 0;
	uint64_t deadline = 0, avail;
	int nb = s->nonblock || (flags & MSG_DONTWAIT);
	int peek = flags & MSG_PEEK, waitall = (flags & MSG_WAITALL) && !peek;

	if (flags & MSG_OOB) {
		stat_add(STAT_OOB_CALLS, 1);
		errno = EINVAL; /* as TCP says when no urgent byte is pending */
		return -1;
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
		if (ring_avail(&s->rx, &avail) < 0) {
			conn_abort(s, fd);
			if (done)
				break;
			errno = ECONNRESET;
			goto fail;
		}
		if (want == 0 && (avail || nb))
			break; /* TCP: a zero-length read returns at once unless it must wait */
		if (avail && want) {
			size_t n = want - done < avail ? want - done : (size_t)avail;
			ring_peek(&s->rx, 0, iov, iovcnt, done, n);
			done += n;
			if (!peek) {
				ring_consume(&s->rx, n);
				note_cpu(&s->rx.sh->cons_cpu);
				stat_add(STAT_BYTES_RECV, n);
				/* Waking a writer for a sliver of room only to sleep
				 * again wastes two system calls: wait for a third. */
				if ((s->rx.size - (avail - n)) * 3 >= s->rx.size)
					notify_space(s);
			}
			if (!waitall || done == want)
				break;
			continue;
		}
		if (eof_possible(s)) {
			if (s->shut_rd)
				break;
			/* Bytes published before the flag are visible now; look again. */
			if (ring_avail(&s->rx, &avail) == 0 && avail)
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
		if (done && !waitall)
			break;
		if (nb) {
			if (done)
				break;
			errno = EAGAIN;
			goto fail;
		}
		if (!deadline)
			deadline = sys_deadline(&s->rcvtimeo);
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

/* How long a client whose attach is pending waits for it when it must settle. */
#define SETTLE_ATTACH_WAIT_NS (50 * 1000000ull)

void conn_settle(struct usock *s, int fd)
{
	if (!conn_pending(s))
		return;
	/* As a writer takes them: no byte joins the ring meanwhile. */
	op_lock(s, HOLD_TX);
	uint64_t until = sys_now_ns() + SETTLE_ATTACH_WAIT_NS;
	while (conn_pending(s) && sys_now_ns() < until) {
		if (check_connected(s, fd))
			conn_pending_check(s, fd);
		if (conn_pending(s))
			nanosleep(&(struct timespec){0, 50000}, NULL);
	}
	pthread_mutex_lock(&s->lock);
	uint32_t st = SEG_PENDING;
	if (mode_of(s) == MODE_PENDING) {
		if (atomic_compare_exchange_strong(&s->seg.hdr->state, &st, SEG_ABANDONED))
			client_fall_back(s, fd, DECL_TIMEOUT);
		else if (st == SEG_ATTACHED)
			become_shm(s, fd);
	}
	pthread_mutex_unlock(&s->lock);
	op_unlock(s, HOLD_TX);
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
	registry_remove((struct sockaddr *)&s->bound, lgr_server_name());
	lgr_server_listener_gone();
	s->registered = 0;
}

void conn_atfork_prepare(struct usock *s, int fd)
{
	if (mode_of(s) == MODE_LISTEN) {
		s->forked = 1;
		return;
	}
	conn_settle(s, fd);
	if (conn_accel(s))
		conn_share(s);
}

int conn_share(struct usock *s)
{
	/* Operations never sleep holding these, so this waits only for those in
	 * progress; the state seeded into the holders' page is then final. */
	pthread_mutex_lock(&s->tx_lock);
	pthread_mutex_lock(&s->rx_lock);
	mark_handed(s);
	if (!s->hold)
		s->hold = holders_new(&s->tx, &s->rx, &s->hold_fd);
	if (s->hold)
		holders_add(s->hold);
	pthread_mutex_unlock(&s->rx_lock);
	pthread_mutex_unlock(&s->tx_lock);
	return s->hold ? 0 : -1;
}

void conn_unshare(struct usock *s)
{
	holders_drop(s->hold);
}

int conn_close(struct usock *s, int fd)
{
	int m = mode_of(s);
	uint64_t avail = 0;

	socktab_closed(fd);
	epoll_sock_closed(s);
	if (s->hold) {
		struct holders *h = s->hold;
		if ((m == MODE_PENDING || m == MODE_SHM) && holders_drop(h) > 0) {
			/* Another process still holds this end: only our copies go. */
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
		lgr_withdraw(s->seg.lgr, s->conn_id);
		shm_teardown(s, 0);
	} else if (m == MODE_PENDING || m == MODE_SHM) {
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

int conn_fionread(struct usock *s, int fd, int *out)
{
	uint64_t avail;
	struct ring_end tx, rx;

	view(s, &tx, &rx, 1);
	if (ring_avail(&rx, &avail) < 0) {
		conn_abort(s, fd);
		errno = ECONNRESET;
		return -1;
	}
	*out = avail > 0x7fffffff ? 0x7fffffff : (int)avail;
	return 0;
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
	*out = (int)(tx.cap - space);
	return 0;
}

/* ------------------------------------------------------------ exec */

static int dup_inheritable(int fd)
{
	return fd < 0 ? -1 : real.fcntl(fd, F_DUPFD, 0);
}

int conn_export(struct usock *s, int fd, struct conn_export *x)
{
	struct stat st;

	if (!conn_attached(s) || !s->seg.hdr || atomic_load(&s->peer_gone) ||
	    fstat(fd, &st) < 0)
		return -1;
	mark_handed(s);
	op_lock(s, HOLD_TX);
	op_lock(s, HOLD_RX);
	*x = (struct conn_export){
		.fd = fd, .inode = (uint64_t)st.st_ino, .family = s->family, .server = s->server,
		.nonblock = s->nonblock,
		.shut_rd = s->shut_rd, .shut_wr = s->shut_wr, .abortive = s->abortive,
		.arena_fd = dup_inheritable(s->seg.arena->fd), .bell = dup_inheritable(s->bell),
		.hold_fd = s->hold ? dup_inheritable(s->hold_fd) : -1,
		.arena_size = s->seg.arena->size, .seg_off = s->seg.off, .seg_size = s->seg.size,
		.ring_size = {s->seg.ring_size[0], s->seg.ring_size[1]},
		.tx_pos = s->tx.pos, .tx_peer = s->tx.peer, .tx_cap = s->tx.cap,
		.rx_pos = s->rx.pos, .rx_peer = s->rx.peer,
		.tx_rung = s->tx.last_rung, .rx_rung = s->rx.last_rung,
		.rcvtimeo = s->rcvtimeo, .sndtimeo = s->sndtimeo,
		.sndbuf = s->sndbuf, .rcvbuf = s->rcvbuf,
	};
	op_unlock(s, HOLD_RX);
	op_unlock(s, HOLD_TX);
	if (x->arena_fd < 0 || x->bell < 0 || (s->hold && x->hold_fd < 0)) {
		conn_export_close(x);
		return -1;
	}
	return 0;
}

void conn_export_close(struct conn_export *x)
{
	int *fds[] = {&x->arena_fd, &x->bell, &x->hold_fd};

	for (unsigned i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			real.close(*fds[i]);
		*fds[i] = -1;
	}
}

struct usock *conn_import(const struct conn_export *in)
{
	struct conn_export x = *in;
	struct usock *s = NULL;
	struct arena *a = NULL;

	if (!conn_export_valid(&x) || x.bell < 0)
		goto fail;
	a = lgr_arena_adopt(x.arena_fd, x.arena_size);
	x.arena_fd = -1;
	if (!a || !(s = usock_new(x.family, x.nonblock)))
		goto fail;
	s->server = x.server;
	s->seg = (struct seg_loc){NULL, a, x.seg_off, x.seg_size, {x.ring_size[0], x.ring_size[1]},
				  (struct seg_hdr *)(a->base + x.seg_off), SEG_BELL_UNKNOWN, 0};
	a = NULL;
	rings_setup(s);
	s->tx.pos = x.tx_pos;
	s->tx.peer = x.tx_peer;
	s->tx.cap = x.tx_cap;
	s->tx.last_rung = x.tx_rung;
	s->rx.pos = x.rx_pos;
	s->rx.peer = x.rx_peer;
	s->rx.last_rung = x.rx_rung;
	if (x.hold_fd >= 0) {
		if (!(s->hold = holders_adopt(x.hold_fd)))
			goto fail;
		s->hold_fd = sys_fd_high(x.hold_fd);
		x.hold_fd = -1;
	}
	bell_take(s, sys_fd_high(x.bell));
	x.bell = -1;
	s->connected = 1;
	s->shut_rd = x.shut_rd;
	s->shut_wr = x.shut_wr;
	s->abortive = x.abortive;
	s->rcvtimeo = x.rcvtimeo;
	s->sndtimeo = x.sndtimeo;
	s->sndbuf = x.sndbuf;
	s->rcvbuf = x.rcvbuf;
	atomic_store(&s->mode, MODE_SHM);
	socktab_note(x.fd, s);
	return s;
fail:
	conn_export_close(&x);
	if (s) {
		if (s->hold) {
			holders_unmap(s->hold);
			real.close(s->hold_fd);
		}
		bell_close(&s->bell);
		if (s->seg.arena)
			lgr_seg_forget(&s->seg);
		usock_put(s);
	}
	return NULL;
}
