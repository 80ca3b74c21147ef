/* What connection logic needs from the interposition layer above it. */
#ifndef USMC_HOOKS_H
#define USMC_HOOKS_H

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

#endif
