/* link: src/core/clc.c */
/* clc_decode on arbitrary bytes. The first byte picks how many descriptors came
 * with the datagram (0..CLC_FD_MAX), or -1 for a channel that passes none
 * (CLC_NFDS_NONE), the rest is the datagram. Besides memory safety, the
 * verdict must agree with the rules of clc.h and segment.h restated here
 * independently, and an accepted message must be copied out unchanged. */
#include "clc.h"
#include "fuzz.h"
#include "segment.h"

#include <string.h>

#define PAGE 4096u
#define NFDS_CHOICES (CLC_FD_MAX + 2)

static int nfds_of(uint8_t b)
{
	return b % NFDS_CHOICES - 1;
}

static int ring_size_ok(uint64_t v)
{
	return v >= CLC_RING_MIN && v <= CLC_RING_MAX && __builtin_popcountll(v) == 1;
}

static int proposal_ok(const struct clc_proposal *p, int nfds)
{
	int new_arena = (p->flags & CLC_F_NEW_ARENA) != 0;
	int kept = (p->flags & CLC_F_BELL_KEPT) != 0;

	if ((p->flags & ~(CLC_F_NEW_ARENA | CLC_F_BELL_KEPT)) || (new_arena && kept))
		return 0;
	/* the TCP socket, the doorbell end unless kept, the arena when new; none
	 * of them from a channel that passes none */
	if (nfds != -1 && nfds != 1 + !kept + new_arena)
		return 0;
	if (new_arena && (p->arena_size == 0 || p->arena_size % PAGE ||
			  p->arena_size > CLC_ARENA_MAX))
		return 0;
	if (!ring_size_ok(p->ring_size[0]) || !ring_size_ok(p->ring_size[1]))
		return 0;
	return p->seg_off % PAGE == 0 && p->seg_size >= seg_bytes(p->ring_size) &&
	       (unsigned __int128)p->seg_off + p->seg_size <= CLC_ARENA_MAX;
}

static int message_ok(const unsigned char *b, size_t len, int nfds)
{
	struct clc_hdr h;
	size_t want;

	if (len < sizeof(h))
		return 0;
	memcpy(&h, b, sizeof(h));
	switch (h.type) {
	case CLC_PROPOSAL: want = sizeof(struct clc_proposal); break;
	case CLC_WITHDRAW: want = sizeof(struct clc_withdraw); break;
	case CLC_DECLINE: want = sizeof(struct clc_decline); break;
	case CLC_ASK: want = sizeof(struct clc_ask); break;
	case CLC_HANDOFF: want = sizeof(struct clc_handoff); break;
	case CLC_EXT_FD: want = sizeof(struct clc_ext_fd); break;
	default: return 0;
	}
	if (h.eyecatcher != CLC_EYECATCHER || h.version != CLC_VERSION || h.length != want ||
	    len != want)
		return 0;
	if (h.type == CLC_PROPOSAL) {
		struct clc_proposal p;

		memcpy(&p, b, sizeof(p));
		return proposal_ok(&p, nfds);
	}
	/* any other message from a channel that passes none came with none */
	if (nfds == -1)
		nfds = 0;
	if (h.type == CLC_HANDOFF) {
		struct clc_handoff o;
		static const unsigned char zero[sizeof(o.p)];

		memcpy(&o, b, sizeof(o));
		/* dev: 0 the local device, 1 ivshmem, whose arenas are named by
		 * link words; the local one's link words are zero */
		if (o.dev > 1 || o.found > 1 || (!o.dev && (o.link[0] || o.link[1])))
			return 0;
		if (!o.found)
			return !o.dev && !memcmp(&o.p, zero, sizeof(zero)) && nfds == 0;
		/* a proposal of its own, and whose doorbell end the sender may keep
		 * too; the local device's come with two descriptors, the doorbell end
		 * and the arena, the client's socket staying with the sender; a named
		 * arena (ivshmem) leaves only the doorbell end to travel */
		o.p.flags &= ~CLC_F_BELL_HELD;
		return o.p.hdr.eyecatcher == CLC_EYECATCHER && o.p.hdr.version == CLC_VERSION &&
		       o.p.hdr.type == CLC_PROPOSAL && o.p.hdr.length == sizeof(o.p) &&
		       o.p.flags == CLC_F_NEW_ARENA && nfds == (o.dev ? 1 : 2) &&
		       proposal_ok(&o.p, 3);
	}
	if (h.type == CLC_ASK) {
		/* family 4 or 6 at byte 8, padding 9..11, ports 12..15, then the server's
		 * and the client's address, 16 bytes each: an IPv4 one fills 4 */
		if ((b[8] != 4 && b[8] != 6) || b[9] || b[10] || b[11])
			return 0;
		for (size_t i = 4; b[8] == 4 && i < 16; i++)
			if (b[16 + i] || b[32 + i])
				return 0;
		return nfds == 0;
	}
	if (h.type == CLC_EXT_FD) {
		struct clc_ext_fd x;

		/* one memfd, of a whole number of pages, at most CLC_EXT_MAX */
		memcpy(&x, b, sizeof(x));
		return !x.pad && x.size && x.size % PAGE == 0 && x.size <= (1ull << 40) && nfds == 1;
	}
	/* Withdraw and decline: bytes 8..15 are padding (decline: 12..15), all zero. */
	for (size_t i = h.type == CLC_DECLINE ? 12 : 8; i < 16; i++)
		if (b[i])
			return 0;
	return nfds == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	union clc_msg out[2];
	unsigned char *buf;
	size_t len;
	int nfds, rc;

	if (size == 0)
		return 0;
	nfds = nfds_of(data[0]);
	len = size - 1;
	/* An exact-size copy: any read past the datagram hits the allocator's redzone. */
	buf = malloc(len);
	if (!buf && len)
		abort();
	if (len)
		memcpy(buf, data + 1, len);
	memset(&out[0], 0x00, sizeof(out[0]));
	memset(&out[1], 0xff, sizeof(out[1]));

	rc = clc_decode(buf, len, nfds, &out[0]);
	FUZZ_ASSERT(clc_decode(buf, len, nfds, &out[1]) == rc);
	FUZZ_ASSERT(rc <= CLC_OK && rc >= CLC_EFDS);
	FUZZ_ASSERT(strcmp(clc_strerror(rc), clc_strerror(1)) != 0);
	FUZZ_ASSERT((rc == CLC_OK) == message_ok(buf, len, nfds));
	if (rc == CLC_OK) {
		FUZZ_ASSERT(memcmp(&out[0], buf, len) == 0);
		FUZZ_ASSERT(memcmp(&out[1], buf, len) == 0);
	}
	free(buf);
	return 0;
}

static void emit_msg(fuzz_emit_fn *emit, int nfds, const void *msg, size_t len)
{
	unsigned char b[1 + sizeof(union clc_msg)];

	b[0] = (unsigned char)(nfds + 1);
	memcpy(b + 1, msg, len);
	emit(b, 1 + len);
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	struct clc_proposal p;
	struct clc_withdraw w;
	struct clc_decline d;
	struct clc_ask a;
	struct clc_handoff h;
	struct clc_ext_fd x;

	clc_proposal_init(&p);
	p.ring_size[0] = p.ring_size[1] = 65536;
	p.seg_off = 16 * PAGE;
	p.seg_size = seg_bytes(p.ring_size);
	emit_msg(emit, clc_proposal_nfds(p.flags), &p, sizeof(p));
	p.flags = CLC_F_BELL_KEPT;
	emit_msg(emit, clc_proposal_nfds(p.flags), &p, sizeof(p));
	p.flags = CLC_F_NEW_ARENA;
	p.arena_size = 1u << 24;
	emit_msg(emit, clc_proposal_nfds(p.flags), &p, sizeof(p));
	clc_withdraw_init(&w, 5);
	emit_msg(emit, 0, &w, sizeof(w));
	clc_decline_init(&d, 5, 0x03010000u);
	emit_msg(emit, 0, &d, sizeof(d));
	emit_msg(emit, 0, &d, sizeof(d.hdr));
	clc_ask_init(&a, 9);
	a.family = 4;
	a.server_ip[0] = a.client_ip[0] = 127;
	a.server_port = 80;
	a.client_port = 40000;
	emit_msg(emit, 0, &a, sizeof(a));
	clc_handoff_init(&h, 9, &p);
	emit_msg(emit, CLC_HFD_MAX, &h, sizeof(h));
	h.p.flags |= CLC_F_BELL_HELD;
	emit_msg(emit, CLC_HFD_MAX, &h, sizeof(h));
	clc_handoff_init(&h, 9, NULL);
	emit_msg(emit, 0, &h, sizeof(h));
	clc_ext_fd_init(&x, 5, 1, 1u << 20);
	emit_msg(emit, 1, &x, sizeof(x));
}
