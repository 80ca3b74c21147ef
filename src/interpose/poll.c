/* poll, ppoll, select and pselect over a mix of plain and accelerated sockets.
 *
 * Accelerated sockets are first checked in shared memory without a system call.
 * Only when nothing is ready does the caller sleep, in one ppoll over the real
 * descriptors plus the doorbell of each accelerated socket, after asking the
 * peers to ring (and re-checking, so a ring cannot be missed). A wait on an
 * accelerated listener also watches this process's handoff socket, and answers
 * the siblings that ask it for proposals (handoff.h) without returning, and the
 * wake descriptor of every device in use that wakes nobody by itself. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

#include "../core/conn.h"
#include "../core/handoff.h"
#include "../dev/dev.h"
#include "../core/hooks.h"
#include "../core/sys.h"
#include "epoll.h"
#include "fdtab.h"

#define STACK_FDS 64

struct look {
	struct pollfd *p; /* the descriptors, then the doorbells and the handoff socket */
	nfds_t n, k;      /* how many descriptors; with the rest */
	struct pollfd *fds;
	struct usock **acc;
};

/* Whether accelerated socket s is ready for what pf asks, as shared memory and
 * what the library knows of its TCP socket tell, mostly without a system call. */
static int accel_ready(struct usock *s, const struct pollfd *pf)
{
	return conn_revents(s, pf->fd, pf->events, conn_tcp_state(s, pf->fd, 0)) != 0;
}

/* Spinning: when deep, everything in the kernel without sleeping, then the
 * accelerated sockets in shared memory (CONN_LOOK_NEWS when one is ready). The
 * first look is deep: at CONN_LOOK_NEWS, the descriptors' revents are the
 * kernel's. */
static int look_now(void *arg, int deep)
{
	struct look *l = arg;
	struct timespec zero = {0, 0};
	int r;

	if (deep && (r = real.ppoll(l->p, l->k, &zero, NULL)) != 0)
		return r;
	for (nfds_t i = 0; i < l->n; i++)
		if (l->acc[i] && accel_ready(l->acc[i], &l->fds[i]))
			return CONN_LOOK_NEWS;
	return 0;
}

/* Sockets whose waits the library takes over: accelerated ones, and listeners
 * whose siblings may ask for proposals. */
static int ours(struct usock *s, int *listener)
{
	if (conn_accel(s))
		return 1;
	*listener = conn_listening(s);
	return *listener;
}

/* Whether a device in use wakes nobody by itself (dev_ops.wake_fd): a wait on a
 * listener must then wake for the device's looks, as accept() does. They take in
 * the link groups new and gone at our endpoint, renew our lease and judge the
 * peers: a server idle in poll() on its listener would otherwise never let go of
 * a client that left (whose memory then never returns), and its lease would run
 * out for the peers of other kernels. */
static int listener_wakes(void)
{
	for (int i = 0; i < dev_count; i++)
		if (dev_list[i]->wake_fd && dev_list[i]->wake_fd() >= 0)
			return 1;
	return 0;
}

/* hfd: the handoff socket to answer on while waiting, or -1; nested: the device
 * whose wake descriptor an epoll set polled here needs watched, or NULL;
 * listening: a listener is among the descriptors (listener_wakes). */
static int poll_accel(struct pollfd *fds, nfds_t n, struct usock **acc, int nacc,
		      const struct timespec *tmo, const sigset_t *mask, int hfd,
		      const struct dev_ops *nested, int listening)
{
	struct pollfd stack[STACK_FDS * 2 + 1 + DEV_KINDS], *p = stack;
	nfds_t total = n + (nfds_t)nacc + 1 + DEV_KINDS;
	/* The devices of the sockets that sleep on the device's wake descriptor,
	 * and where theirs is in p. */
	const struct dev_ops *wakers[DEV_KINDS];
	nfds_t wake_at[DEV_KINDS];
	int nwakers = 0, quiet = 0;
	uint64_t deadline = 0;
	int ret = -1;

	if (total > STACK_FDS * 2 + 1 + DEV_KINDS && !(p = malloc(total * sizeof(*p)))) {
		errno = ENOMEM;
		return -1;
	}
	if (tmo)
		deadline = sys_now_ns() + (uint64_t)tmo->tv_sec * 1000000000ull +
			   (uint64_t)tmo->tv_nsec + 1;
	/* Once for the call: a handler that runs between two rounds (after one
	 * looked for handlers, before the next sleeps) must still interrupt it. */
	signal_wait_begin();
	for (;;) {
		nfds_t k = n;
		int ready = 0, sleep = !tmo || tmo->tv_sec || tmo->tv_nsec, pending = 0;
		int may_wait = sleep;
		for (nfds_t i = 0; i < n; i++) {
			p[i] = fds[i];
			if (acc[i]) {
				p[i].events = conn_poll_prepare(acc[i], fds[i].events);
				p[k++] = (struct pollfd){acc[i]->bell, POLLIN, 0};
				if (accel_ready(acc[i], &fds[i]))
					sleep = 0;
				pending |= conn_pending(acc[i]);
			}
		}
		if (hfd >= 0)
			p[k++] = (struct pollfd){hfd, POLLIN, 0};
		nwakers = 0;
		for (nfds_t i = 0; i <= n + (listening ? (nfds_t)dev_count : 0); i++) {
			const struct dev_ops *d = i < n ? (acc[i] ? acc[i]->dev : NULL)
					    : i == n ? nested : dev_list[i - n - 1];
			int fd = d && d->wake_fd ? d->wake_fd() : -1, seen = 0;
			for (int w = 0; w < nwakers; w++)
				seen |= wakers[w] == d;
			if (fd < 0 || seen)
				continue;
			if (sleep && !quiet)
				d->wake_soon(sys_now_ns());
			wakers[nwakers] = d;
			wake_at[nwakers++] = k;
			p[k++] = (struct pollfd){fd, POLLIN, 0};
		}
		/* Spin before sleeping, unless a signal mask is the application's to
		 * apply while it waits. The peers are asked to ring only after it:
		 * while we spin, their bytes are seen in shared memory. */
		int polls = 0;
		for (int w = 0; w < nwakers; w++)
			polls |= dev_polls(wakers[w]);
		struct look l = {p, n, k, fds, acc};
		struct timespec zero = {0, 0}, left, *t = sleep ? (struct timespec *)tmo : &zero;
		/* Not after a round that brought nothing (a device's look): nothing
		 * happened that an answer could follow. */
		int r = sleep && !mask && !quiet
				? conn_busy_wait(look_now, &l, tmo ? sys_ms_left(deadline) : -1, polls)
				: 0;
		if (r == CONN_LOOK_NEWS)
			r = 1;
		/* A handler that ran while we spun interrupts the call, as it
		 * would have interrupted the kernel's. */
		if (!r && sleep && signal_caught()) {
			errno = EINTR;
			break;
		}
		int armed = !r && sleep;
		if (armed)
			for (nfds_t i = 0; i < n; i++) {
				if (!acc[i])
					continue;
				conn_arm_wait_begin(acc[i]);
				conn_bell_wait_begin(acc[i]);
				if (conn_arm(acc[i], fds[i].fd, fds[i].events))
					sleep = 0;
			}
		if (sleep && (tmo || pending)) {
			/* A client waiting for its attach is looked at again soon: a
			 * decline by the registry or a plain peer rings no bell. */
			int ms = tmo ? sys_ms_left(deadline) : CONN_PENDING_RECHECK_MS;
			if (pending && ms > CONN_PENDING_RECHECK_MS)
				ms = CONN_PENDING_RECHECK_MS;
			left = (struct timespec){ms / 1000, (long)(ms % 1000) * 1000000};
			t = &left;
		}
		if (!r)
			r = sleep ? signal_ppoll(p, k, t, mask) : real.ppoll(p, n, &zero, mask);
		for (nfds_t i = 0; i < n; i++)
			if (acc[i]) {
				conn_disarm(acc[i], fds[i].events);
				if (armed) {
					conn_bell_wait_end(acc[i]);
					conn_arm_wait_end(acc[i]);
				}
			}
		if (r < 0)
			break;
		if (sleep)
			for (nfds_t i = 0, j = n; i < n; i++)
				if (acc[i] && p[j++].revents)
					conn_bell_clear(acc[i], NULL);
		for (int w = 0; sleep && w < nwakers; w++)
			if (p[wake_at[w]].revents)
				wakers[w]->wake_tick();
		if (sleep && hfd >= 0 && p[n + (nfds_t)nacc].revents)
			handoff_serve();
		for (nfds_t i = 0; i < n; i++) {
			fds[i].revents = acc[i] ? conn_revents(acc[i], fds[i].fd, fds[i].events, p[i].revents)
						: p[i].revents;
			if (fds[i].revents)
				ready++;
		}
		/* What looked ready and was not (another thread's operation held
		 * its lock) is looked at again: a poll that may wait does not
		 * return empty before its time. */
		if (ready || !may_wait || (tmo && sys_now_ns() >= deadline)) {
			ret = ready;
			break;
		}
		/* Looking again (a device's look woke the sleep for nothing): a
		 * handler that ran meanwhile interrupts the call all the same. */
		if (signal_caught()) {
			errno = EINTR;
			break;
		}
		quiet = 1;
	}
	if (p != stack)
		free(p);
	return ret;
}

static int poll_common(struct pollfd *fds, nfds_t n, const struct timespec *tmo,
		       const sigset_t *mask, int use_ppoll, int ms)
{
	struct usock *stack[STACK_FDS], **acc = stack;
	int nacc = 0, listening = 0, r;
	const struct dev_ops *nested = NULL;

	if (n > STACK_FDS && !(acc = calloc(n, sizeof(*acc)))) {
		errno = ENOMEM;
		return -1;
	}
	for (nfds_t i = 0; i < n; i++) {
		struct obj *o = fdtab_get(fds[i].fd);
		struct usock *s = sock_of(o);
		int listener = 0;
		acc[i] = NULL;
		if (s && ours(s, &listener) && !listener) {
			acc[i] = s;
			nacc++;
		} else if (o) {
			/* An epoll set waited for by poll: it must look readable. */
			epoll_shadow_nest(o);
			if (o->kind == OBJ_EPOLL)
				nested = epoll_nested_waker();
			listening |= listener;
			obj_put(o);
		}
	}
	int hfd = listening ? handoff_fd() : -1;
	listening = listening && listener_wakes();
	if (!nacc && hfd < 0 && !nested && !listening)
		r = use_ppoll ? real.ppoll(fds, n, tmo, mask) : real.poll(fds, n, ms);
	else
		r = poll_accel(fds, n, acc, nacc, tmo, mask, hfd, nested, listening);
	for (nfds_t i = 0; i < n && nacc; i++)
		if (acc[i])
			usock_put(acc[i]);
	if (acc != stack)
		free(acc);
	return r;
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	struct timespec ts = {timeout / 1000, (long)(timeout % 1000) * 1000000};

	return poll_common(fds, n, timeout < 0 ? NULL : &ts, NULL, 0, timeout);
}

int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	(void)fdslen;
	return poll(fds, n, timeout);
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
	return poll_common(fds, n, tmo, mask, 1, 0);
}

int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask,
		size_t fdslen)
{
	(void)fdslen;
	return ppoll(fds, n, tmo, mask);
}

static int any_accel(int nfds, fd_set *r, fd_set *w, fd_set *x)
{
	for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
		if (!((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (x && FD_ISSET(fd, x))))
			continue;
		struct obj *o = fdtab_get(fd);
		int listener, yes = sock_of(o) && ours(sock_of(o), &listener);
		if (o) {
			epoll_shadow_nest(o);
			/* ...and its sleeps' device may need us to watch for it. */
			yes |= o->kind == OBJ_EPOLL && epoll_nested_waker();
			obj_put(o);
		}
		if (yes)
			return 1;
	}
	return 0;
}

/* select() as poll(): readable includes hang-up and error, as the kernel has it. */
static int select_as_poll(int nfds, fd_set *r, fd_set *w, fd_set *x, const struct timespec *tmo,
			  const sigset_t *mask)
{
	struct pollfd *p = calloc((size_t)nfds, sizeof(*p));
	int n = 0, count = 0;

	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (w && FD_ISSET(fd, w))
			ev |= POLLOUT;
		if (x && FD_ISSET(fd, x))
			ev |= POLLPRI;
		if (ev)
			p[n++] = (struct pollfd){fd, ev, 0};
	}
	int ret = poll_common(p, (nfds_t)n, tmo, mask, 1, 0);
	if (ret >= 0) {
		for (int i = 0; i < n; i++)
			if (p[i].revents & POLLNVAL) {
				free(p);
				errno = EBADF;
				return -1;
			}
		if (r)
			FD_ZERO(r);
		if (w)
			FD_ZERO(w);
		if (x)
			FD_ZERO(x);
		for (int i = 0; i < n; i++) {
			short re = p[i].revents;
			if (r && (p[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR)))
				FD_SET(p[i].fd, r), count++;
			if (w && (p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR)))
				FD_SET(p[i].fd, w), count++;
			if (x && (p[i].events & POLLPRI) && (re & POLLPRI))
				FD_SET(p[i].fd, x), count++;
		}
		ret = count;
	}
	free(p);
	return ret;
}

int select(int nfds, fd_set *r, fd_set *w, fd_set *x, struct timeval *tv)
{
	if (nfds <= 0 || !any_accel(nfds, r, w, x))
		return real.select(nfds, r, w, x, tv);
	struct timespec ts, *t = NULL;
	uint64_t start = sys_now_ns();
	if (tv) {
		ts = (struct timespec){tv->tv_sec, tv->tv_usec * 1000};
		t = &ts;
	}
	int ret = select_as_poll(nfds, r, w, x, t, NULL);
	if (tv) {
		/* Linux reports the time left, and so do we. */
		uint64_t used = sys_now_ns() - start;
		uint64_t total = (uint64_t)tv->tv_sec * 1000000000ull + (uint64_t)tv->tv_usec * 1000ull;
		uint64_t left = used < total ? total - used : 0;
		tv->tv_sec = (time_t)(left / 1000000000ull);
		tv->tv_usec = (suseconds_t)(left % 1000000000ull / 1000);
	}
	return ret;
}

int pselect(int nfds, fd_set *r, fd_set *w, fd_set *x, const struct timespec *tmo,
	    const sigset_t *mask)
{
	if (nfds <= 0 || !any_accel(nfds, r, w, x))
		return real.pselect(nfds, r, w, x, tmo, mask);
	return select_as_poll(nfds, r, w, x, tmo, mask);
}
