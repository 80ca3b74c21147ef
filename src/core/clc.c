#include "clc.h"

#include <string.h>

static void hdr_init(struct clc_hdr *h, enum clc_type type, size_t len)
{
	h->eyecatcher = CLC_EYECATCHER;
	h->type = (uint8_t)type;
	h->version = CLC_VERSION;
	h->length = (uint16_t)len;
}

void clc_proposal_init(struct clc_proposal *p)
{
	memset(p, 0, sizeof(*p));
	hdr_init(&p->hdr, CLC_PROPOSAL, sizeof(*p));
}

void clc_withdraw_init(struct clc_withdraw *w, uint64_t conn_id)
{
	memset(w, 0, sizeof(*w));
	hdr_init(&w->hdr, CLC_WITHDRAW, sizeof(*w));
	w->conn_id = conn_id;
}

void clc_decline_init(struct clc_decline *d, uint64_t conn_id, uint32_t reason)
{
	memset(d, 0, sizeof(*d));
	hdr_init(&d->hdr, CLC_DECLINE, sizeof(*d));
	d->conn_id = conn_id;
	d->reason = reason;
}

void clc_ask_init(struct clc_ask *a, uint64_t seq)
{
	memset(a, 0, sizeof(*a));
	hdr_init(&a->hdr, CLC_ASK, sizeof(*a));
	a->seq = seq;
}

void clc_handoff_init(struct clc_handoff *h, uint64_t seq, const struct clc_proposal *p)
{
	memset(h, 0, sizeof(*h));
	hdr_init(&h->hdr, CLC_HANDOFF, sizeof(*h));
	h->seq = seq;
	if (p) {
		h->found = 1;
		h->p = *p;
	}
}

void clc_ext_fd_init(struct clc_ext_fd *x, uint64_t conn_id, uint32_t index, uint64_t size)
{
	memset(x, 0, sizeof(*x));
	hdr_init(&x->hdr, CLC_EXT_FD, sizeof(*x));
	x->conn_id = conn_id;
	x->index = index;
	x->size = size;
}

int clc_proposal_nfds(uint32_t flags)
{
	return 1 + ((flags & CLC_F_BELL_KEPT) ? 0 : 1) + ((flags & CLC_F_NEW_ARENA) ? 1 : 0);
}

static int pow2_in(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v >= lo && v <= hi && (v & (v - 1)) == 0;
}

/* The sizes and places a proposal names, whoever sends it. */
static int check_segment(const struct clc_proposal *p)
{
	if ((p->flags & CLC_F_NEW_ARENA) &&
	    (p->arena_size == 0 || p->arena_size > CLC_ARENA_MAX || (p->arena_size & 4095)))
		return CLC_EFIELD;
	for (int i = 0; i < 2; i++)
		if (!pow2_in(p->ring_size[i], CLC_RING_MIN, CLC_RING_MAX))
			return CLC_EFIELD;
	/* The segment must hold a page of header and both rings; whether it fits in
	 * its arena is checked against the arena actually mapped. */
	if (p->seg_size > CLC_ARENA_MAX || (p->seg_off & 4095) ||
	    p->seg_size < 4096 + p->ring_size[0] + p->ring_size[1] ||
	    p->seg_off > CLC_ARENA_MAX - p->seg_size)
		return CLC_EFIELD;
	return CLC_OK;
}

static int check_proposal(const struct clc_proposal *p, int nfds)
{
	if ((p->flags & ~(CLC_F_NEW_ARENA | CLC_F_BELL_KEPT)) ||
	    (p->flags & (CLC_F_NEW_ARENA | CLC_F_BELL_KEPT)) == (CLC_F_NEW_ARENA | CLC_F_BELL_KEPT))
		return CLC_EFIELD;
	if (nfds != CLC_NFDS_NONE && nfds != clc_proposal_nfds(p->flags))
		return CLC_EFDS;
	return check_segment(p);
}

static int check_ask(const struct clc_ask *a, int nfds)
{
	static const uint8_t zero[12];

	if ((a->family != 4 && a->family != 6) || a->pad[0] || a->pad[1] || a->pad[2])
		return CLC_EFIELD;
	if (a->family == 4 && (memcmp(a->server_ip + 4, zero, 12) || memcmp(a->client_ip + 4, zero, 12)))
		return CLC_EFIELD;
	return nfds == 0 ? CLC_OK : CLC_EFDS;
}

static int check_handoff(const struct clc_handoff *h, int nfds)
{
	static const struct clc_proposal none;
	const struct clc_proposal *p = &h->p;

	if (h->dev >= CLC_DEVS || h->found > 1 || (!h->dev && (h->link[0] || h->link[1])))
		return CLC_EFIELD;
	if (!h->found)
		return memcmp(p, &none, sizeof(none)) || h->dev ? CLC_EFIELD
			: nfds == 0				 ? CLC_OK
								 : CLC_EFDS;
	if (p->hdr.eyecatcher != CLC_EYECATCHER || p->hdr.version != CLC_VERSION ||
	    p->hdr.type != CLC_PROPOSAL || p->hdr.length != sizeof(*p) ||
	    (p->flags & ~CLC_F_BELL_HELD) != CLC_F_NEW_ARENA)
		return CLC_EFIELD;
	/* A named arena: only the doorbell end travels. */
	return nfds == (h->dev ? CLC_HFD_ARENA : CLC_HFD_MAX) ? check_segment(p) : CLC_EFDS;
}

int clc_decode(const void *buf, size_t len, int nfds, union clc_msg *out)
{
	struct clc_hdr h;
	size_t want;

	if (len < sizeof(h))
		return CLC_ETRUNC;
	memcpy(&h, buf, sizeof(h));
	if (h.eyecatcher != CLC_EYECATCHER || h.version != CLC_VERSION)
		return CLC_EMAGIC;
	switch (h.type) {
	case CLC_PROPOSAL: want = sizeof(struct clc_proposal); break;
	case CLC_WITHDRAW: want = sizeof(struct clc_withdraw); break;
	case CLC_DECLINE: want = sizeof(struct clc_decline); break;
	case CLC_ASK: want = sizeof(struct clc_ask); break;
	case CLC_HANDOFF: want = sizeof(struct clc_handoff); break;
	case CLC_EXT_FD: want = sizeof(struct clc_ext_fd); break;
	default: return CLC_ETYPE;
	}
	if (len < want)
		return CLC_ETRUNC;
	if (h.length != want || len != want)
		return CLC_ELEN;
	memcpy(out, buf, want);
	if (h.type == CLC_PROPOSAL)
		return check_proposal(&out->proposal, nfds);
	if (nfds == CLC_NFDS_NONE)
		nfds = 0;
	if (h.type == CLC_ASK)
		return check_ask(&out->ask, nfds);
	if (h.type == CLC_HANDOFF)
		return check_handoff(&out->handoff, nfds);
	if (h.type == CLC_EXT_FD) {
		const struct clc_ext_fd *x = &out->ext_fd;
		if (x->pad || !x->size || x->size > CLC_EXT_MAX || (x->size & 4095))
			return CLC_EFIELD;
		return nfds == 1 ? CLC_OK : CLC_EFDS;
	}
	if ((h.type == CLC_WITHDRAW && (out->withdraw.pad[0] || out->withdraw.pad[1])) ||
	    (h.type == CLC_DECLINE && out->decline.pad))
		return CLC_EFIELD;
	return nfds == 0 ? CLC_OK : CLC_EFDS;
}

const char *clc_strerror(int err)
{
	switch (err) {
	case CLC_OK: return "ok";
	case CLC_ETRUNC: return "truncated message";
	case CLC_EMAGIC: return "bad eyecatcher or version";
	case CLC_ETYPE: return "unknown message type";
	case CLC_ELEN: return "length mismatch";
	case CLC_EFIELD: return "field out of range";
	case CLC_EFDS: return "wrong number of descriptors";
	}
	return "unknown error";
}
