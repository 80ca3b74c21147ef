/* Proposals handed off between processes that accept on one listening socket.
 *
 * Prefork workers inherit the listening socket, and with it the control socket
 * clients send proposals to, so a client's link group lands with whichever
 * worker took its channel, while the kernel hands each connection to any of
 * them. A worker that accepted a connection and holds no proposal for it ASKs
 * the port's other claimants (registry_claimants), each at its own handoff
 * socket, over a connection kept open for the next ask; the holder answers with
 * a HANDOFF of the proposal and its descriptors (clc.h).
 *
 * A holder answers from wherever it waits for its listener: inside its epoll
 * and poll waits (the handoff's epoll instance, holding its socket and the
 * siblings' connections, sits in every epoll set that watches a registered
 * listener), in a blocking accept() (accept.h), and while it asks itself. A
 * worker busy elsewhere answers once it waits again, if the asker still waits
 * (HANDOFF_WAIT_MS). */
#ifndef USMC_HANDOFF_H
#define USMC_HANDOFF_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

struct lgr_accepted;
struct seg_loc;

/* How long an acceptor waits for its siblings' answers. The client waits
 * longer (HANDOFF_CLIENT_WAIT_MS) before it gives up on a shared port. */
#define HANDOFF_WAIT_MS 50
#define HANDOFF_CLIENT_WAIT_MS 200

/* What to watch for siblings' asks: an epoll instance holding this process's
 * handoff socket and the siblings' connections, opened on first use (a forked
 * child opens its own); -1 if it cannot be. */
int handoff_fd(void);
/* Takes siblings' new connections and answers every ASK waiting on them. */
void handoff_serve(void);
/* For an accepted connection: ask the port's other claimants for its proposal.
 * Returns 1 and fills loc, bell and conn_id when one handed it off (as
 * lgr_server_match()), else 0. */
int handoff_fetch(const struct lgr_accepted *c, struct seg_loc *loc, int *bell, uint64_t *conn_id);
/* After fork(), in the child. */
void handoff_atfork_child(void);
/* No listener left: the sockets go. */
void handoff_close(void);

#endif
