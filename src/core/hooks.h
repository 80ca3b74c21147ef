/* What connection logic needs from the interposition layer above it. */
#ifndef USMC_HOOKS_H
#define USMC_HOOKS_H

#include <poll.h>
#include <signal.h>

struct usock;

/* A pending connection fell back to plain TCP: its epoll registrations must now
 * watch the kernel socket itself. */
void epoll_sock_fallback(struct usock *s, int fd);
/* A doorbell of the socket was emptied by someone (poll, a blocked call, one
 * epoll set): every other epoll set watching the socket must still hear it.
 * except: the epoll set that emptied it, or NULL. */
void epoll_sock_rang(struct usock *s, const void *except);
/* The socket is being destroyed: forget its epoll registrations. */
void epoll_sock_closed(struct usock *s);
/* A doorbell end is about to be closed, or to be used elsewhere (handed to a
 * sibling): whatever epoll still watches of it under this descriptor goes. */
void epoll_bell_gone(int fd);
/* Before a blocking wait: forget the last signal seen by this thread. */
void signal_wait_begin(void);
/* After a wait failed with EINTR: should the call be restarted (SA_RESTART)? */
int signal_wait_restart(void);
/* Whether a handler ran in this thread since signal_wait_begin(): a call that
 * spun in user space instead of sleeping was interrupted all the same. */
int signal_caught(void);
/* Around the sleep itself: a handler that runs from here on calls wake(arg),
 * which must make the sleep return (async-signal-safe), so that no handler
 * falls between the last look and the sleep. Returns signal_caught(). */
int signal_sleep_begin(void (*wake)(void *), void *arg);
void signal_sleep_end(void);
/* ppoll() for a wait that began with signal_wait_begin(): signals are blocked
 * from the last look until the kernel's sleep opens mask (NULL: the mask in
 * force) atomically. -1 with EINTR if a handler ran since the wait began. */
int signal_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask);

#endif
