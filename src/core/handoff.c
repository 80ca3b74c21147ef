#include "handoff.h"

#include <errno.h>
#include <poll.h>
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

static const struct dev_ops *dev = &dev_lo;

/* Siblings asked at once: the claimants a port records. */
#define ASK_MAX 8
/* An asker sends its ASK right after connecting; one that does not is not
 * waited for long. */
#define ASK_ARRIVAL_MS 10

static struct {
	pthread_mutex_t lock;
	int fd;           /* listening handoff socket, -1 until opened */
	uint64_t seq;     /* numbers our asks */
} ho = {PTHREAD_MUTEX_INITIALIZER, -1, 0};

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

static int listener_is(int c, pid_t pid)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);

	return real.getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0 && cr.pid == pid;
}

int handoff_fd(void)
{
	char path[4200];

	pthread_mutex_lock(&ho.lock);
	if (ho.fd < 0) {
		path_of(getpid(), path, sizeof(path));
		ho.fd = dev->ctl_listen(path);
		if (ho.fd < 0)
			ho.fd = -1;
	}
	int fd = ho.fd;
	pthread_mutex_unlock(&ho.lock);
	return fd;
}

void handoff_atfork_child(void)
{
	/* Another thread of the parent may have held it. The socket is the
	 * parent's (named after its pid): the child opens its own when asked. */
	pthread_mutex_init(&ho.lock, NULL);
	if (ho.fd >= 0)
		real.close(ho.fd);
	ho.fd = -1;
}

void handoff_close(void)
{
	pthread_mutex_lock(&ho.lock);
	if (ho.fd >= 0)
		real.close(ho.fd);
	ho.fd = -1;
	pthread_mutex_unlock(&ho.lock);
}

/* Where an answer goes: the connection its ASK came on, with the ASK's number. */
struct reply_to {
	int fd;
	uint64_t seq;
};

static int send_handoff(void *ctx, const struct clc_proposal *p, const int *fds)
{
	const struct reply_to *t = ctx;
	struct clc_handoff h;

	clc_handoff_init(&h, t->seq, p);
	return dev->ctl_send(t->fd, &h, sizeof(h), fds, CLC_FD_MAX) == (ssize_t)sizeof(h) ? 0 : -1;
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

/* One sibling's connection: its ASK, answered and closed. */
static void answer(int c)
{
	char buf[sizeof(union clc_msg)];
	union clc_msg m;
	int fds[1], nfds = 0;
	struct pollfd pf = {c, POLLIN, 0};
	struct ucred cr;
	socklen_t l = sizeof(cr);

	/* Its ASK follows its connect at once. */
	ssize_t n = real.poll(&pf, 1, ASK_ARRIVAL_MS) == 1 ? dev->ctl_recv(c, buf, sizeof(buf), fds, &nfds)
							  : -EAGAIN;
	if (n > 0 && clc_decode(buf, (size_t)n, nfds, &m) == CLC_OK && m.hdr.type == CLC_ASK &&
	    real.getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0 &&
	    sibling(cr.pid, m.ask.server_port)) {
		struct reply_to t = {c, m.ask.seq};
		struct addr local, peer;
		ask_addrs(&m.ask, &local, &peer);
		if (!lgr_server_give(&local, &peer, send_handoff, &t)) {
			struct clc_handoff h;
			clc_handoff_init(&h, t.seq, NULL);
			dev->ctl_send(c, &h, sizeof(h), NULL, 0);
		}
	} else if (n != -EAGAIN) {
		stat_add(STAT_HANDSHAKE_ERR, 1);
	}
	real.close(c);
}

void handoff_serve(void)
{
	int lfd = handoff_fd(), c;

	if (lfd < 0)
		return;
	while ((c = dev->ctl_accept(lfd)) >= 0)
		answer(c);
}

int handoff_fetch(int tcpfd, const struct sockaddr *peer, const struct sockaddr_storage *bound,
		  _Atomic uint64_t *netns_cookie, struct seg_loc *loc, int *bell, uint64_t *conn_id)
{
	pid_t pids[ASK_MAX], me = getpid();
	struct pollfd pf[ASK_MAX + 1];
	char path[4200];
	int n = registry_claimants(addr_port((const struct sockaddr *)bound), pids, ASK_MAX);
	int asked = 0, got = 0;
	struct addr local, remote;
	struct clc_ask a;

	/* The listener's own address, unless it takes any. */
	addr_from_sockaddr(&remote, peer);
	addr_from_sockaddr(&local, (const struct sockaddr *)bound);
	if (addr_is_any(&local)) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		if (getsockname(tcpfd, (struct sockaddr *)&ss, &sl) < 0)
			return 0;
		addr_from_sockaddr(&local, (struct sockaddr *)&ss);
	}
	pthread_mutex_lock(&ho.lock);
	clc_ask_init(&a, ++ho.seq);
	pthread_mutex_unlock(&ho.lock);
	ask_fill(&a, &local, &remote);
	/* While we wait, a sibling may be waiting for us: keep answering. */
	pf[0] = (struct pollfd){handoff_fd(), POLLIN, 0};
	for (int i = 0; i < n; i++) {
		if (pids[i] == me)
			continue;
		path_of(pids[i], path, sizeof(path));
		int c = dev->ctl_connect(path);
		if (c < 0)
			continue;
		/* Proposals come only from the sibling itself. */
		if (!listener_is(c, pids[i]) ||
		    dev->ctl_send(c, &a, sizeof(a), NULL, 0) != (ssize_t)sizeof(a)) {
			real.close(c);
			continue;
		}
		pf[1 + asked++] = (struct pollfd){c, POLLIN, 0};
	}
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
			char buf[sizeof(union clc_msg)];
			union clc_msg m;
			int fds[CLC_FD_MAX], nfds = CLC_FD_MAX;
			ssize_t k = dev->ctl_recv(pf[i].fd, buf, sizeof(buf), fds, &nfds);
			if (k == -EAGAIN)
				continue;
			int e = k > 0 ? clc_decode(buf, (size_t)k, nfds, &m) : CLC_ETRUNC;
			if (e == CLC_OK && m.hdr.type == CLC_HANDOFF && m.handoff.seq == a.seq &&
			    m.handoff.found) {
				got = lgr_server_adopt(tcpfd, peer, bound, netns_cookie, &m.handoff.p, fds,
						       loc, bell);
				if (got) {
					*conn_id = m.handoff.p.conn_id;
					stat_add(STAT_HANDOFFS, 1);
				}
			} else {
				if (k > 0 && (e != CLC_OK || m.hdr.type != CLC_HANDOFF || m.handoff.seq != a.seq))
					stat_add(STAT_HANDSHAKE_ERR, 1);
				for (int j = 0; j < (k > 0 ? nfds : 0); j++)
					real.close(fds[j]);
			}
			real.close(pf[i].fd);
			pf[i].fd = -1;
			left--;
		}
	}
	int silent = 0;
	for (int i = 1; i <= asked; i++)
		if (pf[i].fd >= 0) {
			real.close(pf[i].fd);
			silent = 1;
		}
	if (!got && silent)
		registry_handoff_failed(addr_port((const struct sockaddr *)bound));
	return got;
}
