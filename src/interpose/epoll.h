#ifndef USMC_EPOLL_H
#define USMC_EPOLL_H

#include "../core/conn.h"

void epoll_shadow_put(struct obj *o);
/* connect() or listen() on s returned: registrations made before move to
 * shadows if s is now accelerated, stay real if it never will be. */
void epoll_sock_settled(struct usock *s);
/* After fork(), in the child, before link groups close their doorbell ends:
 * the private instances are the parent's too, and the parent's entries in
 * them stay the parent's. */
void epoll_atfork_child(void);
/* o (an epoll set, else nothing happens) is watched by another epoll set or by
 * poll/select: the kernel must see it readable whenever a wait in it would
 * report something. */
void epoll_shadow_nest(struct obj *o);
/* The device whose wake descriptor every wait must watch, as a set nested or
 * polled holds its sockets (dev_ops.wake_fd), or NULL. */
const struct dev_ops *epoll_nested_waker(void);

#endif
