#ifndef USMC_EPOLL_H
#define USMC_EPOLL_H

#include "../core/conn.h"

void epoll_shadow_put(struct obj *o);
/* connect() or listen() on s returned: registrations made before move to
 * shadows if s is now accelerated, stay real if it never will be. */
void epoll_sock_settled(struct usock *s);

#endif
