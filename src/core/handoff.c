#include "handoff.h"

#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../dev/dev.h"
#include "addr.h"
#include "clc.h"
#include "config.h"
#include "lgr.h"
#include "registry.h"
#include "stats.h"
#include "sys.h"

/* Siblings share one kernel: they talk over the local device's channels,
 * whatever device carries their connections. */
static const struct dev_ops *dev = &dev_lo;

/* Siblings asked at once: the claimants a port records. */
#define ASK_MAX 8
/* Our connections to siblings: one more than an ask uses, so that one is
 * always free to go. */
#define OUT_MAX (ASK_MAX + 1)
/* Siblings' connections kept open to us. */
#define IN_MAX 64
/* The data of the listening socket's entry in our epoll instance; a sibling's
 * connection's entry holds its pid and descriptor. */
#define LISTENER_TAG UINT64_MAX

/* Connections between siblings stay open: a handoff then costs a message each
 * way, where a connection per ASK cost a dozen more system calls (socket,
 * connect, accept, credentials, close on both sides). */
struct link {
	int fd;
	pid_t pid;
	uint64_t seq;     /* ours: the last ask sent on it */
};

static struct {
	/* Taken in this order, each only with those before it. */
	pthread_mutex_t ask_lock;   /* one ask at a time: the links out are shared */
	pthread_mutex_t serve_lock; /* one thread answers at a time */
	pthread_mutex_t lock;       /* opening and closing the sockets */
	int fd;           /* listening handoff socket, -1 until opened */
	int ep;           /* epoll instance holding fd and the links in: what waiters watch */
	struct link in[IN_MAX];   /* siblings' connections to us */
	int nin;
	struct link out[OUT_MAX]; /* our connections to siblings */
	int nout;
	uint64_t seq;     /* numbers our asks */
} ho = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
	-1, -1, {{0, 0, 0}}, 0, {{0, 0, 0}}, 0, 0};

/* Abstract, so that workers which dropped privileges can reach each other
 * whatever the runtime directory's permissions (they may not even look it up);
 * named after the runtime directory's path (trust domains stay apart) and the
 * pid. Nobody else can take a sibling's name for it: an asker checks who
 * listens there (SO_PEERCRED, in its own pid namespace). */
static void path_of(pid_t pid, char *buf, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const char *p = cfg.rundir; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	snprintf(buf, len, "@usmc-h-%016llx-%d", (unsigned long long)h, (int)pid);
}

static pid_t peer_pid(int c)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);

	return real.getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0 ? cr.pid : 0;
}

int handoff_fd(void)
{
	char path[4200];

	pthread_mutex_lock(&ho.lock);
	if (ho.ep < 0) {
		path_of(getpid(), path, sizeof(path));
		int fd = lo_ctl_listen(path);
		int ep = fd < 0 ? -1 : sys_fd_high(real.epoll_create1(EPOLL_CLOEXEC));
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = LISTENER_TAG};
		if (ep >= 0 && real.epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0) {
			ho.fd = fd;
			ho.ep = ep;
		} else {
			if (ep >= 0)
				real.close(ep);
			if (fd >= 0)
				real.close(fd);
		}
	}
	int ep = ho.ep;
	pthread_mutex_unlock(&ho.lock);
	return ep;
}

/* Closes every socket. Called with ho.lock held. */
static void close_all(void)
{
	for (int i = 0; i < ho.nin; i++)
		real.close(ho.in[i].fd);
	for (int i = 0; i < ho.nout; i++)
		real.close(ho.out[i].fd);
	ho.nin = ho.nout = 0;
	if (ho.ep >= 0)
		real.close(ho.ep);
	if (ho.fd >= 0)
		real.close(ho.fd);
	ho.ep = ho.fd = -1;
}

void handoff_atfork_child(void)
{
	/* Another thread of the parent may have held them. The sockets are the
	 * parent's (its listener is named after its pid, its links carry its
	 * credentials): the child opens its own when asked. */
	pthread_mutex_init(&ho.ask_lock, NULL);
	pthread_mutex_init(&ho.serve_lock, NULL);
	pthread_mutex_init(&ho.lock, NULL);
	close_all();
}

void handoff_close(void)
{
	pthread_mutex_lock(&ho.ask_lock);
	pthread_mutex_lock(&ho.serve_lock);
	pthread_mutex_lock(&ho.lock);
	close_all();
	pthread_mutex_unlock(&ho.lock);
	pthread_mutex_unlock(&ho.serve_lock);
	pthread_mutex_unlock(&ho.ask_lock);
}

/* Where an answer goes: the connection its ASK came on, with the ASK's number. */
struct reply_to {
	int fd;
	uint64_t seq;
};

static int send_handoff(void *ctx, const struct lgr_gift *g)
{
	const struct reply_to *t = ctx;
	struct clc_handoff h;

	clc_handoff_init(&h, t->seq, &g->p);
	h.dev = g->dev;
	h.link[0] = g->link[0];
	h.link[1] = g->link[1];
	return dev->ctl_send(t->fd, &h, sizeof(h), g->fds, g->nfds) == (ssize_t)sizeof(h) ? 0 : -1;
}

/* The 4-tuple an ASK names, and back. */
static void ask_fill(struct clc_ask *a, const struct addr *local, const struct addr *peer)
{
	size_t n = local->family == AF_INET ? 4 : 16;

	a->family = local->family == AF_INET ? 4 : 6;
	a->server_port = local->port;
	a->client_port = peer->port;
	memcpy(a->server_ip, local->ip, n);
	memcpy(a->client_ip, peer->ip, n);
}

static void ask_addrs(const struct clc_ask *a, struct addr *local, struct addr *peer)
{
	int family = a->family == 4 ? AF_INET : AF_INET6;

	*local = (struct addr){.family = family, .port = a->server_port};
	*peer = (struct addr){.family = family, .port = a->client_port};
	memcpy(local->ip, a->server_ip, sizeof(local->ip));
	memcpy(peer->ip, a->client_ip, sizeof(peer->ip));
}

/* Whether pid accepts on port too: proposals go to nobody else. */
static int sibling(pid_t pid, unsigned port)
{
	pid_t pids[ASK_MAX];
	int n = registry_claimants(port, pids, ASK_MAX);

	for (int i = 0; i < n; i++)
		if (pids[i] == pid)
			return 1;
	return 0;
}

/* Every ASK waiting on a sibling's link, answered. Returns -1 when the link
 * must go: hung up, broken, or used by a process that does not accept on the
 * port it asks about (which may have been a sibling once). */
static int answer(int c, pid_t pid)
{
	for (;;) {
		char buf[sizeof(union clc_msg)];
		union clc_msg m;
		int fds[1], nfds = 1;
		ssize_t n = dev->ctl_recv(c, buf, sizeof(buf), fds, &nfds);

		if (n == -EAGAIN)
			return 0;
		if (n <= 0)
			return -1;
		if (clc_decode(buf, (size_t)n, nfds, &m) != CLC_OK || m.hdr.type != CLC_ASK ||
		    !sibling(pid, m.ask.server_port)) {
			for (int i = 0; i < nfds; i++)
				real.close(fds[i]);
			stat_add(STAT_HANDSHAKE_ERR, 1);
			return -1;
		}
		struct reply_to t = {c, m.ask.seq};
		struct addr local, peer;
		ask_addrs(&m.ask, &local, &peer);
		if (!lgr_server_give(&local, &peer, m.ask.netns_cookie, send_handoff, &t)) {
			struct clc_handoff h;
			clc_handoff_init(&h, t.seq, NULL);
			if (dev->ctl_send(c, &h, sizeof(h), NULL, 0) != (ssize_t)sizeof(h))
				return -1;
		}
	}
}

/* Called with ho.serve_lock held, between two batches of events (an evicted
 * link must not be named by one still to be handled). When all the places are
 * taken, by connections that never ask perhaps, the oldest goes: a sibling
 * whose link is gone connects again at its next ask. */
static void link_in(int c)
{
	pid_t pid = peer_pid(c);
	struct epoll_event ev = {.events = EPOLLIN,
				 .data.u64 = (uint64_t)(uint32_t)pid << 32 | (uint32_t)c};
	int old = -1;

	pthread_mutex_lock(&ho.lock);
	if (pid > 0 && ho.nin == IN_MAX) {
		old = ho.in[0].fd;
		memmove(ho.in, ho.in + 1, sizeof(ho.in[0]) * (IN_MAX - 1));
		ho.nin--;
	}
	if (pid > 0 && real.epoll_ctl(ho.ep, EPOLL_CTL_ADD, c, &ev) == 0) {
		ho.in[ho.nin++] = (struct link){c, pid, 0};
		c = -1;
	}
	pthread_mutex_unlock(&ho.lock);
	if (old >= 0)
		real.close(old);
	if (c >= 0)
		real.close(c);
}

/* Called with ho.serve_lock held. */
static void unlink_in(int c)
{
	pthread_mutex_lock(&ho.lock);
	for (int i = 0; i < ho.nin; i++)
		if (ho.in[i].fd == c) {
			memmove(ho.in + i, ho.in + i + 1, sizeof(ho.in[0]) * (size_t)(ho.nin - i - 1));
			ho.nin--;
			break;
		}
	pthread_mutex_unlock(&ho.lock);
	/* Closing removes it from the epoll instance. */
	real.close(c);
}

void handoff_serve(void)
{
	struct epoll_event ev[16];
	int n, c;

	if (handoff_fd() < 0)
		return;
	/* Closing them takes serve_lock: they stay what they are read as here. */
	pthread_mutex_lock(&ho.serve_lock);
	pthread_mutex_lock(&ho.lock);
	int ep = ho.ep, lfd = ho.fd;
	pthread_mutex_unlock(&ho.lock);
	int again;
	do {
		int accepting = 0;
		n = ep < 0 ? 0 : real.epoll_wait(ep, ev, 16, 0);
		for (int i = 0; i < n; i++) {
			if (ev[i].data.u64 == LISTENER_TAG) {
				accepting = 1;
				continue;
			}
			c = (int)(uint32_t)ev[i].data.u64;
			if (answer(c, (pid_t)(ev[i].data.u64 >> 32)) < 0)
				unlink_in(c);
		}
		while (accepting && (c = lo_ctl_accept(lfd)) >= 0)
			link_in(c);
		/* A new link's first ASK may already wait. */
		again = n == 16 || accepting;
	} while (again);
	pthread_mutex_unlock(&ho.serve_lock);
}

/* Our link to sibling pid for the ask numbered seq, opened if there is none.
 * Called with ho.ask_lock held. */
static int link_out(pid_t pid, uint64_t seq)
{
	char path[4200];

	for (int i = 0; i < ho.nout; i++)
		if (ho.out[i].pid == pid) {
			ho.out[i].seq = seq;
			return ho.out[i].fd;
		}
	path_of(pid, path, sizeof(path));
	int c = dev->ctl_connect(path);
	if (c < 0)
		return -1;
	/* Proposals come only from the sibling itself. */
	if (peer_pid(c) != pid) {
		real.close(c);
		return -1;
	}
	stat_add(STAT_HANDOFF_LINKS, 1);
	pthread_mutex_lock(&ho.lock);
	/* Full of links to processes that left (workers replaced by a reload): one
	 * this ask does not use goes. */
	for (int i = 0; ho.nout == OUT_MAX && i < ho.nout; i++)
		if (ho.out[i].seq != seq) {
			real.close(ho.out[i].fd);
			ho.out[i] = ho.out[--ho.nout];
		}
	ho.out[ho.nout++] = (struct link){c, pid, seq};
	pthread_mutex_unlock(&ho.lock);
	return c;
}

/* Closes our link to pid: it broke, or an answer may still come on it, which
 * would hold the client's socket in our queue. Called with ho.ask_lock held. */
static void unlink_out(pid_t pid)
{
	pthread_mutex_lock(&ho.lock);
	for (int i = 0; i < ho.nout; i++)
		if (ho.out[i].pid == pid) {
			real.close(ho.out[i].fd);
			ho.out[i] = ho.out[--ho.nout];
			break;
		}
	pthread_mutex_unlock(&ho.lock);
}

/* Sends a to sibling pid; a link that broke since its last use (the sibling
 * dropped it) is opened again once. Returns the link or -1. */
static int ask(pid_t pid, const struct clc_ask *a)
{
	for (int tries = 0; tries < 2; tries++) {
		int c = link_out(pid, a->seq);
		if (c < 0)
			return -1;
		if (dev->ctl_send(c, a, sizeof(*a), NULL, 0) == (ssize_t)sizeof(*a))
			return c;
		unlink_out(pid);
	}
	return -1;
}

/* The next message on link c, past the "not here"s it still owed to asks
 * before seq that another sibling answered first. As ctl_recv, with the
 * message decoded into m (e: clc_decode's verdict). */
static ssize_t recv_answer(int c, uint64_t seq, union clc_msg *m, int *fds, int *nfds, int *e)
{
	for (int room = *nfds;; *nfds = room) {
		char buf[sizeof(union clc_msg)];
		ssize_t k = dev->ctl_recv(c, buf, sizeof(buf), fds, nfds);
		*e = k > 0 ? clc_decode(buf, (size_t)k, *nfds, m) : CLC_ETRUNC;
		if (*e != CLC_OK || m->hdr.type != CLC_HANDOFF || m->handoff.seq >= seq ||
		    m->handoff.found)
			return k;
	}
}

int handoff_fetch(const struct lgr_accepted *c, struct seg_loc *loc, int *bell, uint64_t *conn_id)
{
	pid_t pids[ASK_MAX], asked_pid[ASK_MAX], me = sys_pid();
	struct pollfd pf[ASK_MAX + 1];
	int n = registry_claimants(c->local.port, pids, ASK_MAX);
	int asked = 0, got = 0, hfd = handoff_fd();
	struct clc_ask a;

	pthread_mutex_lock(&ho.ask_lock);
	clc_ask_init(&a, ++ho.seq);
	ask_fill(&a, &c->local, &c->peer);
	a.netns_cookie = lgr_accepted_netns(c);
	/* While we wait, a sibling may be waiting for us: keep answering. */
	pf[0] = (struct pollfd){hfd, POLLIN, 0};
	for (int i = 0; i < n; i++) {
		int link = pids[i] == me ? -1 : ask(pids[i], &a);
		if (link >= 0) {
			asked_pid[asked] = pids[i];
			pf[1 + asked++] = (struct pollfd){link, POLLIN, 0};
		}
	}
	if (asked)
		stat_add(STAT_HANDOFF_ASKS, 1);
	uint64_t deadline = sys_now_ns() + HANDOFF_WAIT_MS * 1000000ull;
	for (int left = asked; left && !got;) {
		int r = real.poll(pf, (nfds_t)(1 + asked), sys_ms_left(deadline));
		if (r <= 0 && !(r < 0 && errno == EINTR))
			break;
		if (pf[0].revents)
			handoff_serve();
		for (int i = 1; i <= asked && !got; i++) {
			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			union clc_msg m;
			int fds[CLC_HFD_MAX], nfds = CLC_HFD_MAX, e;
			ssize_t k = recv_answer(pf[i].fd, a.seq, &m, fds, &nfds, &e);
			if (k == -EAGAIN)
				continue;
			int ok = e == CLC_OK && m.hdr.type == CLC_HANDOFF && m.handoff.seq == a.seq;
			if (ok && m.handoff.found) {
				got = lgr_server_adopt(&m.handoff, fds, loc, bell);
				if (got) {
					*conn_id = m.handoff.p.conn_id;
					stat_add(STAT_HANDOFFS, 1);
				}
			} else {
				if (k > 0 && !ok)
					stat_add(STAT_HANDSHAKE_ERR, 1);
				for (int j = 0; j < (k > 0 ? nfds : 0); j++)
					real.close(fds[j]);
			}
			/* Answered: the link stays for the next ask, unless it broke. */
			if (!ok)
				unlink_out(asked_pid[i - 1]);
			pf[i].fd = -1;
			left--;
		}
	}
	/* A sibling yet to answer keeps its link once another handed the proposal
	 * over: it can only say "not here", which the next ask skips. One silent
	 * while nobody answered may still hand it over late, with the client's
	 * socket: its link goes, so that the answer is refused. */
	int silent = 0;
	for (int i = 1; i <= asked; i++)
		if (pf[i].fd >= 0 && !got) {
			unlink_out(asked_pid[i - 1]);
			silent = 1;
		}
	pthread_mutex_unlock(&ho.ask_lock);
	if (silent)
		registry_handoff_failed(c->local.port);
	return got;
}
