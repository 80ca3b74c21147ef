/* SMC-ERM's ways in from the socket calls (erm.c): level SOL_SMC of
 * setsockopt() and getsockopt(), and sendmsg()'s SOL_SMC control messages
 * (recvmsg(MSG_ERRQUEUE) is erm_recv_errqueue()). The C helpers of
 * <usmc/erm.h> live there too. */
#ifndef USMC_INTERPOSE_ERM_H
#define USMC_INTERPOSE_ERM_H

#include <sys/socket.h>

#include "../core/conn.h"

int erm_setsockopt(int fd, int name, const void *val, socklen_t len);
int erm_getsockopt(int fd, int name, void *val, socklen_t *len);
/* Whether m carries SOL_SMC control messages. */
int erm_has_cmsg(const struct msghdr *m);
/* sendmsg() with SOL_SMC control messages on an accelerated socket: its bytes,
 * then its commands. */
ssize_t erm_sendmsg(struct usock *s, int fd, const struct msghdr *m, int flags);
/* The same on a socket usmc does not carry through shared memory: fails as
 * the socket calls do (EOPNOTSUPP, or what the kernel says of a descriptor
 * that is no socket). */
ssize_t erm_refuse(int fd);

#endif
