/* Why a connection did not use shared memory. Codes are SMC's CLC decline codes
 * where one fits, so operators read them as they read smcss output. */
#ifndef USMC_DECLINE_H
#define USMC_DECLINE_H

#include <stdint.h>

enum decline {
	DECL_PEER_NO_USMC,    /* no accelerated listener registered for the peer */
	DECL_NO_PROPOSAL,     /* server side: the client did not propose */
	DECL_NO_DEVICE,       /* the listener's control channel could not be reached */
	DECL_MEMORY,          /* shared memory, doorbells or descriptors unavailable */
	DECL_BINDING,         /* the 4-tuples do not mirror (NAT, forged proposal) */
	DECL_PEER_DECLINED,   /* the server declined */
	DECL_TIMEOUT,         /* the server did not attach in time */
	DECL_PEER_SPOKE_TCP,  /* bytes or FIN arrived on TCP before the attach */
	DECL_AMBIGUOUS,       /* several processes listen on the port (SO_REUSEPORT) */
	DECL_PROTOCOL,        /* malformed control message or segment */
	DECL_UNSUPPORTED,     /* an option shared memory cannot honour */
	DECL_INTERNAL,
	DECL_POLICY,          /* the policy (usmc run --policy, USMC_POLICY) excludes it */
	DECL_SHORT_LIVED,     /* the destination's connections are short: TCP (shortlived.h) */
	DECL_MAX
};

uint32_t decline_code(enum decline d);
const char *decline_name(enum decline d);
/* Maps a code received from a peer back to our reason; unknown codes map to
 * DECL_PEER_DECLINED. */
enum decline decline_from_code(uint32_t code);

#endif
