/* link: src/nvme/pdu.c src/nvme/digest.c src/util/crc32c.c */
/* NVMe/TCP PDUs: every type encoded and parsed back, with and without digests
 * and with data alignments; and each framing rule the parser enforces, broken
 * on purpose, comes back as the fatal error status and field it should. */
#include "check.h"

#include "../../src/nvme/pdu.h"

#include <string.h>

static struct pdu_rx host_rx(int hd, int dd, uint8_t pda)
{
	struct pdu_rx rx = {PDU_HOST, 1, {(uint8_t)hd, (uint8_t)dd, pda}, 1u << 20, 0};
	return rx;
}

static struct pdu_rx ctrl_rx(int hd, int dd, uint8_t pda)
{
	struct pdu_rx rx = {PDU_CTRL, 1, {(uint8_t)hd, (uint8_t)dd, pda}, 131072, 8192};
	return rx;
}

/* Parses a whole header as a receiver would: the common part, then the rest. */
static int parse(const struct pdu_rx *rx, const uint8_t *b, struct pdu_info *pi, struct pdu_fault *f)
{
	uint32_t hb = pdu_hdr_bytes(rx, b, f);

	if (!hb)
		return -1;
	return pdu_parse(rx, b, pi, f);
}

static void check_data_roundtrip(void)
{
	uint8_t b[PDU_HDR_MAX];

	for (int hd = 0; hd < 2; hd++)
		for (int dd = 0; dd < 2; dd++)
			for (uint8_t pda = 0; pda < 32; pda += 3) {
				struct pdu_frame tx = {(uint8_t)hd, (uint8_t)dd, pda};
				struct pdu_rx rx = host_rx(hd, dd, pda);
				struct pdu_info pi;
				struct pdu_fault f;
				size_t n = pdu_data(b, &tx, PDU_C2H_DATA, PDU_F_LAST, 7, 0, 4096, 65536);

				CHECK_EQ(n, b[CH_PDO]);
				CHECK_EQ(n % (4u * (pda + 1u)), 0);
				CHECK(n >= PDU_DATA_LEN + (hd ? 4u : 0u));
				CHECK_EQ(parse(&rx, b, &pi, &f), 0);
				CHECK_EQ(pi.type, PDU_C2H_DATA);
				CHECK_EQ(pi.data_len, 65536);
				CHECK_EQ(pi.hdr_bytes + pi.pad, n);
				CHECK_EQ(pi.ddgst, dd);
				CHECK_EQ(pi.plen, n + 65536 + (dd ? 4u : 0u));
				CHECK_EQ(get_le16(b + DATA_CID), 7);
				CHECK_EQ(get_le32(b + DATA_OFFSET), 4096);
			}
}

static void check_other_types(void)
{
	uint8_t b[PDU_HDR_MAX];
	struct pdu_frame tx = {1, 1, 0};
	struct pdu_rx h = host_rx(1, 1, 0), c = ctrl_rx(1, 1, 0);
	struct pdu_info pi;
	struct pdu_fault f;
	struct nvme_sqe sqe;
	struct nvme_cqe cqe;

	memset(&sqe, 0x5a, sizeof(sqe));
	memset(&cqe, 0xa5, sizeof(cqe));
	CHECK_EQ(pdu_cmd(b, &tx, &sqe, 0), PDU_CMD_LEN + 4);
	CHECK_EQ(b[CH_PDO], 0);
	CHECK_EQ(parse(&c, b, &pi, &f), 0);
	CHECK_EQ(pi.data_len, 0);
	CHECK(!memcmp(b + PDU_CH_LEN, sqe.b, sizeof(sqe.b)));
	CHECK_EQ(pdu_cmd(b, &tx, &sqe, 4096), PDU_CMD_LEN + 4);
	CHECK_EQ(parse(&c, b, &pi, &f), 0);
	CHECK_EQ(pi.data_len, 4096);
	CHECK(pi.ddgst);
	CHECK_EQ(pdu_resp(b, &tx, &cqe), PDU_RESP_LEN + 4);
	CHECK_EQ(parse(&h, b, &pi, &f), 0);
	CHECK(!memcmp(b + PDU_CH_LEN, cqe.b, sizeof(cqe.b)));
	CHECK_EQ(pdu_r2t(b, &tx, 3, 9, 0, 1 << 20), PDU_R2T_LEN + 4);
	CHECK_EQ(parse(&h, b, &pi, &f), 0);
	CHECK_EQ(get_le32(b + DATA_LENGTH), 1 << 20);
	CHECK_EQ(pdu_data(b, &tx, PDU_H2C_DATA, PDU_F_LAST, 3, 9, 0, 131072), PDU_DATA_LEN + 4);
	CHECK_EQ(parse(&c, b, &pi, &f), 0);
	/* Before the connection: only the initialisation PDUs, and no digests. */
	h.connected = c.connected = 0;
	CHECK_EQ(pdu_icreq(b, 2, 3, 0), PDU_IC_LEN);
	CHECK_EQ(parse(&c, b, &pi, &f), 0);
	CHECK_EQ(b[IC_PDA], 2);
	CHECK_EQ(b[IC_DGST], 3);
	CHECK_EQ(pdu_icresp(b, 0, 3, 131072), PDU_IC_LEN);
	CHECK_EQ(parse(&h, b, &pi, &f), 0);
	CHECK_EQ(get_le32(b + IC_MAXDATA), 131072);
	/* Termination requests: any time, no digest, quoting a header. */
	uint8_t quote[200] = {PDU_CMD};
	CHECK_EQ(pdu_term(b, PDU_C2H_TERM, FES_HDGST, 0, quote, sizeof(quote)),
		 PDU_TERM_LEN + PDU_TERM_DATA_MAX);
	CHECK_EQ(b[PDU_TERM_LEN], PDU_CMD);
	CHECK_EQ(parse(&h, b, &pi, &f), 0);
	CHECK_EQ(pi.data_len, PDU_TERM_DATA_MAX);
	h.connected = 1;
	CHECK_EQ(parse(&h, b, &pi, &f), 0);
}

/* A header, changed by edit, fails with fes at fei. */
static void expect_fault(const struct pdu_rx *rx, const uint8_t *good, size_t len,
			 void (*edit)(uint8_t *), uint16_t fes, uint32_t fei, int line)
{
	uint8_t b[PDU_HDR_MAX];
	struct pdu_info pi;
	struct pdu_fault f = {0, 0, NULL};

	memcpy(b, good, len);
	edit(b);
	if (!CHECK_EQ(parse(rx, b, &pi, &f), -1) || !CHECK_EQ(f.fes, fes) || !CHECK_EQ(f.fei, fei))
		printf("    (the case at line %d: %s)\n", line, f.why ? f.why : "accepted");
	CHECK(f.why != NULL);
}

#define FAULT(rx, good, len, edit, fes, fei) expect_fault(rx, good, len, edit, fes, fei, __LINE__)

static void type_8(uint8_t *b) { b[CH_TYPE] = 0x08; }
static void type_ff(uint8_t *b) { b[CH_TYPE] = 0xff; }
static void type_cmd(uint8_t *b) { b[CH_TYPE] = PDU_CMD; }
static void type_icreq(uint8_t *b) { b[CH_TYPE] = PDU_ICREQ; b[CH_HLEN] = PDU_IC_LEN; }
static void hlen_23(uint8_t *b) { b[CH_HLEN] = 23; }
static void flip_byte(uint8_t *b) { b[DATA_OFFSET] ^= 1; }
static void pdo_plus4(uint8_t *b) { b[CH_PDO] += 4; }
static void pdo_zero(uint8_t *b) { b[CH_PDO] = 0; }
static void no_hdgst_flag(uint8_t *b) { b[CH_FLAGS] &= (uint8_t)~PDU_F_HDGST; }
static void no_ddgst_flag(uint8_t *b) { b[CH_FLAGS] &= (uint8_t)~PDU_F_DDGST; }
static void plen_short(uint8_t *b) { put_le32(b + CH_PLEN, 10); }
static void plen_no_data(uint8_t *b) { put_le32(b + CH_PLEN, b[CH_PDO]); }
static void length_field(uint8_t *b) { put_le32(b + DATA_LENGTH, get_le32(b + DATA_LENGTH) - 1); }
static void success_not_last(uint8_t *b) { b[CH_FLAGS] = (uint8_t)((b[CH_FLAGS] & ~PDU_F_LAST) | PDU_F_SUCCESS); }
static void term_long(uint8_t *b) { put_le32(b + CH_PLEN, PDU_TERM_LEN + PDU_TERM_DATA_MAX + 1); }
static void ic_data(uint8_t *b) { put_le32(b + CH_PLEN, PDU_IC_LEN + 4); }
static void nothing(uint8_t *b) { (void)b; }

/* Edits made before the header digest is recomputed: only framing is wrong. */
static void redigest(uint8_t *b, size_t hlen)
{
	put_le32(b + hlen, pdu_hdgst(b, hlen));
}

static void check_faults(void)
{
	uint8_t c2h[PDU_HDR_MAX], cmd[PDU_HDR_MAX], term[PDU_HDR_MAX], ic[PDU_HDR_MAX];
	struct pdu_frame tx = {1, 1, 0}, plain = {0, 0, 0};
	struct pdu_rx h = host_rx(1, 1, 0), hp = host_rx(0, 0, 0), c = ctrl_rx(1, 1, 0);
	struct nvme_sqe sqe = {{0}};

	pdu_data(c2h, &tx, PDU_C2H_DATA, PDU_F_LAST, 1, 0, 0, 8192);
	FAULT(&h, c2h, sizeof(c2h), type_8, FES_INVALID_HEADER, CH_TYPE);
	FAULT(&h, c2h, sizeof(c2h), type_ff, FES_INVALID_HEADER, CH_TYPE);
	FAULT(&h, c2h, sizeof(c2h), type_cmd, FES_INVALID_HEADER, CH_TYPE);
	FAULT(&h, c2h, sizeof(c2h), type_icreq, FES_INVALID_HEADER, CH_TYPE);
	FAULT(&h, c2h, sizeof(c2h), hlen_23, FES_INVALID_HEADER, CH_HLEN);
	FAULT(&h, c2h, sizeof(c2h), flip_byte, FES_HDGST, 0);

	pdu_data(c2h, &plain, PDU_C2H_DATA, PDU_F_LAST, 1, 0, 0, 8192);
	/* No digest where one is expected: the data's first bytes do not match. */
	FAULT(&h, c2h, sizeof(c2h), nothing, FES_HDGST, 0);
	FAULT(&hp, c2h, sizeof(c2h), pdo_plus4, FES_INVALID_HEADER, CH_PDO);
	FAULT(&hp, c2h, sizeof(c2h), pdo_zero, FES_INVALID_HEADER, CH_PDO);
	FAULT(&hp, c2h, sizeof(c2h), plen_short, FES_INVALID_HEADER, CH_PLEN);
	FAULT(&hp, c2h, sizeof(c2h), length_field, FES_INVALID_HEADER, DATA_LENGTH);
	FAULT(&hp, c2h, sizeof(c2h), success_not_last, FES_INVALID_HEADER, CH_FLAGS);
	pdu_data(c2h, &plain, PDU_C2H_DATA, PDU_F_LAST, 1, 0, 0, 2u << 20);
	FAULT(&hp, c2h, sizeof(c2h), nothing, FES_LIMIT_EXCEEDED, DATA_LENGTH);
	pdu_data(c2h, &tx, PDU_C2H_DATA, PDU_F_LAST, 1, 0, 0, 8192);
	no_ddgst_flag(c2h);
	redigest(c2h, PDU_DATA_LEN);
	FAULT(&h, c2h, sizeof(c2h), nothing, FES_INVALID_HEADER, CH_FLAGS);
	pdu_data(c2h, &tx, PDU_C2H_DATA, PDU_F_LAST, 1, 0, 0, 8192);
	no_hdgst_flag(c2h);
	redigest(c2h, PDU_DATA_LEN);
	FAULT(&h, c2h, sizeof(c2h), nothing, FES_INVALID_HEADER, CH_FLAGS);
	pdu_data(c2h, &plain, PDU_C2H_DATA, PDU_F_LAST, 1, 0, 0, 8192);
	FAULT(&hp, c2h, sizeof(c2h), plen_no_data, FES_INVALID_HEADER, CH_PLEN);

	pdu_cmd(cmd, &plain, &sqe, 8193);
	struct pdu_rx cp = ctrl_rx(0, 0, 0);
	FAULT(&cp, cmd, sizeof(cmd), nothing, FES_LIMIT_EXCEEDED, CH_PLEN);
	pdu_cmd(cmd, &tx, &sqe, 0);
	cmd[CH_FLAGS] |= PDU_F_DDGST;
	redigest(cmd, PDU_CMD_LEN);
	FAULT(&c, cmd, sizeof(cmd), nothing, FES_INVALID_HEADER, CH_FLAGS);

	pdu_term(term, PDU_C2H_TERM, FES_SEQUENCE, 0, NULL, 0);
	FAULT(&h, term, sizeof(term), term_long, FES_INVALID_HEADER, CH_PLEN);

	pdu_icresp(ic, 0, 0, 4096);
	h.connected = 0;
	FAULT(&h, ic, sizeof(ic), ic_data, FES_INVALID_HEADER, CH_PLEN);
	h.connected = 1;
	FAULT(&h, ic, sizeof(ic), nothing, FES_SEQUENCE, CH_TYPE);
	h.connected = 0;
	FAULT(&h, c2h, sizeof(c2h), nothing, FES_SEQUENCE, CH_TYPE);
}

int main(void)
{
	RUN(check_data_roundtrip);
	RUN(check_other_types);
	RUN(check_faults);
	return check_report();
}
