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

#endif
