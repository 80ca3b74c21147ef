/* Short connections stay on TCP, as kernel SMC's smc_limit_hs keeps connections
 * there when handshakes pile up. An accelerated connection costs more to set up
 * and end than a TCP one: TCP's handshake and FIN still happen (they are what
 * makes fallback exact), and the proposal, its binding proof, the attach and the
 * doorbells come on top. One that carries a request and its answer and ends
 * saves too little copying to pay for that when both ends run on one core,
 * which then does all of that work in turn (a proxy and its backends on one
 * core: 0.8 x TCP). Across cores the same connection gains (bench/connrate:
 * 1.35 x TCP), as each end works while the other does. So each process learns,
 * per destination, how its accelerated connections there ended: after a run of
 * short ones whose peer ran on our core, its connections to that destination
 * stay on TCP for a while, and are tried again after it, so that a destination
 * whose connections grow long, or move to another core, goes back to shared
 * memory. The clock is the caller's (sys_now_ns()). */
#ifndef USMC_SHORTLIVED_H
#define USMC_SHORTLIVED_H

#include <stdint.h>

#include "addr.h"

/* A connection is short when it moved fewer bytes than this, both directions
 * together, ended within SHORT_LIFE_NS of its connect(), and its peer last
 * sent from the core we close it on. */
#define SHORT_BYTES (16u << 10)
#define SHORT_LIFE_NS (100 * 1000000ull)
/* Short connections in a row, each the last to end there, before a
 * destination is held on TCP. */
#define SHORT_STREAK 16u
/* How long a hold lasts: the first, and the longest it grows to, doubling each
 * time the connections tried after a hold are short again. */
#define SHORT_HOLD_MIN_NS (100 * 1000000ull)
#define SHORT_HOLD_MAX_NS (10 * 1000000000ull)

/* Whether a connection to dst made now stays on TCP. */
int shortlived_hold(const struct addr *dst, uint64_t now);
/* An accelerated connection to dst ended now, having lived lived_ns and moved
 * bytes, its peer on our core (same_core) or not. */
void shortlived_ended(const struct addr *dst, uint64_t bytes, uint64_t lived_ns, int same_core,
		      uint64_t now);
void shortlived_atfork_child(void);

#endif
