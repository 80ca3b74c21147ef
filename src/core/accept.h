/* A blocking accept() on a registered listener.
 *
 * A worker of a prefork server that sleeps in the kernel's accept() cannot answer
 * a sibling's ASK (handoff.h) for a proposal that reached it, so that sibling's
 * connection would fall back. The wait before the accept is therefore ours: the
 * listening socket and the handoff's instance in one epoll instance per listener
 * and process, asks answered as they come. */
#ifndef USMC_ACCEPT_H
#define USMC_ACCEPT_H

#include <sys/socket.h>

struct usock;

/* accept_blocking(): a handler installed with SA_RESTART ran; the call starts again
 * from its descriptor. */
#define ACCEPT_RESTART (-2)

/* Whether a blocking accept() on l waits in the library: l was inherited across
 * fork (siblings may ask it for proposals), or a device in use wakes nobody by
 * itself (dev_ops.wake_fd). */
int accept_in_library(const struct usock *l);
/* accept4() on lfd, l's descriptor, blocking as the kernel's does, honouring
 * SO_RCVTIMEO (EAGAIN) and SA_RESTART (EINTR without it). Returns the
 * connection's descriptor, -1 with errno set, or ACCEPT_RESTART. */
int accept_blocking(struct usock *l, int lfd, struct sockaddr *addr, socklen_t *alen, int flags);
/* Closes l's instance: the listener goes, or, in a forked child, the instance
 * is the parent's. */
void accept_forget(struct usock *l);

#endif
