/* usmc: Shared Memory Communications in user space.
 *
 * A program that links with -lusmc (pkg-config --cflags --libs usmc) opts in
 * per socket, as with kernel SMC:
 *
 *     int fd = socket(AF_INET, SOCK_STREAM, IPPROTO_SMC);
 *
 * is a TCP socket that moves its bytes through shared memory when the peer runs
 * usmc too (the same runtime directory, USMC_RUNDIR), and stays plain TCP,
 * byte for byte, when it does not. Its other TCP sockets are left alone. Under
 * `usmc run`, which preloads the library, every TCP socket may be accelerated.
 * A policy (usmc run --policy, USMC_POLICY) can narrow or widen either: see
 * usmc(7).
 *
 * Over such a connection, registered memory and one-sided copies (SMC-ERM):
 * <usmc/erm.h>, included here, and usmc-erm(3). */
#ifndef USMC_USMC_H
#define USMC_USMC_H

/* As in Linux <linux/in.h>: the protocol number of AF_SMC's TCP-compatible
 * sockets, which usmc takes for its own opt-in. */
#ifndef IPPROTO_SMC
#define IPPROTO_SMC 256
#endif

#define USMC_VERSION_MAJOR 0
#define USMC_VERSION_MINOR 2

#include "erm.h"

#endif
