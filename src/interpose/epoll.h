#ifndef USMC_EPOLL_H
#define USMC_EPOLL_H

#include "../core/conn.h"

void epoll_shadow_put(struct obj *o);

#endif
