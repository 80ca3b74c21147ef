/* Connection Layer Control messages, carried on a link group's control channel.
 *
 * SMC's CLC handshake travels inside the TCP stream; ours never does. A client
 * posts a PROPOSAL before its connect() reaches the listener, so the acceptor
 * finds it already queued when accept() returns; the TCP 4-tuple is not known
 * yet, so the proposal carries the client's TCP socket itself (SCM_RIGHTS) and
 * the acceptor reads the 4-tuple from it: that is the proof of binding.
 *
 * Processes that accept on one listening socket (prefork workers) share its
 * control socket, so a proposal reaches whichever took its client's channel,
 * while the kernel hands the connection to any of them. An acceptor that finds
 * no proposal ASKs its siblings for the connection's 4-tuple; the holder answers
 * with a HANDOFF of the proposal and everything that came with it (handoff.h).
 * The asker proves nothing with the ASK: the holder hands proposals only to
 * processes accepting on the same port, and only the one whose client socket
 * mirrors the 4-tuple asked about, in the network namespace the ASK names. The
 * client's socket itself stays with the holder, which closes its copy before
 * answering: the client still holds the socket then, so that close is cheap,
 * where a copy travelling on could outlive the whole connection and leave its
 * teardown to a server.
 *
 * An extension of the protocol (ERM) shares memory beyond the segment: each
 * side sends the memfds the other is to map as EXT_FD, keyed by the
 * connection's id and an index of the sender's; the receiver keeps them for
 * that connection until it asks for them (lgr_ext_take()).
 *
 * All messages are fixed-size little-endian structures with an eyecatcher, a
 * type and a length; the decoder accepts nothing else. */
#ifndef USMC_CLC_H
#define USMC_CLC_H

#include <stddef.h>
#include <stdint.h>

#define CLC_EYECATCHER 0x434d5355u /* "USMC" */
#define CLC_VERSION 1

enum clc_type {
	CLC_PROPOSAL = 1, /* client -> server: attach this segment to my connection */
	CLC_WITHDRAW = 2, /* client -> server: the proposed connection never came up */
	CLC_DECLINE = 3,  /* server -> client: will not attach (reason given) */
	CLC_ASK = 4,      /* acceptor -> sibling: the proposal for my connection? */
	CLC_HANDOFF = 5,  /* sibling -> acceptor: here it is, or not here */
	CLC_EXT_FD = 6,   /* either way: a memfd for the peer's end of a connection */
};

/* Fds that travel with a PROPOSAL, in this order; those a flag leaves out are
 * skipped, so the arena memfd may come second. */
enum clc_fd {
	CLC_FD_TCP = 0,      /* the client's TCP socket: binding proof */
	CLC_FD_BELL,         /* unless CLC_F_BELL_KEPT: the server's end of the connection's
				doorbell, a socket pair each side sleeps on and rings the
				other through */
	CLC_FD_ARENA,        /* only with CLC_F_NEW_ARENA: the arena memfd */
	CLC_FD_MAX
};

/* Fds that travel with a HANDOFF that found its proposal, in this order. */
enum clc_hfd {
	CLC_HFD_BELL = 0,    /* the server's doorbell end */
	CLC_HFD_ARENA,       /* the arena memfd */
	CLC_HFD_MAX
};

#define CLC_F_NEW_ARENA 0x1u
/* The segment served an earlier connection that both ends closed cleanly, and
 * each kept its end of the doorbell for the next: none travels, the server takes
 * the one it kept for this segment (a new connection costs no socket pair).
 * Never with CLC_F_NEW_ARENA. */
#define CLC_F_BELL_KEPT 0x2u
/* Only in a HANDOFF: the sibling keeps its own descriptor of the doorbell end,
 * as the server's end for the segment's next connection (whose proposal reaches
 * it). The asker closing its copy then leaves the socket open, and says the end
 * was kept: no socket pair is made, and none is closed, which would cost every
 * process on the host a run of the kernel's Unix socket collector while any
 * descriptor is in flight. */
#define CLC_F_BELL_HELD 0x4u

struct clc_hdr {
	uint32_t eyecatcher;
	uint8_t type;
	uint8_t version;
	uint16_t length;   /* whole message, header included */
};

struct clc_proposal {
	struct clc_hdr hdr;
	uint32_t flags;
	uint32_t arena_id;
	uint64_t arena_size;  /* with CLC_F_NEW_ARENA */
	uint64_t conn_id;     /* unique within the link group, never reused */
	uint64_t seg_off;     /* segment offset inside the arena */
	uint64_t seg_size;
	uint64_t ring_size[2]; /* [0] client->server, [1] server->client */
};

/* Padding is explicit and must be zero, so the layout is the same for every ABI
 * and no byte goes unchecked. */
struct clc_withdraw {
	struct clc_hdr hdr;
	uint32_t pad[2];
	uint64_t conn_id;
};

struct clc_decline {
	struct clc_hdr hdr;
	uint32_t reason;   /* SMC decline code, see decline.h */
	uint32_t pad;
	uint64_t conn_id;
};

/* No descriptor travels: one that did would keep the asker's connection open
 * (its FIN held back) for as long as the message waits unread. */
struct clc_ask {
	struct clc_hdr hdr;
	uint8_t family;       /* 4 or 6; an IPv4 address leaves bytes 4..15 zero */
	uint8_t pad[3];
	uint16_t server_port;
	uint16_t client_port;
	uint8_t server_ip[16];
	uint8_t client_ip[16];
	uint64_t seq;         /* the asker's, echoed in the answer */
	uint64_t netns_cookie; /* the asker's listener's network namespace, 0: unknown */
};

/* found: p is the proposal as the client sent it, except that its arena always
 * travels (CLC_F_NEW_ARENA, with the arena's size) and the sender may keep the
 * doorbell end too (CLC_F_BELL_HELD), followed by its descriptors in CLC_HFD_*
 * order. An arena in memory a device names (dev, the device's kind) travels
 * as its id and link, the device's name of the proposal's channel: only the
 * doorbell end goes along.
 * Not found: p is zero and nothing travels. */
struct clc_handoff {
	struct clc_hdr hdr;
	uint32_t found;
	uint32_t dev;         /* 0: the arena's descriptor travels */
	uint64_t seq;
	struct clc_proposal p;
	uint64_t link[2];     /* with dev */
};

/* One memfd travels with it: shared memory of the sender's that the receiver
 * maps (its size, a whole number of pages, is sealed). */
struct clc_ext_fd {
	struct clc_hdr hdr;
	uint32_t index;       /* the sender's numbering within the connection */
	uint32_t pad;
	uint64_t conn_id;
	uint64_t size;
};

_Static_assert(sizeof(struct clc_hdr) == 8, "clc header layout");
_Static_assert(sizeof(struct clc_proposal) == 64, "clc proposal layout");
_Static_assert(sizeof(struct clc_withdraw) == 24, "clc withdraw layout");
_Static_assert(sizeof(struct clc_decline) == 24, "clc decline layout");
_Static_assert(sizeof(struct clc_ask) == 64, "clc ask layout");
_Static_assert(sizeof(struct clc_handoff) == 104, "clc handoff layout");
_Static_assert(sizeof(struct clc_ext_fd) == 32, "clc ext_fd layout");

union clc_msg {
	struct clc_hdr hdr;
	struct clc_proposal proposal;
	struct clc_withdraw withdraw;
	struct clc_decline decline;
	struct clc_ask ask;
	struct clc_handoff handoff;
	struct clc_ext_fd ext_fd;
};

/* Limits a proposal must respect; the decoder enforces them so no later code has
 * to think about overflow. */
#define CLC_RING_MIN 4096u
#define CLC_RING_MAX (64u << 20)
#define CLC_ARENA_MAX (1ull << 32)
#define CLC_EXT_MAX (1ull << 40)

enum clc_err {
	CLC_OK = 0,
	CLC_ETRUNC = -1,   /* shorter than its header or its type's size */
	CLC_EMAGIC = -2,   /* wrong eyecatcher or version */
	CLC_ETYPE = -3,    /* unknown type */
	CLC_ELEN = -4,     /* length field disagrees with the type or the datagram */
	CLC_EFIELD = -5,   /* a field out of range */
	CLC_EFDS = -6,     /* wrong number of passed descriptors */
};

/* Validate buf[0..len) received with nfds descriptors and copy it into *out.
 * CLC_NFDS_NONE: from a channel that passes no descriptors, where a proposal
 * carries none of those its flags would call for (the server makes its
 * doorbell end, finds the arena by its id, and the binding in the segment). */
#define CLC_NFDS_NONE (-1)
int clc_decode(const void *buf, size_t len, int nfds, union clc_msg *out);
const char *clc_strerror(int err);

void clc_proposal_init(struct clc_proposal *p);
void clc_withdraw_init(struct clc_withdraw *w, uint64_t conn_id);
void clc_decline_init(struct clc_decline *d, uint64_t conn_id, uint32_t reason);
void clc_ask_init(struct clc_ask *a, uint64_t seq);
/* p NULL: not found. */
void clc_handoff_init(struct clc_handoff *h, uint64_t seq, const struct clc_proposal *p);
void clc_ext_fd_init(struct clc_ext_fd *x, uint64_t conn_id, uint32_t index, uint64_t size);
/* The device kinds a handoff may name (src/dev/dev.h's, lo's being 0). */
#define CLC_DEVS 2
/* Number of descriptors a valid proposal with these flags carries. */
int clc_proposal_nfds(uint32_t flags);

#endif
