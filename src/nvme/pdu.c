#include "pdu.h"

#include <string.h>

#include "digest.h"

struct type_rule {
	uint8_t hlen;
	uint8_t to;        /* 1 << role that receives it */
	uint8_t ic;        /* only before the connection is initialised */
	uint8_t digests;   /* carries a header digest (and a data digest with data) */
	uint8_t data;      /* may carry data */
};

#define TO_HOST (1u << PDU_HOST)
#define TO_CTRL (1u << PDU_CTRL)

static const struct type_rule rules[256] = {
	[PDU_ICREQ] = {PDU_IC_LEN, TO_CTRL, 1, 0, 0},
	[PDU_ICRESP] = {PDU_IC_LEN, TO_HOST, 1, 0, 0},
	[PDU_H2C_TERM] = {PDU_TERM_LEN, TO_CTRL, 0, 0, 1},
	[PDU_C2H_TERM] = {PDU_TERM_LEN, TO_HOST, 0, 0, 1},
	[PDU_CMD] = {PDU_CMD_LEN, TO_CTRL, 0, 1, 1},
	[PDU_RESP] = {PDU_RESP_LEN, TO_HOST, 0, 1, 0},
	[PDU_H2C_DATA] = {PDU_DATA_LEN, TO_CTRL, 0, 1, 1},
	[PDU_C2H_DATA] = {PDU_DATA_LEN, TO_HOST, 0, 1, 1},
	[PDU_R2T] = {PDU_R2T_LEN, TO_HOST, 0, 1, 0},
};

static int fault(struct pdu_fault *f, uint16_t fes, uint32_t fei, const char *why)
{
	f->fes = fes;
	f->fei = fei;
	f->why = why;
	return -1;
}

/* Termination requests may come at any time, even before the connection is
 * initialised, and never carry digests. */
static int hdgst_applies(const struct pdu_rx *rx, const struct type_rule *r)
{
	return rx->connected && rx->f.hdgst && r->digests;
}

uint32_t pdu_hdr_bytes(const struct pdu_rx *rx, const uint8_t *ch, struct pdu_fault *f)
{
	const struct type_rule *r = &rules[ch[CH_TYPE]];

	if (!(r->to & (1u << rx->role))) {
		fault(f, FES_INVALID_HEADER, CH_TYPE, "unknown PDU type, or not one this end receives");
		return 0;
	}
	if (r->ic == rx->connected && ch[CH_TYPE] != PDU_H2C_TERM && ch[CH_TYPE] != PDU_C2H_TERM) {
		fault(f, FES_SEQUENCE, CH_TYPE,
		      rx->connected ? "second connection initialisation"
				    : "PDU before the connection was initialised");
		return 0;
	}
	if (ch[CH_HLEN] != r->hlen) {
		fault(f, FES_INVALID_HEADER, CH_HLEN, "header length not the type's");
		return 0;
	}
	return r->hlen + (hdgst_applies(rx, r) ? PDU_DIGEST_LEN : 0);
}

static uint32_t align_up(uint32_t v, uint8_t pda)
{
	uint32_t a = 4u * (pda + 1u);

	return (v + a - 1) / a * a;
}

uint32_t pdu_hdgst(const uint8_t *hdr, size_t hlen)
{
	return crc32c_final(digest_sum(CRC32C_INIT, hdr, hlen));
}

int pdu_parse(const struct pdu_rx *rx, const uint8_t *hdr, struct pdu_info *info,
	      struct pdu_fault *f)
{
	uint32_t hb = pdu_hdr_bytes(rx, hdr, f), plen = get_le32(hdr + CH_PLEN);
	const struct type_rule *r = &rules[hdr[CH_TYPE]];
	uint8_t flags = hdr[CH_FLAGS], pdo = hdr[CH_PDO];
	int hd = hb && hdgst_applies(rx, r);

	if (!hb)
		return -1;
	memset(info, 0, sizeof(*info));
	info->type = hdr[CH_TYPE];
	info->flags = flags;
	info->hlen = r->hlen;
	info->plen = plen;
	info->hdr_bytes = hb;
	/* The digest first: until it matches, no other field can be believed. */
	if (hd && get_le32(hdr + r->hlen) != pdu_hdgst(hdr, r->hlen))
		return fault(f, FES_HDGST, 0, "header digest mismatch");
	if (hd != !!(flags & PDU_F_HDGST) && r->digests)
		return fault(f, FES_INVALID_HEADER, CH_FLAGS, "header digest flag not as negotiated");
	if (plen < hb)
		return fault(f, FES_INVALID_HEADER, CH_PLEN, "PDU shorter than its header");
	if (r->ic) {
		if (plen != hb || pdo)
			return fault(f, FES_INVALID_HEADER, plen != hb ? CH_PLEN : CH_PDO,
				     "initialisation PDU with data");
		return 0;
	}
	if (!r->digests) {
		/* A termination request: the header in error follows, no padding. */
		if (plen - hb > PDU_TERM_DATA_MAX)
			return fault(f, FES_INVALID_HEADER, CH_PLEN, "termination request too long");
		info->data_len = plen - hb;
		return 0;
	}
	if (plen == hb) {
		if (flags & PDU_F_DDGST)
			return fault(f, FES_INVALID_HEADER, CH_FLAGS, "data digest flag without data");
		if (hdr[CH_TYPE] == PDU_H2C_DATA || hdr[CH_TYPE] == PDU_C2H_DATA)
			return fault(f, FES_INVALID_HEADER, CH_PLEN, "data PDU without data");
		return 0;
	}
	if (!r->data)
		return fault(f, FES_INVALID_HEADER, CH_PLEN, "data on a PDU type that has none");
	if (pdo != align_up(hb, rx->f.pda))
		return fault(f, FES_INVALID_HEADER, CH_PDO, "data offset not where our alignment puts it");
	if (!!(flags & PDU_F_DDGST) != rx->f.ddgst)
		return fault(f, FES_INVALID_HEADER, CH_FLAGS, "data digest flag not as negotiated");
	info->ddgst = rx->f.ddgst;
	if (plen < pdo + (info->ddgst ? PDU_DIGEST_LEN : 0) + 1u)
		return fault(f, FES_INVALID_HEADER, CH_PLEN, "PDU too short for its data offset");
	info->pad = pdo - hb;
	info->data_len = plen - pdo - (info->ddgst ? PDU_DIGEST_LEN : 0);
	if (hdr[CH_TYPE] == PDU_CMD) {
		if (info->data_len > rx->max_incapsule)
			return fault(f, FES_LIMIT_EXCEEDED, CH_PLEN, "in-capsule data beyond the limit");
		return 0;
	}
	/* Data PDUs: the length field must agree with the frame. */
	if (get_le32(hdr + DATA_LENGTH) != info->data_len)
		return fault(f, FES_INVALID_HEADER, DATA_LENGTH, "data length disagrees with PDU length");
	if (info->data_len > rx->max_data)
		return fault(f, FES_LIMIT_EXCEEDED, DATA_LENGTH, "data PDU beyond the limit");
	if ((flags & PDU_F_SUCCESS) && (hdr[CH_TYPE] != PDU_C2H_DATA || !(flags & PDU_F_LAST)))
		return fault(f, FES_INVALID_HEADER, CH_FLAGS, "success flag on a PDU not last");
	return 0;
}

/* The common header, the header digest and the padding; returns the bytes to
 * send before the data. */
static size_t finish(uint8_t *b, const struct pdu_frame *tx, uint8_t type, uint8_t flags,
		     uint8_t hlen, uint32_t data_len)
{
	uint32_t hb = hlen + (tx->hdgst ? PDU_DIGEST_LEN : 0);
	uint32_t pdo = data_len ? align_up(hb, tx->pda) : 0;
	uint32_t ddgst = data_len && tx->ddgst ? PDU_DIGEST_LEN : 0;

	b[CH_TYPE] = type;
	b[CH_FLAGS] = flags | (tx->hdgst ? PDU_F_HDGST : 0) | (ddgst ? PDU_F_DDGST : 0);
	b[CH_HLEN] = hlen;
	b[CH_PDO] = (uint8_t)pdo;
	put_le32(b + CH_PLEN, (data_len ? pdo : hb) + data_len + ddgst);
	if (tx->hdgst)
		put_le32(b + hlen, pdu_hdgst(b, hlen));
	if (pdo > hb)
		memset(b + hb, 0, pdo - hb);
	return data_len ? pdo : hb;
}

static size_t ic(uint8_t *b, uint8_t type, uint8_t pda, uint8_t dgst, uint32_t v)
{
	static const struct pdu_frame none;

	memset(b, 0, PDU_IC_LEN);
	put_le16(b + IC_PFV, NVME_TCP_PFV_1_0);
	b[IC_PDA] = pda;
	b[IC_DGST] = dgst;
	put_le32(b + IC_MAXR2T, v);
	return finish(b, &none, type, 0, PDU_IC_LEN, 0);
}

size_t pdu_icreq(uint8_t *b, uint8_t hpda, uint8_t dgst, uint32_t maxr2t)
{
	return ic(b, PDU_ICREQ, hpda, dgst, maxr2t);
}

size_t pdu_icresp(uint8_t *b, uint8_t cpda, uint8_t dgst, uint32_t maxh2cdata)
{
	return ic(b, PDU_ICRESP, cpda, dgst, maxh2cdata);
}

size_t pdu_cmd(uint8_t *b, const struct pdu_frame *tx, const struct nvme_sqe *sqe,
	       uint32_t data_len)
{
	memcpy(b + PDU_CH_LEN, sqe->b, NVME_SQE_SIZE);
	return finish(b, tx, PDU_CMD, 0, PDU_CMD_LEN, data_len);
}

size_t pdu_resp(uint8_t *b, const struct pdu_frame *tx, const struct nvme_cqe *cqe)
{
	memcpy(b + PDU_CH_LEN, cqe->b, NVME_CQE_SIZE);
	return finish(b, tx, PDU_RESP, 0, PDU_RESP_LEN, 0);
}

static void transfer(uint8_t *b, uint16_t cid, uint16_t ttag, uint32_t offset, uint32_t len)
{
	put_le16(b + DATA_CID, cid);
	put_le16(b + DATA_TTAG, ttag);
	put_le32(b + DATA_OFFSET, offset);
	put_le32(b + DATA_LENGTH, len);
	memset(b + DATA_LENGTH + 4, 0, 4);
}

size_t pdu_data(uint8_t *b, const struct pdu_frame *tx, enum pdu_type type, uint8_t flags,
		uint16_t cid, uint16_t ttag, uint32_t offset, uint32_t data_len)
{
	transfer(b, cid, ttag, offset, data_len);
	return finish(b, tx, (uint8_t)type, flags, PDU_DATA_LEN, data_len);
}

size_t pdu_r2t(uint8_t *b, const struct pdu_frame *tx, uint16_t cid, uint16_t ttag,
	       uint32_t offset, uint32_t len)
{
	transfer(b, cid, ttag, offset, len);
	return finish(b, tx, PDU_R2T, 0, PDU_R2T_LEN, 0);
}

size_t pdu_term(uint8_t *b, enum pdu_type type, uint16_t fes, uint32_t fei, const uint8_t *bad,
		size_t bad_len)
{
	if (bad_len > PDU_TERM_DATA_MAX)
		bad_len = PDU_TERM_DATA_MAX;
	memset(b, 0, PDU_TERM_LEN);
	b[CH_TYPE] = (uint8_t)type;
	b[CH_HLEN] = PDU_TERM_LEN;
	put_le32(b + CH_PLEN, (uint32_t)(PDU_TERM_LEN + bad_len));
	put_le16(b + TERM_FES, fes);
	put_le32(b + TERM_FEI, fei);
	if (bad_len)
		memcpy(b + PDU_TERM_LEN, bad, bad_len);
	return PDU_TERM_LEN + bad_len;
}

const char *pdu_type_name(uint8_t type)
{
	static const char *const names[] = {
		[PDU_ICREQ] = "ICReq",     [PDU_ICRESP] = "ICResp",     [PDU_H2C_TERM] = "H2CTermReq",
		[PDU_C2H_TERM] = "C2HTermReq", [PDU_CMD] = "CapsuleCmd", [PDU_RESP] = "CapsuleResp",
		[PDU_H2C_DATA] = "H2CData", [PDU_C2H_DATA] = "C2HData",  [PDU_R2T] = "R2T",
	};

	return type < sizeof(names) / sizeof(names[0]) && names[type] ? names[type] : "unknown";
}
