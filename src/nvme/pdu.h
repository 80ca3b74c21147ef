/* NVMe/TCP PDUs: the wire format, its encoder, and the parser every received
 * header goes through before any of its fields is trusted.
 *
 * A PDU is a common header (type, flags, HLEN, PDO, PLEN), the rest of the
 * type's fixed header (HLEN bytes in all), a header digest when negotiated,
 * padding up to PDO, the data, and a data digest when negotiated. The parser
 * checks framing only, as the transport binding defines it: lengths,
 * alignment, digests, which PDU types this end may receive and when. What a
 * data PDU refers to (a command, its offsets) is for the host or controller to
 * check. A violation comes back as the fatal error status and information a
 * termination request carries. */
#ifndef USMC_NVME_PDU_H
#define USMC_NVME_PDU_H

#include <stddef.h>
#include <stdint.h>

#include "spec.h"

enum pdu_type {
	PDU_ICREQ = 0x00,
	PDU_ICRESP = 0x01,
	PDU_H2C_TERM = 0x02,
	PDU_C2H_TERM = 0x03,
	PDU_CMD = 0x04,
	PDU_RESP = 0x05,
	PDU_H2C_DATA = 0x06,
	PDU_C2H_DATA = 0x07,
	PDU_R2T = 0x09,
};

#define PDU_F_HDGST 0x01
#define PDU_F_DDGST 0x02
#define PDU_F_LAST 0x04    /* data PDUs: the last of a command's (or of an R2T's) */
#define PDU_F_SUCCESS 0x08 /* C2HData: the command succeeded, no response follows */

/* Header lengths by type. */
#define PDU_CH_LEN 8
#define PDU_IC_LEN 128
#define PDU_TERM_LEN 24
#define PDU_CMD_LEN (PDU_CH_LEN + NVME_SQE_SIZE)
#define PDU_RESP_LEN (PDU_CH_LEN + NVME_CQE_SIZE)
#define PDU_DATA_LEN 24
#define PDU_R2T_LEN 24
#define PDU_DIGEST_LEN 4
/* The longest header, digest and padding: the command capsule's, padded to
 * the largest alignment a peer may ask for (PDA 31: 128 bytes). */
#define PDU_HDR_MAX 256
/* A termination request carries at most this much of the header in error. */
#define PDU_TERM_DATA_MAX 128

/* Common header fields. */
enum { CH_TYPE = 0, CH_FLAGS = 1, CH_HLEN = 2, CH_PDO = 3, CH_PLEN = 4 };
/* Type-specific fields. */
enum {
	IC_PFV = 8,
	IC_PDA = 10,    /* ICReq: HPDA, ICResp: CPDA */
	IC_DGST = 11,
	IC_MAXR2T = 12, /* ICReq, 0's based */
	IC_MAXDATA = 12, /* ICResp: MAXH2CDATA */
	TERM_FES = 8,
	TERM_FEI = 10,
	DATA_CID = 8,   /* data PDUs and R2T alike */
	DATA_TTAG = 10,
	DATA_OFFSET = 12,
	DATA_LENGTH = 16,
};

#define PDU_DGST_HEADER 0x1
#define PDU_DGST_DATA 0x2
#define NVME_TCP_PFV_1_0 0
#define NVME_TCP_MIN_MAXH2CDATA 4096

/* Fatal error status of a termination request. */
enum pdu_fes {
	FES_INVALID_HEADER = 0x01,
	FES_SEQUENCE = 0x02,
	FES_HDGST = 0x03,
	FES_OUT_OF_RANGE = 0x04,
	FES_LIMIT_EXCEEDED = 0x05,
	FES_UNSUPPORTED = 0x06,
};

/* Why a received PDU cannot be taken: what a termination request says. */
struct pdu_fault {
	uint16_t fes;
	uint32_t fei;       /* the offending field's byte offset, or a value */
	const char *why;    /* for the log */
};

enum pdu_role { PDU_HOST, PDU_CTRL };

/* One direction's framing, as negotiated. */
struct pdu_frame {
	uint8_t hdgst, ddgst;
	uint8_t pda;        /* the receiver's data alignment, 0's based dwords */
};

/* What a receiver accepts. */
struct pdu_rx {
	enum pdu_role role;   /* which PDUs come to this end */
	int connected;        /* ICReq/ICResp done: digests apply, IC PDUs no more */
	struct pdu_frame f;   /* as this end asked for its own receive side */
	uint32_t max_data;    /* the most data one PDU may carry */
	uint32_t max_incapsule; /* the most data a command capsule may carry */
};

/* A checked header. */
struct pdu_info {
	uint8_t type, flags, hlen;
	uint32_t plen;
	uint32_t hdr_bytes;  /* header and its digest, as read before padding */
	uint32_t pad;        /* bytes between them and the data */
	uint32_t data_len;   /* data bytes (0: none, nothing follows the header) */
	uint8_t ddgst;       /* a data digest follows the data */
};

/* After the common header (PDU_CH_LEN bytes): how many header bytes make the
 * whole header, its digest included; 0 with f filled when it is bad. */
uint32_t pdu_hdr_bytes(const struct pdu_rx *rx, const uint8_t *ch, struct pdu_fault *f);
/* A whole header, as pdu_hdr_bytes() said: 0 and its description, or -1 with f. */
int pdu_parse(const struct pdu_rx *rx, const uint8_t *hdr, struct pdu_info *info,
	      struct pdu_fault *f);

/* Encoding. Each writes a header of its type into b (PDU_HDR_MAX bytes), with
 * the header digest and the padding the receiver's framing asks for, and
 * returns how many bytes of it go on the wire before data_len data bytes (and
 * their digest, which the caller appends when tx->ddgst and data_len). */
size_t pdu_icreq(uint8_t *b, uint8_t hpda, uint8_t dgst, uint32_t maxr2t);
size_t pdu_icresp(uint8_t *b, uint8_t cpda, uint8_t dgst, uint32_t maxh2cdata);
size_t pdu_cmd(uint8_t *b, const struct pdu_frame *tx, const struct nvme_sqe *sqe,
	       uint32_t data_len);
size_t pdu_resp(uint8_t *b, const struct pdu_frame *tx, const struct nvme_cqe *cqe);
size_t pdu_data(uint8_t *b, const struct pdu_frame *tx, enum pdu_type type, uint8_t flags,
		uint16_t cid, uint16_t ttag, uint32_t offset, uint32_t data_len);
size_t pdu_r2t(uint8_t *b, const struct pdu_frame *tx, uint16_t cid, uint16_t ttag,
	       uint32_t offset, uint32_t len);
/* A termination request quoting up to PDU_TERM_DATA_MAX bytes of bad (whose
 * length is bad_len); returns the whole PDU's length. */
size_t pdu_term(uint8_t *b, enum pdu_type type, uint16_t fes, uint32_t fei, const uint8_t *bad,
		size_t bad_len);

/* The header digest, as it goes after a header of hlen bytes. */
uint32_t pdu_hdgst(const uint8_t *hdr, size_t hlen);

const char *pdu_type_name(uint8_t type);

#endif
