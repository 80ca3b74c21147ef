/* SCM_RIGHTS with accelerated sockets: see fdpass.c. */
#ifndef USMC_FDPASS_H
#define USMC_FDPASS_H

#include <sys/socket.h>
#include <sys/types.h>

/* sendmsg()/recvmsg() on a descriptor usmc does not track, with control data. */
ssize_t fdpass_sendmsg(int fd, const struct msghdr *m, int flags);
ssize_t fdpass_recvmsg(int fd, struct msghdr *m, int flags);

#endif
