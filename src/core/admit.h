/* The policy applied to this process's sockets: which may use shared memory.
 * One call at each point where usmc decides. */
#ifndef USMC_ADMIT_H
#define USMC_ADMIT_H

#include <sys/socket.h>

struct usock;

/* Reads USMC_POLICY; preloaded says whether the default is every TCP socket
 * (`usmc run`) or IPPROTO_SMC ones only (a program linked with -lusmc). -1 with
 * a message on stderr when the policy is bad. */
int admit_load(int preloaded);
/* At socket(): whether usmc follows the new socket. An IPPROTO_SMC one always:
 * the program asked for it, so a refusal must show in the counters. A plain
 * one when the policy could admit it: the others are left alone entirely. */
int admit_socket(int smc);
/* Client, before connect() to peer; smc: an IPPROTO_SMC socket. */
int admit_connect(int smc, int fd, const struct sockaddr *peer);
/* A listener bound to bound: 0 when no peer could be admitted. */
int admit_listen(struct usock *s, const struct sockaddr *bound);
/* A connection l accepted from peer, on fd. */
int admit_accepted(struct usock *l, int fd, const struct sockaddr *peer);

#endif
