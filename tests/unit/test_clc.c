/* link: src/core/clc.c */
/* The control-message decoder: every encoder round-trips, and every way a message
 * can be malformed is rejected with the right error. */
#include "check.h"
#include "clc.h"

#include <stdlib.h>
#include <string.h>

#define PAGE 4096ull

/* Decodes a private heap copy of exactly len bytes, so that the sanitizer build
 * catches any read past the end; at is an offset that makes the copy unaligned. */
static int decode_at(const void *msg, size_t len, int nfds, union clc_msg *out, size_t at)
{
	unsigned char *buf = malloc(len + at + 1);
	int rc;

	if (!buf)
		abort();
	memcpy(buf + at, msg, len);
	rc = clc_decode(buf + at, len, nfds, out);
	free(buf);
	return rc;
}

static int decode(const void *msg, size_t len, int nfds)
{
	union clc_msg out;

	return decode_at(msg, len, nfds, &out, 0);
}

/* A proposal every check accepts, with the smallest segment its rings allow. */
static struct clc_proposal good_proposal(int new_arena)
{
	struct clc_proposal p;

	clc_proposal_init(&p);
	p.flags = new_arena ? CLC_F_NEW_ARENA : 0;
	p.arena_id = 7;
	p.arena_size = new_arena ? 1ull << 20 : 0;
	p.conn_id = 0x1122334455667788ull;
	p.seg_off = 3 * PAGE;
	p.ring_size[0] = 16384;
	p.ring_size[1] = 65536;
	p.seg_size = PAGE + 16384 + 65536;
	return p;
}

static int decode_proposal(const struct clc_proposal *p)
{
	return decode(p, sizeof(*p), clc_proposal_nfds(p->flags));
}

static void test_encoders_roundtrip(void)
{
	union clc_msg out;

	for (int new_arena = 0; new_arena < 2; new_arena++) {
		struct clc_proposal p = good_proposal(new_arena);

		CHECK_EQ(p.hdr.eyecatcher, CLC_EYECATCHER);
		CHECK_EQ(p.hdr.type, CLC_PROPOSAL);
		CHECK_EQ(p.hdr.version, CLC_VERSION);
		CHECK_EQ(p.hdr.length, sizeof(p));
		CHECK_EQ(clc_proposal_nfds(p.flags), new_arena ? CLC_FD_ARENA + 1 : CLC_FD_ARENA);
		memset(&out, 0xa5, sizeof(out));
		CHECK_EQ(decode_at(&p, sizeof(p), clc_proposal_nfds(p.flags), &out, 1), CLC_OK);
		CHECK(memcmp(&out.proposal, &p, sizeof(p)) == 0);
	}

	struct clc_withdraw w;

	clc_withdraw_init(&w, UINT64_MAX - 1);
	CHECK_EQ(w.hdr.type, CLC_WITHDRAW);
	CHECK_EQ(w.hdr.length, sizeof(w));
	memset(&out, 0xa5, sizeof(out));
	CHECK_EQ(decode_at(&w, sizeof(w), 0, &out, 3), CLC_OK);
	CHECK_EQ(out.hdr.type, CLC_WITHDRAW);
	CHECK_EQ(out.withdraw.conn_id, UINT64_MAX - 1);

	struct clc_decline d;

	clc_decline_init(&d, 42, 0x03030000u);
	CHECK_EQ(d.hdr.type, CLC_DECLINE);
	CHECK_EQ(d.hdr.length, sizeof(d));
	memset(&out, 0xa5, sizeof(out));
	CHECK_EQ(decode_at(&d, sizeof(d), 0, &out, 5), CLC_OK);
	CHECK_EQ(out.hdr.type, CLC_DECLINE);
	CHECK_EQ(out.decline.conn_id, 42);
	CHECK_EQ(out.decline.reason, 0x03030000u);
}

/* An initialised but unfilled proposal has no valid ring sizes. */
static void test_empty_proposal_rejected(void)
{
	struct clc_proposal p;

	clc_proposal_init(&p);
	CHECK_EQ(decode_proposal(&p), CLC_EFIELD);
}

static void test_ring_sizes(void)
{
	static const struct {
		uint64_t size;
		int rc;
	} cases[] = {
		{ 0, CLC_EFIELD },
		{ 2048, CLC_EFIELD },          /* power of two, too small */
		{ CLC_RING_MIN - 1, CLC_EFIELD },
		{ CLC_RING_MIN, CLC_OK },
		{ CLC_RING_MIN + 1, CLC_EFIELD },
		{ 6144, CLC_EFIELD },          /* page multiple, not a power of two */
		{ 1u << 20, CLC_OK },
		{ CLC_RING_MAX - PAGE, CLC_EFIELD },
		{ CLC_RING_MAX, CLC_OK },
		{ (uint64_t)CLC_RING_MAX * 2, CLC_EFIELD },
		{ 1ull << 40, CLC_EFIELD },
		{ 1ull << 63, CLC_EFIELD },
		{ UINT64_MAX, CLC_EFIELD },
	};

	for (int dir = 0; dir < 2; dir++)
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			struct clc_proposal p = good_proposal(0);

			p.ring_size[dir] = cases[i].size;
			/* Give the segment room for any size, so only the ring check decides. */
			p.seg_size = PAGE + 2 * (uint64_t)CLC_RING_MAX;
			if (!CHECK_EQ(decode_proposal(&p), cases[i].rc))
				printf("    ring_size[%d] = %#llx\n", dir,
				       (unsigned long long)cases[i].size);
		}
}

static void test_segment_bounds(void)
{
	const uint64_t need = PAGE + 16384 + 65536;
	static const struct {
		uint64_t off, size_delta;  /* size = need + size_delta */
		int rc;
	} cases[] = {
		{ 0, 0, CLC_OK },
		{ 1, 0, CLC_EFIELD },                 /* offset not page-aligned */
		{ PAGE - 1, 0, CLC_EFIELD },
		{ PAGE + 512, 0, CLC_EFIELD },
		{ PAGE, 0, CLC_OK },
		{ 0, (uint64_t)-1, CLC_EFIELD },      /* one byte short of its rings */
		{ 0, (uint64_t)-PAGE, CLC_EFIELD },
		{ 0, PAGE, CLC_OK },                  /* larger than needed is fine */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct clc_proposal p = good_proposal(0);

		p.seg_off = cases[i].off;
		p.seg_size = need + cases[i].size_delta;
		if (!CHECK_EQ(decode_proposal(&p), cases[i].rc))
			printf("    case %zu\n", i);
	}
}

/* The segment's end must stay inside the largest arena without the sum wrapping. */
static void test_segment_overflow(void)
{
	static const struct {
		uint64_t off, size;
		int rc;
	} cases[] = {
		{ 0, CLC_ARENA_MAX, CLC_OK },
		{ PAGE, CLC_ARENA_MAX, CLC_EFIELD },
		{ 0, CLC_ARENA_MAX + 1, CLC_EFIELD },
		{ 0, UINT64_MAX, CLC_EFIELD },
		{ CLC_ARENA_MAX - 32 * PAGE, 32 * PAGE, CLC_OK },   /* ends exactly at the limit */
		{ CLC_ARENA_MAX - 32 * PAGE, 33 * PAGE, CLC_EFIELD },
		{ CLC_ARENA_MAX, 32 * PAGE, CLC_EFIELD },
		{ UINT64_MAX - PAGE + 1, 32 * PAGE, CLC_EFIELD },    /* off + size wraps to small */
		{ -(uint64_t)(32 * PAGE), 32 * PAGE, CLC_EFIELD },   /* off + size wraps to 0 */
		{ 1ull << 63, 32 * PAGE, CLC_EFIELD },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct clc_proposal p = good_proposal(0);

		p.ring_size[0] = p.ring_size[1] = CLC_RING_MIN;
		p.seg_off = cases[i].off;
		p.seg_size = cases[i].size;
		if (!CHECK_EQ(decode_proposal(&p), cases[i].rc))
			printf("    case %zu\n", i);
	}
}

static void test_arena_size(void)
{
	static const struct {
		uint64_t size;
		int rc;
	} cases[] = {
		{ 0, CLC_EFIELD },
		{ 1, CLC_EFIELD },
		{ PAGE - 1, CLC_EFIELD },
		{ PAGE, CLC_OK },
		{ PAGE + 1, CLC_EFIELD },
		{ 3 * PAGE, CLC_OK },
		{ CLC_ARENA_MAX - PAGE, CLC_OK },
		{ CLC_ARENA_MAX, CLC_OK },
		{ CLC_ARENA_MAX + PAGE, CLC_EFIELD },
		{ UINT64_MAX - PAGE + 1, CLC_EFIELD },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct clc_proposal p = good_proposal(1);

		p.arena_size = cases[i].size;
		if (!CHECK_EQ(decode_proposal(&p), cases[i].rc))
			printf("    arena_size = %#llx\n", (unsigned long long)cases[i].size);
	}

	/* Without a new arena the field means nothing (clc.h). */
	struct clc_proposal p = good_proposal(0);

	p.arena_size = UINT64_MAX;
	CHECK_EQ(decode_proposal(&p), CLC_OK);
}

static void test_unknown_flags(void)
{
	for (int bit = 1; bit < 32; bit++) {
		struct clc_proposal p = good_proposal(1);

		p.flags |= 1u << bit;
		if (!CHECK_EQ(decode(&p, sizeof(p), 4), CLC_EFIELD))
			printf("    flag bit %d\n", bit);
		CHECK_EQ(decode(&p, sizeof(p), 3), CLC_EFIELD);
	}
}

static void test_descriptor_counts(void)
{
	struct clc_proposal p0 = good_proposal(0), p1 = good_proposal(1), pk = good_proposal(0);
	struct clc_withdraw w;
	struct clc_decline d;

	pk.flags = CLC_F_BELL_KEPT;
	clc_withdraw_init(&w, 1);
	clc_decline_init(&d, 1, 1);
	for (int n = 0; n <= 8; n++) {
		CHECK_EQ(decode(&p0, sizeof(p0), n), n == CLC_FD_ARENA ? CLC_OK : CLC_EFDS);
		CHECK_EQ(decode(&p1, sizeof(p1), n), n == CLC_FD_ARENA + 1 ? CLC_OK : CLC_EFDS);
		/* a kept doorbell: only the TCP socket travels */
		CHECK_EQ(decode(&pk, sizeof(pk), n), n == 1 ? CLC_OK : CLC_EFDS);
		CHECK_EQ(decode(&w, sizeof(w), n), n == 0 ? CLC_OK : CLC_EFDS);
		CHECK_EQ(decode(&d, sizeof(d), n), n == 0 ? CLC_OK : CLC_EFDS);
	}
	CHECK_EQ(decode(&p0, sizeof(p0), CLC_FD_MAX + 100), CLC_EFDS);
	/* From a channel that passes none, a proposal carries none whatever its
	 * flags say, and the rest carry none as ever. */
	CHECK_EQ(decode(&p0, sizeof(p0), CLC_NFDS_NONE), CLC_OK);
	CHECK_EQ(decode(&p1, sizeof(p1), CLC_NFDS_NONE), CLC_OK);
	CHECK_EQ(decode(&pk, sizeof(pk), CLC_NFDS_NONE), CLC_OK);
	CHECK_EQ(decode(&w, sizeof(w), CLC_NFDS_NONE), CLC_OK);
	CHECK_EQ(decode(&d, sizeof(d), CLC_NFDS_NONE), CLC_OK);
	/* a new arena has no segment that served before */
	p1.flags |= CLC_F_BELL_KEPT;
	CHECK_EQ(decode(&p1, sizeof(p1), 2), CLC_EFIELD);
	CHECK_EQ(decode(&w, sizeof(w), -1000), CLC_EFDS);
}

/* Valid messages of every type with the descriptors each takes. */
struct sample {
	union clc_msg m;
	size_t len;
	int nfds;
};

static int samples(struct sample s[3])
{
	s[0].m.proposal = good_proposal(1);
	s[0].len = sizeof(struct clc_proposal);
	s[0].nfds = CLC_FD_ARENA + 1;
	clc_withdraw_init(&s[1].m.withdraw, 9);
	s[1].len = sizeof(struct clc_withdraw);
	s[1].nfds = 0;
	clc_decline_init(&s[2].m.decline, 9, 1);
	s[2].len = sizeof(struct clc_decline);
	s[2].nfds = 0;
	return 3;
}

static void test_truncations(void)
{
	struct sample s[3];
	int n = samples(s);

	for (int i = 0; i < n; i++) {
		CHECK_EQ(decode(&s[i].m, s[i].len, s[i].nfds), CLC_OK);
		for (size_t len = 0; len < s[i].len; len++)
			if (!CHECK_EQ(decode(&s[i].m, len, s[i].nfds), CLC_ETRUNC))
				printf("    type %d cut to %zu bytes\n", s[i].m.hdr.type, len);
	}
}

static void test_length_mismatch(void)
{
	struct sample s[3];
	int n = samples(s);
	unsigned char big[sizeof(union clc_msg) + 64];

	for (int i = 0; i < n; i++) {
		static const int deltas[] = { -1, 1, 8, -8 };
		union clc_msg m = s[i].m;

		/* Trailing bytes after a well-formed message. */
		memset(big, 0, sizeof(big));
		memcpy(big, &m, s[i].len);
		for (size_t extra = 1; extra <= 64; extra++)
			CHECK_EQ(decode(big, s[i].len + extra, s[i].nfds), CLC_ELEN);

		/* A length field that disagrees with the type, whatever the datagram size. */
		for (size_t k = 0; k < sizeof(deltas) / sizeof(deltas[0]); k++) {
			m.hdr.length = (uint16_t)(s[i].len + deltas[k]);
			CHECK_EQ(decode(&m, s[i].len, s[i].nfds), CLC_ELEN);
			memcpy(big, &m, s[i].len);
			if (deltas[k] > 0)
				CHECK_EQ(decode(big, m.hdr.length, s[i].nfds), CLC_ELEN);
		}
		m.hdr.length = 0;
		CHECK_EQ(decode(&m, s[i].len, s[i].nfds), CLC_ELEN);
		m.hdr.length = UINT16_MAX;
		CHECK_EQ(decode(&m, s[i].len, s[i].nfds), CLC_ELEN);
	}

	/* A withdraw's length on a proposal, and the datagram cut to match. */
	struct clc_proposal p = good_proposal(0);

	p.hdr.length = sizeof(struct clc_withdraw);
	CHECK_EQ(decode(&p, sizeof(p), 3), CLC_ELEN);
	CHECK_EQ(decode(&p, sizeof(struct clc_withdraw), 3), CLC_ETRUNC);
}

static void test_header_identity(void)
{
	struct sample s[3];
	int n = samples(s);

	for (int i = 0; i < n; i++) {
		for (int byte = 0; byte < 4; byte++)
			for (int bit = 0; bit < 8; bit++) {
				union clc_msg m = s[i].m;

				((unsigned char *)&m.hdr.eyecatcher)[byte] ^= (unsigned char)(1u << bit);
				CHECK_EQ(decode(&m, s[i].len, s[i].nfds), CLC_EMAGIC);
			}
		for (int v = 0; v < 256; v++) {
			union clc_msg m = s[i].m;

			m.hdr.version = (uint8_t)v;
			CHECK_EQ(decode(&m, s[i].len, s[i].nfds), v == CLC_VERSION ? CLC_OK : CLC_EMAGIC);
		}
		for (int t = 0; t < 256; t++) {
			union clc_msg m = s[i].m;

			if (t >= CLC_PROPOSAL && t <= CLC_EXT_FD)
				continue;
			m.hdr.type = (uint8_t)t;
			if (!CHECK_EQ(decode(&m, s[i].len, s[i].nfds), CLC_ETYPE))
				printf("    type %d\n", t);
		}
	}
}

static void test_strerror(void)
{
	static const int codes[] = { CLC_OK, CLC_ETRUNC, CLC_EMAGIC, CLC_ETYPE,
				     CLC_ELEN, CLC_EFIELD, CLC_EFDS };
	const char *unknown = clc_strerror(12345);

	CHECK(unknown != NULL);
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		const char *s = clc_strerror(codes[i]);

		CHECK(s != NULL && *s);
		CHECK(strcmp(s, unknown) != 0);
		for (size_t j = 0; j < i; j++)
			CHECK(strcmp(s, clc_strerror(codes[j])) != 0);
	}
}

/* Padding is part of the message: any byte set in it is refused. */
static void test_padding(void)
{
	struct clc_withdraw w;
	struct clc_decline d;

	for (size_t at = 8; at < 16; at++) {
		clc_withdraw_init(&w, 1);
		((unsigned char *)&w)[at] = 0x80;
		CHECK_EQ(decode(&w, sizeof(w), 0), CLC_EFIELD);
	}
	for (size_t at = 12; at < 16; at++) {
		clc_decline_init(&d, 1, 2);
		((unsigned char *)&d)[at] = 0x01;
		CHECK_EQ(decode(&d, sizeof(d), 0), CLC_EFIELD);
	}
}

/* A sibling's answer: the proposal with its doorbell end and arena (the
 * client's socket stays with the sibling), or nothing at all. An ask names a
 * 4-tuple and a namespace, and carries no descriptor. */
static void test_ask_handoff(void)
{
	struct clc_proposal p = good_proposal(1), kept = good_proposal(0);
	struct clc_ask a;
	struct clc_handoff h;

	clc_ask_init(&a, 7);
	CHECK_EQ(decode(&a, sizeof(a), 0), CLC_EFIELD); /* no family */
	a.family = 4;
	a.server_ip[0] = a.client_ip[0] = 127;
	CHECK_EQ(decode(&a, sizeof(a), 0), CLC_OK);
	CHECK_EQ(decode(&a, sizeof(a), 1), CLC_EFDS);
	a.client_ip[4] = 1; /* past an IPv4 address */
	CHECK_EQ(decode(&a, sizeof(a), 0), CLC_EFIELD);
	a.family = 6;
	a.netns_cookie = 4096; /* any: only the holder compares it */
	CHECK_EQ(decode(&a, sizeof(a), 0), CLC_OK);
	a.pad[1] = 1;
	CHECK_EQ(decode(&a, sizeof(a), 0), CLC_EFIELD);

	clc_handoff_init(&h, 7, &p);
	CHECK_EQ(decode(&h, sizeof(h), CLC_HFD_MAX), CLC_OK);
	CHECK_EQ(decode(&h, sizeof(h), CLC_HFD_MAX - 1), CLC_EFDS);
	CHECK_EQ(decode(&h, sizeof(h), CLC_FD_MAX), CLC_EFDS);
	CHECK_EQ(decode(&h, sizeof(h) - 1, CLC_HFD_MAX), CLC_ETRUNC);
	h.found = 2;
	CHECK_EQ(decode(&h, sizeof(h), CLC_HFD_MAX), CLC_EFIELD);
	/* the arena always travels: a kept doorbell or a reused arena is refused */
	kept.flags = CLC_F_BELL_KEPT;
	clc_handoff_init(&h, 7, &kept);
	CHECK_EQ(decode(&h, sizeof(h), 1), CLC_EFIELD);
	/* the sender may keep the doorbell end too, which still travels */
	clc_handoff_init(&h, 7, &p);
	h.p.flags |= CLC_F_BELL_HELD;
	CHECK_EQ(decode(&h, sizeof(h), CLC_HFD_MAX), CLC_OK);
	CHECK_EQ(decode(&h, sizeof(h), CLC_HFD_MAX - 1), CLC_EFDS);
	h.p.flags |= CLC_F_BELL_KEPT;
	CHECK_EQ(decode(&h, sizeof(h), CLC_HFD_MAX - 1), CLC_EFIELD);
	/* ...but only in a handoff: a client has no sibling keeping anything */
	p.flags |= CLC_F_BELL_HELD;
	CHECK_EQ(decode(&p, sizeof(p), CLC_FD_MAX), CLC_EFIELD);
	p.flags = CLC_F_NEW_ARENA;
	clc_handoff_init(&h, 7, &p);
	h.p.hdr.type = CLC_DECLINE;
	CHECK_EQ(decode(&h, sizeof(h), CLC_HFD_MAX), CLC_EFIELD);
	clc_handoff_init(&h, 7, &p);
	h.p.ring_size[0] = 3;
	CHECK_EQ(decode(&h, sizeof(h), CLC_HFD_MAX), CLC_EFIELD);

	clc_handoff_init(&h, 7, NULL);
	CHECK_EQ(decode(&h, sizeof(h), 0), CLC_OK);
	CHECK_EQ(decode(&h, sizeof(h), 1), CLC_EFDS);
	h.p.seg_off = 4096;
	CHECK_EQ(decode(&h, sizeof(h), 0), CLC_EFIELD);

	/* An arena a device names: only the doorbell end travels, with the link;
	 * a link without a device, or a device unknown, is refused. */
	clc_handoff_init(&h, 7, &p);
	h.dev = 1;
	h.link[0] = 5;
	CHECK_EQ(decode(&h, sizeof(h), 1), CLC_OK);
	CHECK_EQ(decode(&h, sizeof(h), CLC_HFD_MAX), CLC_EFDS);
	h.dev = CLC_DEVS;
	CHECK_EQ(decode(&h, sizeof(h), 1), CLC_EFIELD);
	h.dev = 0;
	CHECK_EQ(decode(&h, sizeof(h), CLC_HFD_MAX), CLC_EFIELD);
	clc_handoff_init(&h, 7, NULL);
	h.dev = 1;
	CHECK_EQ(decode(&h, sizeof(h), 0), CLC_EFIELD);
}

/* A memfd for the peer's end of a connection: one descriptor, whole pages,
 * no more than CLC_EXT_MAX, zero padding. */
static void test_ext_fd(void)
{
	struct clc_ext_fd x;
	union clc_msg out;

	clc_ext_fd_init(&x, 9, 3, 64 * PAGE);
	CHECK_EQ(decode_at(&x, sizeof(x), 1, &out, 1), CLC_OK);
	CHECK(out.ext_fd.conn_id == 9 && out.ext_fd.index == 3 && out.ext_fd.size == 64 * PAGE);
	CHECK_EQ(decode(&x, sizeof(x), 0), CLC_EFDS);
	CHECK_EQ(decode(&x, sizeof(x), 2), CLC_EFDS);
	CHECK_EQ(decode(&x, sizeof(x) - 1, 1), CLC_ETRUNC);
	x.size = 0;
	CHECK_EQ(decode(&x, sizeof(x), 1), CLC_EFIELD);
	x.size = PAGE + 1;
	CHECK_EQ(decode(&x, sizeof(x), 1), CLC_EFIELD);
	x.size = CLC_EXT_MAX;
	CHECK_EQ(decode(&x, sizeof(x), 1), CLC_OK);
	x.size = CLC_EXT_MAX + PAGE;
	CHECK_EQ(decode(&x, sizeof(x), 1), CLC_EFIELD);
	x.size = PAGE;
	x.pad = 1;
	CHECK_EQ(decode(&x, sizeof(x), 1), CLC_EFIELD);
}

int main(void)
{
	RUN(test_encoders_roundtrip);
	RUN(test_empty_proposal_rejected);
	RUN(test_ring_sizes);
	RUN(test_segment_bounds);
	RUN(test_segment_overflow);
	RUN(test_arena_size);
	RUN(test_unknown_flags);
	RUN(test_descriptor_counts);
	RUN(test_truncations);
	RUN(test_length_mismatch);
	RUN(test_header_identity);
	RUN(test_strerror);
	RUN(test_padding);
	RUN(test_ask_handoff);
	RUN(test_ext_fd);
	return check_report();
}
