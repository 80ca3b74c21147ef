/* An NVMe/TCP host: a controller reached over TCP, its admin queue and I/O
 * queues. Admin commands are synchronous and may come from any thread; an I/O
 * queue belongs to one thread at a time, which submits commands and runs the
 * queue (nvme_ioq_poll()) to send them and complete them, as with SPDK's qpairs.
 *
 * Reads of io_threshold bytes and more have their buffers registered for
 * direct data placement (include/usmc/ddp.h) under their command id before the
 * command leaves, and their C2HData payload goes straight into them (queue.h);
 * smaller ones are copied through the queue's staging buffer. A queue that
 * fails (the connection breaks, a digest does not match, the controller
 * breaks the protocol, a command times out) completes what it had in flight
 * with a transport error and connects again. */
#ifndef USMC_NVME_HOST_H
#define USMC_NVME_HOST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "spec.h"

struct nvme_host_opts {
	const char *traddr, *trsvcid;
	const char *subnqn;         /* NULL: the discovery controller */
	const char *hostnqn;        /* NULL: one made from the host id */
	unsigned nr_io_queues;
	unsigned queue_size;        /* entries of each I/O queue */
	int hdgst, ddgst;           /* ask for header and data digests */
	uint8_t hpda;               /* our data alignment, 0's based dwords */
	unsigned kato_ms;           /* 0: no keep-alive */
	int sqflow;                 /* keep SQ flow control (else a read's last
				     * data PDU may complete it) */
	int ddp;                    /* place large reads directly, digests fused */
	size_t io_threshold;        /* the least a read is placed for */
	unsigned io_timeout_ms;
	int verbose;
};

void nvme_host_opts_init(struct nvme_host_opts *o);

struct nvme_host;
struct nvme_ioq;

/* A completion: status (NVME_SC_*, with DNR), the entry when one came. */
typedef void nvme_cb(void *arg, uint16_t status, const struct nvme_cqe *cqe);

struct nvme_host *nvme_host_connect(const struct nvme_host_opts *o, char *err, size_t errlen);
void nvme_host_disconnect(struct nvme_host *h);

/* What identify and the connection told. */
struct nvme_host_info {
	uint16_t cntlid;
	uint32_t max_xfer;          /* bytes, from MDTS (0: no limit given) */
	uint32_t incapsule;         /* in-capsule data the I/O queues take */
	unsigned nr_io_queues;      /* connected */
	unsigned queue_size;
	int hdgst, ddgst;
	uint8_t cpda;
	uint32_t maxh2cdata;
	const uint8_t *id_ctrl;     /* NVME_IDENTIFY_SIZE bytes */
};
const struct nvme_host_info *nvme_host_info(const struct nvme_host *h);

/* An admin command with len bytes of data to (write) or from buf: its status,
 * or -1 when the admin queue failed (errno). cqe may be NULL. */
int nvme_admin(struct nvme_host *h, struct nvme_sqe *sqe, void *buf, uint32_t len, int write,
	       struct nvme_cqe *cqe);
int nvme_identify(struct nvme_host *h, uint8_t cns, uint32_t nsid, void *buf);
/* The namespace's size in blocks and log2 of its block size. */
int nvme_ns_geometry(struct nvme_host *h, uint32_t nsid, uint64_t *blocks, unsigned *lba_shift);
int nvme_get_log(struct nvme_host *h, uint8_t lid, uint64_t off, void *buf, uint32_t len);
/* A discovery controller's log page, whole and consistent (read again if its
 * generation moved meanwhile): *log (malloc'd: the header, then *numrec
 * entries of NVMF_DISC_ENTRY_SIZE bytes). 0, a status, or -1. */
int nvme_discovery_log(struct nvme_host *h, uint8_t **log, uint64_t *numrec);

struct nvme_ioq *nvme_host_ioq(struct nvme_host *h, unsigned i);

/* Submits an I/O command whose data (len bytes, the buffers of iov) goes to the
 * controller (write) or comes from it. 0; -1 with errno EAGAIN when the queue
 * is full, EIO when it is down, EINVAL for data it cannot describe. */
int nvme_submit(struct nvme_ioq *q, const struct nvme_sqe *sqe, const struct iovec *iov, int iovcnt,
		uint32_t len, int write, nvme_cb *cb, void *arg);
/* Fills an I/O command's entry. */
void nvme_rw_sqe(struct nvme_sqe *sqe, uint8_t opc, uint32_t nsid, uint64_t slba, uint32_t nlb);
/* Runs the queue for at most timeout_ms (0: what is there, -1: until something
 * completes): completions made, or -1 when the queue is down for good. */
int nvme_ioq_poll(struct nvme_ioq *q, int timeout_ms);
unsigned nvme_ioq_inflight(const struct nvme_ioq *q);

struct nvme_ioq_stats {
	uint64_t completed, errors, reconnects;
	uint64_t ddgst_errors, hdgst_errors;
	uint64_t placed, staged;          /* payload bytes placed directly / copied */
	int placement;                    /* queue placement on: 2 from a ring, 1 readv */
};
void nvme_ioq_stats(const struct nvme_ioq *q, struct nvme_ioq_stats *s);

#endif
