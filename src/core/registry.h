/* Host-wide registry of accelerated listeners, kept in the runtime directory.
 *
 *   <rundir>/ports      65536 16-bit counters, mapped by every process: a client
 *                       learns that nobody accelerated listens on a port without
 *                       a single system call, which keeps fallback free.
 *                       Then one process id per port: the process that accepts
 *                       on it, or a mark that several do (then they hand
 *                       proposals to each other: see handoff.h), and the
 *                       processes that claimed the port. Then a change counter
 *                       per port, which lets a client keep what it read of an
 *                       entry instead of reading it at each connect, and a
 *                       count of the proposals clients made to the port.
 *   <rundir>/l-<port>   a symbolic link whose target names the listening process's
 *                       control socket, its network namespace and the addresses it
 *                       accepts on; replaced atomically, readable in one readlink.
 *
 * A stale entry (its process died) costs a refused connect on the control
 * channel and a fallback; it is never trusted beyond that. */
#ifndef USMC_REGISTRY_H
#define USMC_REGISTRY_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "decline.h"

int registry_add(const struct sockaddr *bound, int v6only, const char *ctl_name);
void registry_remove(const struct sockaddr *bound, const char *ctl_name);
/* The calling process accepts on the listener. Returns 0 while it is the only
 * live process doing so (clearing the mark once the others have exited);
 * otherwise marks the port shared and returns -1. */
int registry_claim_acceptor(const struct sockaddr *bound);
/* The processes recorded as accepting on the port, at most max; some may have
 * exited since (the next claim frees their slots). */
int registry_claimants(unsigned port, pid_t *pids, int max);
/* A process accepting on the port asked the others for a proposal and one did
 * not answer in time (stopped, busy, or waiting where it cannot answer, such as
 * a blocking accept()): for a while, clients of the port stay on TCP and its
 * acceptors ask nobody. */
void registry_handoff_failed(unsigned port);
int registry_handoff_ok(unsigned port);
/* A client is about to propose to dst's port, before its connect(). */
void registry_proposing(const struct sockaddr *dst);
/* The port's count of proposals: it only moves on (wrapping), at every
 * registry_proposing(). An acceptor that saw it stand still for longer than a
 * client waits for its attach knows that no client waits: a connection for which
 * it holds no proposal came from a plain client. */
uint32_t registry_proposals(unsigned port);
/* A proposal to dst's port was settled: attached by the server, or given up or
 * withdrawn by its client, whichever won the segment's state. */
void registry_settled(const struct sockaddr *dst);
/* Whether a proposal to the port may still wait to be settled. When not, a
 * connection accepted there comes from a plain client, and looking for its
 * proposal (reading the channels, asking siblings) would find none. Counts of
 * clients using the local device only: a region's come from other kernels. */
int registry_unsettled(unsigned port);
/* A client that died before settling its proposal leaves the counts apart for
 * good: once the count of proposals stood at proposals for longer than any
 * client waits, the port's proposals are all settled or dead. */
void registry_settle_all(unsigned port, uint32_t proposals);
/* Whether the port is marked shared: several processes accept on it. */
int registry_port_shared(const struct sockaddr *bound);
/* Whether the entry that sent a client to path is still what it was. */
int registry_still(const struct sockaddr *dst, const char *path);
/* The listener behind path could not be reached: drop its entry if it is dead. */
void registry_forget(const struct sockaddr *dst, const char *path);
/* On success fills path (the listener's control socket) and returns 0; otherwise
 * returns -1 and sets *why. */
int registry_lookup(const struct sockaddr *dst, char *path, unsigned len, enum decline *why);
/* After fork(), in the child. */
void registry_atfork_child(void);

#endif
