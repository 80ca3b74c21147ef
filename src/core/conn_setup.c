/* Setting a connection up, as af_smc.c does for the kernel: connect() proposes
 * shared memory, accept() attaches to the proposal, and a client whose attach is
 * pending either gets it or falls back to TCP with nothing of the stream lost. */
#include "conn.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "../dev/dev.h"
#include "addr.h"
#include "admit.h"
#include "config.h"
#include "conn_int.h"
#include "handoff.h"
#include "hooks.h"
#include "registry.h"
#include "segment.h"
#include "shortlived.h"
#include "socktab.h"
#include "stats.h"

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

/* Whether a connect() to usmc at addr stays on TCP all the same: its
 * connections there have been short (shortlived.h). */
static int held_short(const struct sockaddr *addr, enum decline *why)
{
	struct addr d;

	if (!cfg.short_conn)
		return 0;
	addr_from_sockaddr(&d, addr);
	*why = DECL_SHORT_LIVED;
	return shortlived_hold(&d, sys_now_ns());
}

/* The device on which a connect() to an address of the socket's family may find
 * usmc, and where (path): the first whose registry names a listener for it. None
 * when the policy says no, or no registry names one (why: which). */
static const struct dev_ops *may_accel(int smc, int fd, const struct sockaddr *addr, char *path,
				       size_t n, enum decline *why)
{
	*why = DECL_POLICY;
	if (!admit_connect(smc, fd, addr))
		return NULL;
	for (int i = 0; i < dev_count; i++) {
		if (dev_list[i]->reg_lookup(addr, path, (unsigned)n, why) == 0)
			return held_short(addr, why) ? NULL : dev_list[i];
		/* A listener a registry knows of, but cannot lead to, is no reason
		 * to look further: another device's would be a different one. */
		if (*why != DECL_PEER_NO_USMC)
			break;
	}
	return NULL;
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
	const struct dev_ops *dev;
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
	if (!(dev = may_accel(s->smc, fd, addr, path, sizeof(path), &why)))
		goto plain;
	why = DECL_NO_DEVICE;
	g = lgr_client_get(dev, path);
	if (!g) {
		dev->reg_forget(addr, path);
		goto plain;
	}
	uint64_t rs[2] = {ring_for(s->sndbuf, cfg.send_ring), ring_for(s->rcvbuf, cfg.recv_ring)};
	e = lgr_propose(g, s, fd, addr, rs, &s->seg, &bell);
	if (e == -EPIPE || e == -ECONNRESET) {
		/* The listener's process is gone: its entry goes too. */
		why = DECL_NO_DEVICE;
		dev->reg_forget(addr, path);
		goto plain;
	}
	if (e) {
		why = DECL_MEMORY;
		goto plain;
	}
	/* Before the connect(): the acceptor looks at the count once it has the
	 * connection. */
	registry_proposing(addr);
	lgr_put(g); /* the segment holds its own reference */
	g = NULL;
	rings_setup(s);
	tx_limit(s, cfg.pending_window < s->tx.size ? cfg.pending_window : s->tx.size);
	s->tx_pending_limit = 1;
	bell_take(s, bell);
	s->deadline_ns = sys_now_ns() + (uint64_t)cfg.handshake_ms * 1000000ull;
	/* A peer answering within a millisecond is usmc: no probe before that. */
	s->recheck_ns = sys_now_ns() + 1000000ull;
	memcpy(&s->dst, addr, len < sizeof(s->dst) ? len : sizeof(s->dst));
	atomic_store(&s->mode, MODE_PENDING);
	r = real.connect(fd, addr, len);
	e = errno;
	/* Our name is known once connect() has begun: a device that binds by
	 * names publishes it for the server. */
	if (dev->bind_publish && (r == 0 || e == EINPROGRESS || e == EINTR))
		dev->bind_publish(s->seg.hdr, fd, addr);
	if (r == 0) {
		s->connected = 1;
	} else if (e != EINPROGRESS && e != EINTR) {
		/* Refused or unreachable: nothing to attach; the socket may connect again. */
		registry_settled(addr);
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

/* Whether the port's count of proposals (registry_proposals()) moved less than
 * ms before l last saw it move; n gets the count. */
static int proposed_within(struct usock *l, unsigned port, uint32_t ms, uint32_t *n)
{
	uint64_t seen = atomic_load_explicit(&l->proposals_seen, memory_order_relaxed);
	uint32_t now_ms = (uint32_t)(sys_now_ns() / 1000000ull), count = registry_proposals(port);

	if (n)
		*n = count;
	if ((uint32_t)(seen >> 32) != count) {
		atomic_store_explicit(&l->proposals_seen, (uint64_t)count << 32 | now_ms,
				      memory_order_relaxed);
		return 1;
	}
	/* Unsigned: after a wrap of the clock the answer is "recent", which only asks. */
	return now_ms - (uint32_t)seen < ms;
}

/* Whether to ask the siblings for the proposal of a connection accepted on l that
 * we hold none for: only on a port several processes accept on, unless one of them
 * failed to answer lately, and only while a client may still wait for the attach
 * of a proposal to the port: one moved its count (registry_proposals()) less than
 * the longest a client waits (USMC_HANDSHAKE_TIMEOUT_MS) before we last saw the
 * count move. Otherwise the connection comes from a plain client, and asking
 * about it would only make it wait for the siblings' answers. */
static int worth_asking(struct usock *l, unsigned port)
{
	return registry_port_shared((struct sockaddr *)&l->bound) && registry_handoff_ok(port) &&
	       proposed_within(l, port, cfg.handshake_ms, NULL);
}

/* Whether a connection accepted on l, on port, may have a proposal at all: not
 * when every proposal clients made to the port is settled, which costs no
 * system call, where looking for it costs two (reading the channel the last
 * match came from, then looking at every channel; the latter stays, for what
 * else they hold), and a prefork worker's asks to its siblings. A client that died
 * with its proposal unsettled keeps the counts apart until the count stood still
 * for longer than clients wait and proposals live (twice the handshake timeout).
 * Only for a process using the local device alone: clients through a region
 * count in another kernel's registry. */
static int may_have_proposal(struct usock *l, unsigned port)
{
	uint32_t n;

	if (dev_count > 1 || !registry_unsettled(port))
		return dev_count > 1;
	if (!proposed_within(l, port, 2 * cfg.handshake_ms, &n))
		registry_settle_all(port, n);
	return 1;
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
	/* What an accepted socket inherits from its listener (sk_clone_lock()). */
	s->oobinline = l->oobinline;
	s->sndbuf = l->sndbuf;
	s->rcvbuf = l->rcvbuf;
	s->sndbuf_eff = l->sndbuf_eff;
	s->rcvbuf_eff = l->rcvbuf_eff;
	s->rcvlowat = l->rcvlowat;
	s->notsent_lowat = l->notsent_lowat;
	if (!may_have_proposal(l, addr_port((struct sockaddr *)&l->bound))) {
		lgr_server_take_news();
		fell_back(s, fd, DECL_NO_PROPOSAL);
		return;
	}
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
	registry_settled((struct sockaddr *)&l->bound);
	rings_setup(s);
	tx_limit(s, s->tx.size);
	/* Handed over by a sibling: the client's channel leads to the sibling, and
	 * its hanging up (the sibling exiting) says nothing about us. */
	if (!loc.lgr)
		mark_handed(s);
	atomic_store(&s->mode, MODE_SHM);
	stat_accel(SIDE_SERVER, (int)s->dev->kind, s->tx.size, s->rx.size);
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
	/* Published wherever our endpoint is open: a client finds it on the
	 * device it prefers. */
	int published = 0;
	for (int i = 0; i < dev_count; i++) {
		const char *name = lgr_server_name(dev_list[i]);
		published |= *name && dev_list[i]->reg_add((struct sockaddr *)&ss, v6only, name) == 0;
	}
	if (!published) {
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
	atomic_store(&s->mode, MODE_SHM);
	if (atomic_load_explicit(&s->tx_window_hit, memory_order_relaxed))
		atomic_fetch_add(&s->tx_grown, 1);
	stat_accel(SIDE_CLIENT, (int)s->dev->kind, s->tx.size, s->rx.size);
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
	registry_settled((struct sockaddr *)&s->dst);
	send_all_plain(fd, s->tx.data, s->tx.pos);
	lgr_withdraw(s->seg.lgr, s->conn_id);
	shm_teardown(s, 0);
	fell_back(s, fd, why);
	epoll_sock_fallback(s, fd);
}

int tcp_has_something(int fd)
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
	else if (again && !s->dev->reg_still((struct sockaddr *)&s->dst, s->seg.lgr->peer))
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
