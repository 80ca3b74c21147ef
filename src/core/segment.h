/* The shared memory of one connection (SMC's pair of DMBs), carved from a link
 * group's arena by the client:
 *
 *   page 0: struct seg_hdr (state word, release bits, one ring_shared per direction)
 *   then:   ring 0 data (client -> server), ring 1 data (server -> client)
 *
 * Ring sizes and offsets come from the proposal, never from this header, so a peer
 * that scribbles here can only confuse the connection it already owns. */
#ifndef USMC_SEGMENT_H
#define USMC_SEGMENT_H

#include <string.h>
#include <sys/socket.h>

#include "addr.h"
#include "ring.h"

#define SEG_MAGIC 0x53454755u /* "UGES" */
#define SEG_HDR_SIZE 4096u

enum seg_state {
	SEG_PENDING = 1,   /* proposed, server has not attached */
	SEG_ATTACHED = 2,  /* server attached: every byte goes through the rings */
	SEG_ABANDONED = 3, /* client gave up first: the connection is plain TCP */
};

#define SEG_REL_CLIENT 0x1u
#define SEG_REL_SERVER 0x2u
#define SEG_REL_BOTH (SEG_REL_CLIENT | SEG_REL_SERVER)
/* Set before SEG_REL_SERVER: the server kept its doorbell end for the segment's
 * next connection. A server that did not (a sibling it was handed off to, a
 * program after exec) leaves it clear, and the client sends a new doorbell. */
#define SEG_REL_BELL_KEPT 0x4u

/* The client's names, for a device whose channel cannot carry its socket
 * (DEV_F_BIND_LATE): where it connects, written before it proposes, and its own
 * name, written once its connect() has begun; bound says which are there. The
 * acceptor takes them for the binding proof: within such a device's trust domain
 * (everyone attached to it can write here) nothing stronger is to be had. */
#define SEG_BIND_DST 0x1u
#define SEG_BIND_SRC 0x2u
struct seg_bind {
	_Atomic uint32_t bound;
	uint8_t family;             /* 4 or 6 */
	uint8_t pad[3];
	uint16_t port[2];           /* [0] its destination's, [1] its own */
	uint8_t ip[2][16];
};

struct seg_hdr {
	_Alignas(RING_CACHELINE) uint32_t magic;
	_Atomic uint32_t state;     /* moved out of SEG_PENDING by exactly one CAS */
	_Atomic uint32_t released;  /* SEG_REL_* bits: reusable when both are set */
	struct ring_shared ring[2];
	/* An extension's shared memory (ERM), one word per side (client first),
	 * each written by its side only, once: nonzero once that side sent it on
	 * the link group's channel (lgr_ext_send(), index 0), which the extension
	 * gives a meaning to. Zeroed with the header for each connection. */
	_Alignas(RING_CACHELINE) _Atomic uint32_t ext[2];
	struct seg_bind bind;
};

_Static_assert(sizeof(struct seg_hdr) <= SEG_HDR_SIZE, "segment header exceeds its page");

static inline unsigned char *seg_ring_data(struct seg_hdr *h, int dir, const uint64_t size[2])
{
	return (unsigned char *)h + SEG_HDR_SIZE + (dir ? size[0] : 0);
}

static inline uint64_t seg_bytes(const uint64_t size[2])
{
	return SEG_HDR_SIZE + size[0] + size[1];
}

/* Writes one of the client's names (SEG_BIND_DST or SEG_BIND_SRC), published
 * once written. */
static inline void seg_bind_put(struct seg_hdr *h, uint32_t which, const struct addr *a)
{
	int i = which == SEG_BIND_SRC;

	h->bind.family = a->family == AF_INET ? 4 : 6;
	h->bind.port[i] = a->port;
	memcpy(h->bind.ip[i], a->ip, sizeof(h->bind.ip[i]));
	atomic_fetch_or_explicit(&h->bind.bound, which, memory_order_release);
}

/* Reads one of them; -1 while it is not there, or not one. */
static inline int seg_bind_get(const struct seg_hdr *h, uint32_t which, struct addr *a)
{
	int i = which == SEG_BIND_SRC;
	uint32_t bound = atomic_load_explicit(&((struct seg_hdr *)h)->bind.bound,
					      memory_order_acquire);
	uint8_t fam = h->bind.family;

	if (!(bound & which) || (fam != 4 && fam != 6))
		return -1;
	memset(a, 0, sizeof(*a));
	a->family = fam == 4 ? AF_INET : AF_INET6;
	a->port = h->bind.port[i];
	memcpy(a->ip, h->bind.ip[i], fam == 4 ? 4 : 16);
	return 0;
}

#endif
