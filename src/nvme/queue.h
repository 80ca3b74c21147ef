/* One NVMe/TCP connection (a queue), either end: PDUs in through the parser and
 * a receive state machine that never blocks, PDUs out through a transmit queue
 * written with writev as the socket takes it. The owner (host.c, target.c)
 * sees whole headers and says where each PDU's data goes; this file moves the
 * bytes there.
 *
 * Data reaches its destination one of two ways:
 *   - placed: the destination is registered with the placement interface
 *     (include/usmc/ddp.h) under a tag, and the payload goes from the stream
 *     straight into it, by readv from a TCP socket or out of usmc's
 *     shared-memory ring, with the data digest summed as it lands (fused);
 *   - staged: bytes are read ahead into the queue's staging buffer, many PDUs
 *     a system call, and copied out of it; for small transfers this is the
 *     cheaper way (the io_threshold of the host).
 * On a socket whose placement copies from a ring, headers are read exactly,
 * never ahead, so that no payload byte passes through the staging buffer. */
#ifndef USMC_NVME_QUEUE_H
#define USMC_NVME_QUEUE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "pdu.h"

struct usmc_ddp;

/* Buffers one transfer may have. */
#define NVQ_IOV_MAX 16
/* Staging: read-ahead on plain sockets, and whatever is not placed. */
#define NVQ_STAGE_SIZE (128u << 10)
/* What a placement on a plain socket reads beyond its payload, for the next
 * header: the data digest, a data PDU's header with its digest, a little more. */
#define NVQ_AHEAD 128u

/* Where the data of the PDU being received goes. */
struct nvq_sink {
	struct iovec iov[NVQ_IOV_MAX]; /* the window the data fills, in order */
	int iovcnt;
	int tag;                       /* >= 0: placed under this tag, tag_off bytes in */
	size_t tag_off;
};

struct nvq;

struct nvq_ops {
	/* A checked header (pi, hdr: the header and its digest). Data PDUs fill
	 * sink (zeroed: discard nothing, no data); the rest act now. -1 fails
	 * the queue (nvq_fail(), nvq_fatal() say why). */
	int (*header)(struct nvq *q, const struct pdu_info *pi, const uint8_t *hdr,
		      struct nvq_sink *sink);
	/* The data of the last header is in its sink; digest_ok: its data digest
	 * matched (1 without one). -1 fails the queue. */
	int (*data)(struct nvq *q, const struct pdu_info *pi, const uint8_t *hdr, int digest_ok);
};

enum nvq_rx_state { RX_CH, RX_HDR, RX_PAD, RX_DATA, RX_DDGST };

/* A PDU waiting to leave: header bytes, then data from the owner's buffers
 * (which stay valid until it left), then the data digest. */
struct nvq_txe {
	uint8_t hdr[PDU_HDR_MAX];
	uint32_t hdr_len;
	const struct iovec *data;
	int data_cnt;
	size_t data_len;
	uint8_t ddgst[PDU_DIGEST_LEN];
	uint8_t has_ddgst;
	uint8_t summed;        /* the owner put the data digest in ddgst already */
	uint8_t sum_at_send;   /* the data digest is summed as the data leaves, in crc */
	uint32_t crc;
	/* Called once it left (or the queue went): its data may go then. */
	void (*sent)(struct nvq *q, void *arg);
	void *arg;
};

struct nvq_stats {
	uint64_t pdus_in, pdus_out;
	uint64_t bytes_placed, bytes_staged;
	uint64_t hdgst_errors, ddgst_errors;
};

struct nvq {
	int fd;
	const struct nvq_ops *ops;
	void *owner;
	struct pdu_rx rx;      /* what we accept, as we told the peer */
	struct pdu_frame tx;   /* what the peer asked us to send */
	int failed;
	char err[160];
	/* receive */
	uint8_t *stage;
	size_t stage_off, stage_len;
	int exact;             /* read headers exactly (placement copies from a ring) */
	int fused;             /* sum the data digest as the data lands (else after) */
	int ring;              /* the placement itself sums (USMC_DDP_CAP_CRC) */
	enum nvq_rx_state st;
	uint8_t hdr[PDU_HDR_MAX];
	uint32_t have, need;
	struct pdu_info pi;
	struct nvq_sink sink;
	uint32_t done, crc;
	uint8_t dgst[PDU_DIGEST_LEN];
	struct usmc_ddp *ddp;
	/* transmit */
	int tx_fused;          /* data digests summed as the data is copied into a ring */
	struct nvq_txe *txq;
	unsigned txq_cap, tx_head, tx_count;
	size_t tx_sent;        /* bytes of the head entry already written */
	struct nvq_stats stats;
};

int nvq_init(struct nvq *q, int fd, enum pdu_role role, const struct nvq_ops *ops, void *owner);
/* Frees what nvq_init() and nvq_place() took, calling the sent callbacks of the
 * entries that never left; the socket is the owner's. */
void nvq_destroy(struct nvq *q);
/* After the initialisation exchange: digests and alignment both ways. */
void nvq_connected(struct nvq *q, const struct pdu_frame *rx, const struct pdu_frame *tx);
/* Offers placement on the socket (max_tags tags): afterwards sinks with a tag
 * are placed. fused: the data digest is summed as the data lands. Returns
 * whether placement is on. */
int nvq_place(struct nvq *q, unsigned max_tags, int fused);

/* Where the socket copies what is sent into a ring, data digests are summed in
 * that same copy (usmc_ddp_send()) rather than before: returns whether. */
int nvq_sum_on_send(struct nvq *q);

/* Receives as much as the socket has: 1 if it took something, 0 if there was
 * nothing (EAGAIN), -1 when the queue failed (q->err). */
int nvq_rx(struct nvq *q);

/* The next free transmit entry, to fill and nvq_tx_push(); NULL without memory.
 * Its sent callback is cleared. */
struct nvq_txe *nvq_tx_entry(struct nvq *q);
/* Queues e (from nvq_tx_entry()) with data (cnt buffers, len bytes), summing its
 * data digest when the framing asks for one and the owner did not (summed). */
void nvq_tx_push(struct nvq *q, struct nvq_txe *e, const struct iovec *data, int cnt, size_t len);
/* Writes what the socket takes: 0 when all left, 1 when some is left, -1 on
 * error (q->err). */
int nvq_tx_flush(struct nvq *q);
static inline int nvq_tx_pending(const struct nvq *q)
{
	return q->tx_count != 0;
}

/* Waits until the socket can be read (or written, with out) for at most
 * timeout_ms (-1: forever): >0 ready, 0 timed out, -1 error. */
int nvq_wait(struct nvq *q, int out, int timeout_ms);

/* Marks the queue failed, with why; returns -1. */
int nvq_fail(struct nvq *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A fatal transport error of the peer's: queues a termination request quoting
 * the header at fault, tries to send it, and fails the queue. */
int nvq_fatal(struct nvq *q, const struct pdu_fault *f);

#endif
