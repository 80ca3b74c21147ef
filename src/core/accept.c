#include "accept.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../dev/dev.h"
#include "conn.h"
#include "handoff.h"
#include "hooks.h"
#include "sys.h"

#define TAG_LISTENER 1u
#define TAG_HANDOFF 2u
/* Then TAG_WAKE + i: the wake descriptor of dev_list[i] (dev_ops.wake_fd). */
#define TAG_WAKE 3u

/* A device whose peers cannot wake us is in use: our sleeps must wake by
 * themselves, and an accept() too (its wake-ups keep our lease). */
static int wake_fd_of(int i)
{
	return dev_list[i]->wake_fd ? dev_list[i]->wake_fd() : -1;
}

int accept_in_library(const struct usock *l)
{
	if (l->forked)
		return 1;
	for (int i = 0; i < dev_count; i++)
		if (wake_fd_of(i) >= 0)
			return 1;
	return 0;
}

/* The listener's instance, opened on first use. The listener joins it with
 * EPOLLEXCLUSIVE: a connection wakes one of the processes waiting, as the
 * kernel's accept() would, not every worker of a prefork server at once. Not the
 * same one, though: the kernel wakes the thread that has waited longest, epoll
 * the first instance registered that waits, so an idle first worker takes every
 * connection. Registering anew at each wait would give the kernel's order, at the
 * cost of a handoff for every connection whose proposal went to another worker
 * (known-differences: prefork_accept_order). Returns -1 if it cannot be had. */
static int instance(struct usock *l, int lfd)
{
	pthread_mutex_lock(&l->lock);
	if (l->accept_ep < 0) {
		/* Siblings that inherited the listener ask for proposals. */
		int hfd = l->forked ? handoff_fd() : -1;
		int ep = l->forked && hfd < 0 ? -1 : sys_fd_high(real.epoll_create1(EPOLL_CLOEXEC));
		struct epoll_event el = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u32 = TAG_LISTENER};
		struct epoll_event eh = {.events = EPOLLIN, .data.u32 = TAG_HANDOFF};
		int ok = ep >= 0 && real.epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &el) == 0 &&
			 (hfd < 0 || real.epoll_ctl(ep, EPOLL_CTL_ADD, hfd, &eh) == 0);
		for (int i = 0; ok && i < dev_count; i++) {
			struct epoll_event ew = {.events = EPOLLIN | EPOLLET,
						 .data.u32 = TAG_WAKE + (uint32_t)i};
			int wfd = wake_fd_of(i);
			ok = wfd < 0 || real.epoll_ctl(ep, EPOLL_CTL_ADD, wfd, &ew) == 0;
		}
		if (ok)
			l->accept_ep = ep;
		else if (ep >= 0)
			real.close(ep);
	}
	int ep = l->accept_ep;
	pthread_mutex_unlock(&l->lock);
	return ep;
}

int accept_blocking(struct usock *l, int lfd, struct sockaddr *addr, socklen_t *alen, int flags)
{
	int ep = instance(l, lfd);

	if (ep < 0)
		return real.accept4(lfd, addr, alen, flags);
	/* The kernel's: another process sharing the socket may have set it. */
	struct timeval tv = l->rcvtimeo;
	socklen_t tl = sizeof(tv);
	real.getsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, &tl);
	uint64_t deadline = sys_deadline(&tv);
	int has_timeout = deadline != 0;
	signal_wait_begin();
	for (;;) {
		struct epoll_event ev[2 + DEV_KINDS];
		/* A handler that ran while we answered a sibling or looked at a
		 * device interrupts the call, as one that runs in the sleep does. */
		int n = signal_caught() ? (errno = EINTR, -1)
					: real.epoll_wait(ep, ev, 2 + DEV_KINDS, sys_ms_left(deadline));
		if (n < 0 && errno == EINTR)
			/* As accept() itself: restarted after an SA_RESTART handler,
			 * unless it has a timeout. */
			return has_timeout || !signal_wait_restart() ? -1 : ACCEPT_RESTART;
		if (n < 0)
			return real.accept4(lfd, addr, alen, flags);
		if (n == 0)
			return errno = EAGAIN, -1;
		int ready = 0;
		for (int i = 0; i < n; i++) {
			if (ev[i].data.u32 == TAG_HANDOFF)
				handoff_serve();
			else if (ev[i].data.u32 >= TAG_WAKE)
				dev_list[ev[i].data.u32 - TAG_WAKE]->wake_tick();
			else
				ready = 1;
		}
		if (!ready)
			continue;
		/* A sibling whose instance was not waiting when the connection came
		 * may take it first: the kernel's accept() then sleeps until the next
		 * one, and answers no ask meanwhile (known-differences:
		 * prefork_accept_order). Nothing makes one accept() of a shared
		 * blocking socket return at once but the socket's own flag, which
		 * is every sibling's too. */
		int fd = real.accept4(lfd, addr, alen, flags);
		if (fd >= 0)
			return fd;
		if (errno != EAGAIN)
			return -1;
	}
}

void accept_forget(struct usock *l)
{
	if (l->accept_ep >= 0)
		real.close(l->accept_ep);
	l->accept_ep = -1;
}
