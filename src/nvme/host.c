/* The host: queues, their connection (ICReq, Fabrics Connect), commands and
 * their PDU flow (capsule, R2T and H2CData for writes, C2HData placed or staged
 * for reads, the response), failure and reconnection, the controller's
 * bring-up and keep-alive. */
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../include/usmc/ddp.h"

#include "../util/iov.h"
#include "queue.h"

#define ADMIN_DEPTH 32
#define ADMIN_INCAPSULE 8192u /* NVMe/TCP's admin queue takes 8 KiB in capsule */
/* The most data one C2HData PDU may bring: more than any command reads. */
#define HOST_MAX_DATA (64u << 20)
#define CONNECT_TIMEOUT_MS 10000
#define RECONNECT_TRIES 3

struct hreq {
	int busy;
	int pending;             /* submitted while the queue was connecting again */
	int write, incapsule, placed;
	struct nvme_sqe sqe;
	struct iovec iov[NVQ_IOV_MAX];
	int iovcnt;
	uint32_t len;
	uint32_t rcvd;           /* read: bytes of C2HData in */
	uint32_t sent;           /* write: bytes an R2T asked for and we queued */
	unsigned queued;         /* its PDUs with data still in the transmit queue */
	struct iovec *win;       /* the H2CData PDUs' windows into iov */
	unsigned win_cap;
	nvme_cb *cb;
	void *arg;
	uint64_t deadline;
};

struct nvme_ioq {
	struct nvme_host *h;
	struct nvq q;
	int open;                /* the connection is up (q is set up) */
	int ready;               /* ...and Connect succeeded: commands may leave */
	int reconnecting;        /* commands submitted now wait for the new connection */
	uint16_t qid;
	unsigned depth;          /* command ids 0..depth-1, and depth for Connect */
	struct hreq *reqs;
	uint16_t *free;
	unsigned nfree;
	int ic_done;
	unsigned completed_now;
	struct nvme_ioq_stats st;
};

struct nvme_host {
	struct nvme_host_opts o;
	char traddr[256], trsvcid[32];
	char subnqn[NVMF_NQN_SIZE], hostnqn[NVMF_NQN_SIZE];
	uint8_t hostid[16];
	struct nvme_host_info info;
	uint8_t id_ctrl[NVME_IDENTIFY_SIZE];
	struct nvme_ioq admin;
	pthread_mutex_t admin_lock;
	struct nvme_ioq *ioqs;
	unsigned nioqs;
	pthread_t ka;
	int ka_running;
	pthread_mutex_t ka_lock;
	pthread_cond_t ka_cond;
	int ka_stop;
};

void nvme_host_opts_init(struct nvme_host_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->nr_io_queues = 1;
	o->queue_size = 128;
	o->kato_ms = 10000;
	o->ddp = 1;
	o->io_threshold = 16384;
	o->io_timeout_ms = 30000;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void say(const struct nvme_ioq *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const struct nvme_ioq *q, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "usmc nvme: %s:%s queue %u: %s\n", q->h->traddr, q->h->trsvcid, q->qid, msg);
}

/* ------------------------------------------------------------ requests */

static struct hreq *req_of(struct nvme_ioq *q, uint16_t cid)
{
	return cid <= q->depth && q->reqs[cid].busy && !q->reqs[cid].pending ? &q->reqs[cid] : NULL;
}

static void complete(struct nvme_ioq *q, struct hreq *r, uint16_t status, const struct nvme_cqe *cqe)
{
	nvme_cb *cb = r->cb;
	void *arg = r->arg;
	uint16_t cid = (uint16_t)(r - q->reqs);

	if (r->placed && q->q.ddp)
		usmc_ddp_teardown(q->q.ddp, cid);
	r->busy = r->pending = r->placed = 0;
	if (cid < q->depth)
		q->free[q->nfree++] = cid;
	q->completed_now++;
	q->st.completed++;
	q->st.errors += status != NVME_SC_SUCCESS;
	if (cb)
		cb(arg, status, cqe);
}

/* Every command in flight fails (and, with pending, those waiting for a new
 * connection): the queue is going. Those their callbacks submit meanwhile are
 * not among them. */
static void fail_all(struct nvme_ioq *q, uint16_t status, int pending)
{
	uint8_t *doomed = calloc(q->depth + 1, 1);

	for (unsigned i = 0; i <= q->depth; i++)
		if (q->reqs[i].busy && (pending || !q->reqs[i].pending)) {
			if (doomed)
				doomed[i] = 1;
			else
				complete(q, &q->reqs[i], status, NULL);
		}
	for (unsigned i = 0; doomed && i <= q->depth; i++)
		if (doomed[i])
			complete(q, &q->reqs[i], status, NULL);
	free(doomed);
}

/* A PDU carrying a command's data left (or the queue went): the data is the
 * caller's, who may reuse it once the command completes. */
static void data_left(struct nvq *nq, void *arg)
{
	(void)nq;
	((struct hreq *)arg)->queued--;
}

static void push_data(struct nvme_ioq *q, struct nvq_txe *e, struct hreq *r, const struct iovec *w,
		      int cnt, uint32_t n)
{
	if (n) {
		r->queued++;
		e->sent = data_left;
		e->arg = r;
	}
	nvq_tx_push(&q->q, e, w, cnt, n);
}

static struct nvq_txe *entry(struct nvme_ioq *q)
{
	struct nvq_txe *e = nvq_tx_entry(&q->q);

	if (!e)
		nvq_fail(&q->q, "out of memory");
	return e;
}

/* H2CData for [off, off + len) of the write, in PDUs of MAXH2CDATA at most,
 * the last one of the R2T flagged. */
static int send_h2c(struct nvme_ioq *q, struct hreq *r, uint16_t ttag, uint32_t off, uint32_t len)
{
	uint32_t max = q->h->info.maxh2cdata;
	unsigned pdus = (len + max - 1) / max, need = pdus * NVQ_IOV_MAX;

	if (need > r->win_cap) {
		struct iovec *w = realloc(r->win, need * sizeof(*w));

		if (!w)
			return nvq_fail(&q->q, "out of memory");
		r->win = w;
		r->win_cap = need;
	}
	for (unsigned i = 0; i < pdus; i++) {
		uint32_t n = len - i * max < max ? len - i * max : max;
		struct iovec *w = r->win + i * NVQ_IOV_MAX;
		int cnt = iov_window(r->iov, r->iovcnt, off + i * max, n, w);
		struct nvq_txe *e = entry(q);

		if (!e)
			return -1;
		e->hdr_len = (uint32_t)pdu_data(e->hdr, &q->q.tx, PDU_H2C_DATA,
						i + 1 == pdus ? PDU_F_LAST : 0, get_le16(r->sqe.b + SQE_CID),
						ttag, off + i * max, n);
		push_data(q, e, r, w, cnt, n);
	}
	r->sent = off + len;
	return 0;
}

/* Sends a prepared command: a large read's buffers are registered first, as
 * its data may come right behind the command. */
static int issue(struct nvme_ioq *q, struct hreq *r)
{
	struct nvq_txe *e = entry(q);
	uint16_t cid = (uint16_t)(r - q->reqs);

	if (!e)
		return -1;
	r->pending = 0;
	r->deadline = now_ms() + (q->qid ? q->h->o.io_timeout_ms : CONNECT_TIMEOUT_MS);
	if (!r->write && r->len >= q->h->o.io_threshold && q->q.ddp)
		r->placed = usmc_ddp_setup(q->q.ddp, cid, r->iov, r->iovcnt) == 0;
	e->hdr_len = (uint32_t)pdu_cmd(e->hdr, &q->q.tx, &r->sqe, r->incapsule ? r->len : 0);
	push_data(q, e, r, r->iov, r->incapsule ? r->iovcnt : 0, r->incapsule ? r->len : 0);
	return 0;
}

static struct hreq *prepare(struct nvme_ioq *q, uint16_t cid, const struct nvme_sqe *sqe,
			    const struct iovec *iov, int iovcnt, uint32_t len, int write, nvme_cb *cb,
			    void *arg)
{
	struct hreq *r = &q->reqs[cid];
	uint32_t inl = q->qid ? q->h->info.incapsule : ADMIN_INCAPSULE;

	r->busy = 1;
	r->sqe = *sqe;
	r->write = write;
	r->len = len;
	r->rcvd = r->sent = 0;
	r->queued = 0;
	r->iovcnt = iov_window(iov, iovcnt, 0, len, r->iov);
	r->cb = cb;
	r->arg = arg;
	r->incapsule = write && len && len <= inl;
	r->placed = 0;
	put_le16(r->sqe.b + SQE_CID, cid);
	r->sqe.b[SQE_FLAGS] = (uint8_t)((r->sqe.b[SQE_FLAGS] & 0x3f) | NVME_PSDT_SGL);
	memset(r->sqe.b + SQE_SGL, 0, 16);
	put_le32(r->sqe.b + SQE_SGL_LEN, len);
	r->sqe.b[SQE_SGL_TYPE] = r->incapsule ? NVME_SGL_DATA_OFFSET : NVME_SGL_TRANSPORT;
	return r;
}

int nvme_submit(struct nvme_ioq *q, const struct nvme_sqe *sqe, const struct iovec *iov, int iovcnt,
		uint32_t len, int write, nvme_cb *cb, void *arg)
{
	struct hreq *r;

	if (!q->ready && !q->reconnecting) {
		errno = EIO;
		return -1;
	}
	if (iovcnt < 0 || iovcnt > NVQ_IOV_MAX || (len && iov_length(iov, iovcnt) < len)) {
		errno = EINVAL;
		return -1;
	}
	if (!q->nfree) {
		errno = EAGAIN;
		return -1;
	}
	r = prepare(q, q->free[--q->nfree], sqe, iov, iovcnt, len, write, cb, arg);
	/* A queue that just failed connects again before anything leaves. */
	if (!q->ready || q->q.failed) {
		r->pending = 1;
		return 0;
	}
	if (issue(q, r) < 0) {
		r->busy = 0;
		q->free[q->nfree++] = (uint16_t)(r - q->reqs);
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

void nvme_rw_sqe(struct nvme_sqe *sqe, uint8_t opc, uint32_t nsid, uint64_t slba, uint32_t nlb)
{
	memset(sqe, 0, sizeof(*sqe));
	sqe->b[SQE_OPC] = opc;
	put_le32(sqe->b + SQE_NSID, nsid);
	put_le32(sqe->b + SQE_CDW10, (uint32_t)slba);
	put_le32(sqe->b + SQE_CDW11, (uint32_t)(slba >> 32));
	put_le32(sqe->b + SQE_CDW12, nlb - 1);
}

/* ------------------------------------------------------------ PDUs */

static int fatal(struct nvme_ioq *q, uint16_t fes, uint32_t fei, const char *why)
{
	struct pdu_fault f = {fes, fei, why};

	return nvq_fatal(&q->q, &f);
}

static int on_icresp(struct nvme_ioq *q, const uint8_t *hdr)
{
	const struct nvme_host_opts *o = &q->h->o;
	uint8_t dgst = hdr[IC_DGST], cpda = hdr[IC_PDA];
	uint32_t maxdata = get_le32(hdr + IC_MAXDATA);
	struct pdu_frame rx = {0}, tx = {0};

	if (get_le16(hdr + IC_PFV) != NVME_TCP_PFV_1_0)
		return fatal(q, FES_UNSUPPORTED, IC_PFV, "controller speaks another PDU format");
	if (cpda > 31)
		return fatal(q, FES_INVALID_HEADER, IC_PDA, "controller data alignment out of range");
	if ((dgst & 3) != ((o->hdgst ? PDU_DGST_HEADER : 0) | (o->ddgst ? PDU_DGST_DATA : 0)))
		return fatal(q, FES_INVALID_HEADER, IC_DGST, "controller answered other digests");
	if (maxdata < NVME_TCP_MIN_MAXH2CDATA || maxdata % 4)
		return fatal(q, FES_INVALID_HEADER, IC_MAXDATA, "MAXH2CDATA out of range");
	rx.hdgst = tx.hdgst = (uint8_t)o->hdgst;
	rx.ddgst = tx.ddgst = (uint8_t)o->ddgst;
	rx.pda = o->hpda;
	tx.pda = cpda;
	nvq_connected(&q->q, &rx, &tx);
	nvq_sum_on_send(&q->q);
	q->h->info.maxh2cdata = maxdata;
	q->h->info.cpda = cpda;
	q->ic_done = 1;
	return 0;
}

static int on_c2h(struct nvme_ioq *q, const struct pdu_info *pi, const uint8_t *hdr,
		  struct nvq_sink *sink)
{
	uint16_t cid = get_le16(hdr + DATA_CID);
	uint32_t off = get_le32(hdr + DATA_OFFSET);
	struct hreq *r = req_of(q, cid);

	if (!r || r->write)
		return fatal(q, FES_INVALID_HEADER, DATA_CID, "C2HData for no read in flight");
	if (off != r->rcvd || pi->data_len > r->len - off)
		return fatal(q, FES_OUT_OF_RANGE, DATA_OFFSET, "C2HData outside its read");
	if ((pi->flags & PDU_F_SUCCESS) && (q->h->o.sqflow || off + pi->data_len != r->len))
		return fatal(q, FES_INVALID_HEADER, CH_FLAGS, "success flag where it may not be");
	sink->iovcnt = iov_window(r->iov, r->iovcnt, off, pi->data_len, sink->iov);
	if (r->placed) {
		sink->tag = cid;
		sink->tag_off = off;
	} else if (q->q.ddp && r->len >= q->h->o.io_threshold) {
		/* Its buffers could not be registered: the payload is staged. */
		usmc_ddp_drop(q->q.ddp);
	}
	return 0;
}

static int on_resp(struct nvme_ioq *q, const uint8_t *hdr)
{
	const struct nvme_cqe *cqe = (const struct nvme_cqe *)(hdr + PDU_CH_LEN);
	struct hreq *r = req_of(q, get_le16(cqe->b + CQE_CID));
	uint16_t status;

	if (!r)
		return fatal(q, FES_INVALID_HEADER, PDU_CH_LEN + CQE_CID, "response for no command");
	/* Its data has not even left: the controller cannot have taken it, and
	 * the caller would reuse buffers still to be sent. */
	if (r->queued)
		return fatal(q, FES_SEQUENCE, PDU_CH_LEN + CQE_CID, "response before the command's data left");
	status = nvme_status(cqe);
	if (status == NVME_SC_SUCCESS && !r->write && r->rcvd != r->len)
		status = NVME_SC_DATA_XFER_ERROR;
	complete(q, r, status, cqe);
	return 0;
}

static int on_r2t(struct nvme_ioq *q, const uint8_t *hdr)
{
	struct hreq *r = req_of(q, get_le16(hdr + DATA_CID));
	uint32_t off = get_le32(hdr + DATA_OFFSET), len = get_le32(hdr + DATA_LENGTH);

	if (!r || !r->write || r->incapsule)
		return fatal(q, FES_INVALID_HEADER, DATA_CID, "R2T for no write waiting for one");
	if (off != r->sent || !len || len > r->len - off)
		return fatal(q, FES_OUT_OF_RANGE, DATA_OFFSET, "R2T outside its write");
	return send_h2c(q, r, get_le16(hdr + DATA_TTAG), off, len);
}

static int on_header(struct nvq *nq, const struct pdu_info *pi, const uint8_t *hdr,
		     struct nvq_sink *sink)
{
	struct nvme_ioq *q = nq->owner;

	switch (pi->type) {
	case PDU_ICRESP:
		return on_icresp(q, hdr);
	case PDU_C2H_DATA:
		return on_c2h(q, pi, hdr, sink);
	case PDU_RESP:
		return on_resp(q, hdr);
	case PDU_R2T:
		return on_r2t(q, hdr);
	case PDU_C2H_TERM:
		return 0; /* its quoted header is dropped; data() ends the queue */
	}
	return nvq_fail(nq, "unexpected %s", pdu_type_name(pi->type));
}

static int on_data(struct nvq *nq, const struct pdu_info *pi, const uint8_t *hdr, int digest_ok)
{
	struct nvme_ioq *q = nq->owner;
	struct hreq *r;

	if (pi->type == PDU_C2H_TERM)
		return nvq_fail(nq, "the controller ended the connection: fatal error status %u, field %u",
				get_le16(hdr + TERM_FES), get_le32(hdr + TERM_FEI));
	r = req_of(q, get_le16(hdr + DATA_CID));
	if (!digest_ok) {
		/* The data is not what was sent: the read fails, never returning
		 * it, and the queue starts over, as the transport binding has it. */
		q->st.ddgst_errors++;
		nvq_fail(nq, "data digest mismatch on C2HData");
		complete(q, r, NVME_SC_TRANSIENT_TR_ERR, NULL);
		return -1;
	}
	r->rcvd += pi->data_len;
	if (pi->flags & PDU_F_SUCCESS)
		complete(q, r, NVME_SC_SUCCESS, NULL);
	return 0;
}

static const struct nvq_ops host_ops = {on_header, on_data};

/* ------------------------------------------------------------ running a queue */

static int timed_out(struct nvme_ioq *q)
{
	uint64_t now = now_ms();

	for (unsigned i = 0; i <= q->depth; i++)
		if (q->reqs[i].busy && !q->reqs[i].pending && q->reqs[i].deadline < now)
			return nvq_fail(&q->q, "command %u timed out", i) < 0;
	return 0;
}

/* Sends and receives until something completes, the queue fails, or
 * timeout_ms passes: completions, or -1 (failed). */
static int run(struct nvme_ioq *q, int timeout_ms)
{
	uint64_t end = timeout_ms > 0 ? now_ms() + (uint64_t)timeout_ms : 0;

	q->completed_now = 0;
	for (;;) {
		int r = nvq_rx(&q->q), f = r < 0 ? -1 : nvq_tx_flush(&q->q);
		struct pollfd p = {q->q.fd, POLLIN, 0};
		int wait;

		if (r < 0 || f < 0)
			return -1;
		if (q->completed_now || timeout_ms == 0)
			return (int)q->completed_now;
		if (r > 0)
			continue;
		if (timed_out(q))
			return -1;
		wait = timeout_ms < 0 ? 1000 : (int)(end > now_ms() ? end - now_ms() : 0);
		if (timeout_ms > 0 && !wait)
			return 0;
		if (wait > 1000)
			wait = 1000;
		if (f)
			p.events |= POLLOUT;
		if (poll(&p, 1, wait) < 0 && errno != EINTR)
			return nvq_fail(&q->q, "poll: %s", strerror(errno));
	}
}

struct sync_wait {
	int done;
	uint16_t status;
	struct nvme_cqe cqe;
};

static void sync_done(void *arg, uint16_t status, const struct nvme_cqe *cqe)
{
	struct sync_wait *w = arg;

	w->done = 1;
	w->status = status;
	if (cqe)
		w->cqe = *cqe;
}

/* A command run to its end on q: its status, or -1 when the queue failed.
 * Connect has an id of its own (q->depth): the queue's may all be taken by
 * commands waiting for it. */
static int run_sync(struct nvme_ioq *q, const struct nvme_sqe *sqe, void *buf, uint32_t len,
		    int write, struct nvme_cqe *cqe)
{
	struct iovec iov = {buf, len};
	struct sync_wait w = {0};
	int connect = sqe->b[SQE_OPC] == NVME_FABRICS && sqe->b[SQE_FCTYPE] == NVMF_CONNECT;

	if (connect) {
		if (!q->open || issue(q, prepare(q, (uint16_t)q->depth, sqe, &iov, len ? 1 : 0, len, write,
						 sync_done, &w)) < 0)
			return -1;
	} else if (nvme_submit(q, sqe, &iov, len ? 1 : 0, len, write, sync_done, &w) < 0) {
		return -1;
	}
	while (!w.done)
		if (run(q, -1) < 0 && !w.done) {
			/* Only this command: others may be waiting for the queue. */
			for (unsigned i = 0; i <= q->depth; i++)
				if (q->reqs[i].busy && q->reqs[i].arg == &w)
					complete(q, &q->reqs[i], NVME_SC_HOST_PATH_ERROR, NULL);
			errno = EIO;
			return -1;
		}
	if (cqe)
		*cqe = w.cqe;
	return w.status;
}

/* ------------------------------------------------------------ connecting */

static int tcp_connect(struct nvme_host *h, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *ai, *a;
	int fd = -1, rc = getaddrinfo(h->traddr, h->trsvcid, &hints, &ai), one = 1;

	if (rc) {
		snprintf(err, errlen, "%s:%s: %s", h->traddr, h->trsvcid, gai_strerror(rc));
		return -1;
	}
	for (a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
			snprintf(err, errlen, "connect to %s:%s: %s", h->traddr, h->trsvcid,
				 strerror(errno));
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (fd >= 0) {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		int fl = fcntl(fd, F_GETFL);
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	}
	return fd;
}

static void queue_close(struct nvme_ioq *q)
{
	if (!q->q.stage)
		return;
	q->st.hdgst_errors += q->q.stats.hdgst_errors;
	q->st.placed += q->q.stats.bytes_placed;
	q->st.staged += q->q.stats.bytes_staged;
	nvq_destroy(&q->q);
	close(q->q.fd);
	q->open = q->ready = 0;
}

/* The Fabrics Connect of queue q: 0, or -1 with err. */
static int fabrics_connect(struct nvme_ioq *q, char *err, size_t errlen)
{
	struct nvme_host *h = q->h;
	struct nvme_sqe sqe = {0};
	struct nvme_cqe cqe;
	uint8_t data[NVMF_CONNECT_DATA] = {0};
	int st;

	sqe.b[SQE_OPC] = NVME_FABRICS;
	sqe.b[SQE_FCTYPE] = NVMF_CONNECT;
	put_le16(sqe.b + SQE_CONNECT_QID, q->qid);
	put_le16(sqe.b + SQE_CONNECT_SQSIZE, (uint16_t)(q->depth - 1));
	sqe.b[SQE_CONNECT_CATTR] = h->o.sqflow ? 0 : NVMF_CATTR_DISABLE_SQFLOW;
	put_le32(sqe.b + SQE_CONNECT_KATO, q->qid ? 0 : h->o.kato_ms);
	memcpy(data + CONNECT_HOSTID, h->hostid, 16);
	put_le16(data + CONNECT_CNTLID, q->qid ? h->info.cntlid : NVMF_CNTLID_DYNAMIC);
	memcpy(data + CONNECT_SUBNQN, h->subnqn, NVMF_NQN_SIZE);
	memcpy(data + CONNECT_HOSTNQN, h->hostnqn, NVMF_NQN_SIZE);
	st = run_sync(q, &sqe, data, sizeof(data), 1, &cqe);
	if (st < 0) {
		snprintf(err, errlen, "queue %u: Connect: %s", q->qid, q->q.err);
		return -1;
	}
	if (st) {
		snprintf(err, errlen, "queue %u: Connect refused: %s (result %#x)", q->qid,
			 nvme_status_str((uint16_t)st), get_le32(cqe.b + CQE_RESULT));
		return -1;
	}
	if (!q->qid)
		h->info.cntlid = get_le16(cqe.b + CQE_RESULT);
	return 0;
}

/* Opens queue q: TCP, the initialisation exchange, placement, Connect. */
static int queue_open(struct nvme_ioq *q, char *err, size_t errlen)
{
	struct nvme_host *h = q->h;
	uint8_t dgst = (uint8_t)((h->o.hdgst ? PDU_DGST_HEADER : 0) | (h->o.ddgst ? PDU_DGST_DATA : 0));
	uint64_t end = now_ms() + CONNECT_TIMEOUT_MS;
	struct nvq_txe *e;
	int fd = tcp_connect(h, err, errlen);

	if (fd < 0)
		return -1;
	if (nvq_init(&q->q, fd, PDU_HOST, &host_ops, q) < 0) {
		snprintf(err, errlen, "out of memory");
		close(fd);
		return -1;
	}
	q->open = 1;
	q->ic_done = 0;
	q->q.rx.max_data = HOST_MAX_DATA;
	e = nvq_tx_entry(&q->q);
	if (!e) {
		snprintf(err, errlen, "out of memory");
		queue_close(q);
		return -1;
	}
	e->hdr_len = (uint32_t)pdu_icreq(e->hdr, h->o.hpda, dgst, 0);
	nvq_tx_push(&q->q, e, NULL, 0, 0);
	while (!q->ic_done) {
		int r = nvq_rx(&q->q);

		if (r >= 0 && nvq_tx_flush(&q->q) < 0)
			r = -1;
		if (r < 0 || now_ms() > end) {
			snprintf(err, errlen, "queue %u: connection initialisation: %s", q->qid,
				 r < 0 ? q->q.err : "no answer");
			queue_close(q);
			return -1;
		}
		if (!r && !q->ic_done)
			nvq_wait(&q->q, 0, 100);
	}
	if (q->qid && h->o.ddp)
		nvq_place(&q->q, q->depth + 1, 1);
	else
		q->q.fused = h->o.ddp;
	if (fabrics_connect(q, err, errlen) < 0) {
		queue_close(q);
		return -1;
	}
	q->st.placement = q->q.ddp ? (q->q.ring ? 2 : 1) : 0;
	q->ready = 1;
	for (unsigned i = 0; i < q->depth; i++)
		if (q->reqs[i].busy && q->reqs[i].pending && issue(q, &q->reqs[i]) < 0)
			return -1;
	return 0;
}

static int queue_init(struct nvme_host *h, struct nvme_ioq *q, uint16_t qid, unsigned depth)
{
	memset(q, 0, sizeof(*q));
	q->h = h;
	q->qid = qid;
	q->depth = depth;
	q->reqs = calloc(depth + 1, sizeof(*q->reqs));
	q->free = calloc(depth, sizeof(*q->free));
	if (!q->reqs || !q->free)
		return -1;
	for (unsigned i = 0; i < depth; i++)
		q->free[q->nfree++] = (uint16_t)(depth - 1 - i);
	return 0;
}

static void queue_free(struct nvme_ioq *q)
{
	queue_close(q);
	for (unsigned i = 0; q->reqs && i <= q->depth; i++)
		free(q->reqs[i].win);
	free(q->reqs);
	free(q->free);
}

/* A failed queue: what it had in flight fails, then it connects again; what
 * is submitted meanwhile leaves on the new connection. */
static int queue_reconnect(struct nvme_ioq *q)
{
	char err[256];

	say(q, "%s; connecting again", q->q.err[0] ? q->q.err : "failed");
	queue_close(q);
	q->reconnecting = 1;
	fail_all(q, NVME_SC_HOST_PATH_ERROR, 0);
	for (int i = 0; i < RECONNECT_TRIES; i++) {
		if (queue_open(q, err, sizeof(err)) == 0) {
			q->reconnecting = 0;
			q->st.reconnects++;
			if (q->q.ddp)
				usmc_ddp_resync(q->q.ddp);
			return 0;
		}
		say(q, "%s", err);
		usleep(100000u << i);
	}
	q->reconnecting = 0;
	fail_all(q, NVME_SC_HOST_PATH_ERROR, 1);
	return -1;
}

int nvme_ioq_poll(struct nvme_ioq *q, int timeout_ms)
{
	int n;

	if (!q->ready && (!q->reqs || queue_reconnect(q) < 0))
		return -1;
	n = run(q, timeout_ms);
	if (n >= 0)
		return n;
	n = (int)q->completed_now;
	if (queue_reconnect(q) < 0 && !n)
		return -1;
	return n + (int)q->completed_now;
}

unsigned nvme_ioq_inflight(const struct nvme_ioq *q)
{
	return q->depth - q->nfree;
}

void nvme_ioq_stats(const struct nvme_ioq *q, struct nvme_ioq_stats *s)
{
	*s = q->st;
	if (q->open) {
		s->hdgst_errors += q->q.stats.hdgst_errors;
		s->placed += q->q.stats.bytes_placed;
		s->staged += q->q.stats.bytes_staged;
	}
}

struct nvme_ioq *nvme_host_ioq(struct nvme_host *h, unsigned i)
{
	return i < h->nioqs ? &h->ioqs[i] : NULL;
}

/* ------------------------------------------------------------ the controller */

int nvme_admin(struct nvme_host *h, struct nvme_sqe *sqe, void *buf, uint32_t len, int write,
	       struct nvme_cqe *cqe)
{
	int st;

	pthread_mutex_lock(&h->admin_lock);
	st = h->admin.ready ? run_sync(&h->admin, sqe, buf, len, write, cqe) : -1;
	if (!h->admin.ready)
		errno = EIO;
	pthread_mutex_unlock(&h->admin_lock);
	return st;
}

static int property(struct nvme_host *h, int set, uint32_t off, int wide, uint64_t *v)
{
	struct nvme_sqe sqe = {0};
	struct nvme_cqe cqe;
	int st;

	sqe.b[SQE_OPC] = NVME_FABRICS;
	sqe.b[SQE_FCTYPE] = set ? NVMF_PROP_SET : NVMF_PROP_GET;
	sqe.b[SQE_PROP_ATTRIB] = (uint8_t)wide;
	put_le32(sqe.b + SQE_PROP_OFFSET, off);
	if (set)
		put_le64(sqe.b + SQE_PROP_VALUE, *v);
	st = nvme_admin(h, &sqe, NULL, 0, 0, &cqe);
	if (st == 0 && !set)
		*v = get_le64(cqe.b + CQE_RESULT);
	return st;
}

int nvme_identify(struct nvme_host *h, uint8_t cns, uint32_t nsid, void *buf)
{
	struct nvme_sqe sqe = {0};

	sqe.b[SQE_OPC] = NVME_ADMIN_IDENTIFY;
	put_le32(sqe.b + SQE_NSID, nsid);
	put_le32(sqe.b + SQE_CDW10, cns);
	return nvme_admin(h, &sqe, buf, NVME_IDENTIFY_SIZE, 0, NULL);
}

int nvme_ns_geometry(struct nvme_host *h, uint32_t nsid, uint64_t *blocks, unsigned *lba_shift)
{
	uint8_t id[NVME_IDENTIFY_SIZE];
	int st = nvme_identify(h, NVME_ID_CNS_NS, nsid, id);

	if (st)
		return st;
	*blocks = get_le64(id + IDN_NSZE);
	*lba_shift = id[IDN_LBAF0 + 4 * (id[IDN_FLBAS] & 0xf) + 2];
	return *lba_shift >= 9 && *lba_shift <= 16 ? 0 : NVME_SC_INVALID_FIELD;
}

int nvme_get_log(struct nvme_host *h, uint8_t lid, uint64_t off, void *buf, uint32_t len)
{
	struct nvme_sqe sqe = {0};
	uint32_t numd = len / 4 - 1;

	sqe.b[SQE_OPC] = NVME_ADMIN_GET_LOG_PAGE;
	put_le32(sqe.b + SQE_NSID, 0xffffffffu);
	put_le32(sqe.b + SQE_CDW10, lid | (numd & 0xffff) << 16);
	put_le32(sqe.b + SQE_CDW11, numd >> 16);
	put_le32(sqe.b + SQE_CDW12, (uint32_t)off);
	put_le32(sqe.b + SQE_CDW13, (uint32_t)(off >> 32));
	return nvme_admin(h, &sqe, buf, len, 0, NULL);
}

/* Entries a discovery log may list, here: more would be a controller's lie. */
#define DISC_ENTRIES_MAX 1024

int nvme_discovery_log(struct nvme_host *h, uint8_t **log, uint64_t *numrec)
{
	for (int tries = 0; tries < 3; tries++) {
		uint8_t hdr[NVMF_DISC_ENTRY_SIZE];
		uint64_t n, gen;
		uint8_t *page;
		int st = nvme_get_log(h, NVME_LOG_DISC, 0, hdr, sizeof(hdr));

		if (st)
			return st;
		gen = get_le64(hdr + DISC_GENCTR);
		n = get_le64(hdr + DISC_NUMREC);
		if (n > DISC_ENTRIES_MAX)
			return NVME_SC_INVALID_FIELD;
		page = malloc((n + 1) * NVMF_DISC_ENTRY_SIZE);
		if (!page)
			return -1;
		memcpy(page, hdr, sizeof(hdr));
		st = n ? nvme_get_log(h, NVME_LOG_DISC, NVMF_DISC_ENTRY_SIZE,
				      page + NVMF_DISC_ENTRY_SIZE, (uint32_t)(n * NVMF_DISC_ENTRY_SIZE))
		       : 0;
		if (!st)
			st = nvme_get_log(h, NVME_LOG_DISC, 0, hdr, sizeof(hdr));
		if (st) {
			free(page);
			return st;
		}
		if (get_le64(hdr + DISC_GENCTR) == gen) {
			*log = page;
			*numrec = n;
			return 0;
		}
		free(page);
	}
	return NVME_SC_CMD_SEQ_ERROR;
}

static void *keep_alive(void *arg)
{
	struct nvme_host *h = arg;
	struct timespec ts;

	pthread_mutex_lock(&h->ka_lock);
	while (!h->ka_stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += h->o.kato_ms / 2000;
		ts.tv_nsec += (long)(h->o.kato_ms / 2 % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_cond_timedwait(&h->ka_cond, &h->ka_lock, &ts) != ETIMEDOUT || h->ka_stop)
			continue;
		pthread_mutex_unlock(&h->ka_lock);
		struct nvme_sqe sqe = {{NVME_ADMIN_KEEP_ALIVE}};
		if (nvme_admin(h, &sqe, NULL, 0, 0, NULL) != 0 && h->o.verbose)
			fprintf(stderr, "usmc nvme: keep-alive failed\n");
		pthread_mutex_lock(&h->ka_lock);
	}
	pthread_mutex_unlock(&h->ka_lock);
	return NULL;
}

/* CC.EN, then CSTS.RDY within CAP.TO. */
static int enable(struct nvme_host *h, char *err, size_t errlen)
{
	uint64_t cap, cc = NVME_CC_ENABLE | 6u << 16 | 4u << 20, csts = 0, end;
	int st = property(h, 0, NVME_REG_CAP, 1, &cap);

	if (st) {
		snprintf(err, errlen, "reading CAP: %s", st < 0 ? h->admin.q.err : nvme_status_str((uint16_t)st));
		return -1;
	}
	h->info.queue_size = (unsigned)(cap & 0xffff) + 1;
	end = now_ms() + 500 * (((cap >> 24) & 0xff) + 1);
	st = property(h, 1, NVME_REG_CC, 0, &cc);
	while (!st && !(csts & NVME_CSTS_RDY)) {
		st = property(h, 0, NVME_REG_CSTS, 0, &csts);
		if (!st && !(csts & NVME_CSTS_RDY)) {
			if (now_ms() > end) {
				snprintf(err, errlen, "controller not ready in time");
				return -1;
			}
			usleep(10000);
		}
	}
	if (st) {
		snprintf(err, errlen, "enabling: %s", st < 0 ? h->admin.q.err : nvme_status_str((uint16_t)st));
		return -1;
	}
	return 0;
}

static int set_queues(struct nvme_host *h, unsigned want, unsigned *got)
{
	struct nvme_sqe sqe = {0};
	struct nvme_cqe cqe;
	int st;

	sqe.b[SQE_OPC] = NVME_ADMIN_SET_FEATURES;
	put_le32(sqe.b + SQE_CDW10, NVME_FEAT_NUM_QUEUES);
	put_le32(sqe.b + SQE_CDW11, (want - 1) | (want - 1) << 16);
	st = nvme_admin(h, &sqe, NULL, 0, 0, &cqe);
	if (st == 0) {
		uint32_t r = get_le32(cqe.b + CQE_RESULT);
		unsigned nsq = (r & 0xffff) + 1, ncq = (r >> 16) + 1;

		*got = nsq < ncq ? nsq : ncq;
	}
	return st;
}

static int bring_up(struct nvme_host *h, char *err, size_t errlen)
{
	unsigned granted = 0, depth;
	int st;

	if (queue_init(h, &h->admin, 0, ADMIN_DEPTH) < 0 || queue_open(&h->admin, err, errlen) < 0)
		return -1;
	h->info.hdgst = h->o.hdgst;
	h->info.ddgst = h->o.ddgst;
	if (enable(h, err, errlen) < 0)
		return -1;
	st = nvme_identify(h, NVME_ID_CNS_CTRL, 0, h->id_ctrl);
	if (st) {
		snprintf(err, errlen, "identify controller: %s",
			 st < 0 ? h->admin.q.err : nvme_status_str((uint16_t)st));
		return -1;
	}
	if (h->id_ctrl[IDC_MDTS])
		h->info.max_xfer = 4096u << h->id_ctrl[IDC_MDTS];
	h->info.incapsule = get_le32(h->id_ctrl + IDC_IOCCSZ) * 16;
	h->info.incapsule = h->info.incapsule > NVME_SQE_SIZE ? h->info.incapsule - NVME_SQE_SIZE : 0;
	if (h->o.kato_ms) {
		pthread_mutex_init(&h->ka_lock, NULL);
		pthread_cond_init(&h->ka_cond, NULL);
		h->ka_running = pthread_create(&h->ka, NULL, keep_alive, h) == 0;
	}
	if (!h->o.subnqn || !h->o.nr_io_queues)
		return 0;
	st = set_queues(h, h->o.nr_io_queues, &granted);
	if (st) {
		snprintf(err, errlen, "setting the number of queues: %s",
			 st < 0 ? h->admin.q.err : nvme_status_str((uint16_t)st));
		return -1;
	}
	depth = h->o.queue_size < h->info.queue_size ? h->o.queue_size : h->info.queue_size;
	if (get_le16(h->id_ctrl + IDC_MAXCMD) && depth > get_le16(h->id_ctrl + IDC_MAXCMD))
		depth = get_le16(h->id_ctrl + IDC_MAXCMD);
	h->info.queue_size = depth;
	h->nioqs = h->o.nr_io_queues < granted ? h->o.nr_io_queues : granted;
	h->ioqs = calloc(h->nioqs, sizeof(*h->ioqs));
	if (!h->ioqs)
		return -1;
	for (unsigned i = 0; i < h->nioqs; i++)
		if (queue_init(h, &h->ioqs[i], (uint16_t)(i + 1), depth) < 0 ||
		    queue_open(&h->ioqs[i], err, errlen) < 0) {
			h->nioqs = i + 1;
			return -1;
		}
	h->info.nr_io_queues = h->nioqs;
	return 0;
}

struct nvme_host *nvme_host_connect(const struct nvme_host_opts *o, char *err, size_t errlen)
{
	struct nvme_host *h = calloc(1, sizeof(*h));

	if (!h) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->o = *o;
	if (!h->o.queue_size)
		h->o.queue_size = 128;
	pthread_mutex_init(&h->admin_lock, NULL);
	snprintf(h->traddr, sizeof(h->traddr), "%s", o->traddr ? o->traddr : "127.0.0.1");
	snprintf(h->trsvcid, sizeof(h->trsvcid), "%s", o->trsvcid ? o->trsvcid : "4420");
	snprintf(h->subnqn, sizeof(h->subnqn), "%s", o->subnqn ? o->subnqn : NVME_DISC_SUBSYS_NAME);
	if (getrandom(h->hostid, sizeof(h->hostid), 0) != sizeof(h->hostid))
		memset(h->hostid, 0x11, sizeof(h->hostid));
	h->hostid[6] = (uint8_t)((h->hostid[6] & 0x0f) | 0x40);
	h->hostid[8] = (uint8_t)((h->hostid[8] & 0x3f) | 0x80);
	if (o->hostnqn)
		snprintf(h->hostnqn, sizeof(h->hostnqn), "%s", o->hostnqn);
	else
		snprintf(h->hostnqn, sizeof(h->hostnqn),
			 "nqn.2014-08.org.nvmexpress:uuid:%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
			 "%02x%02x%02x%02x%02x%02x",
			 h->hostid[0], h->hostid[1], h->hostid[2], h->hostid[3], h->hostid[4],
			 h->hostid[5], h->hostid[6], h->hostid[7], h->hostid[8], h->hostid[9],
			 h->hostid[10], h->hostid[11], h->hostid[12], h->hostid[13], h->hostid[14],
			 h->hostid[15]);
	h->info.id_ctrl = h->id_ctrl;
	if (bring_up(h, err, errlen) < 0) {
		nvme_host_disconnect(h);
		return NULL;
	}
	return h;
}

const struct nvme_host_info *nvme_host_info(const struct nvme_host *h)
{
	return &h->info;
}

void nvme_host_disconnect(struct nvme_host *h)
{
	if (h->ka_running) {
		pthread_mutex_lock(&h->ka_lock);
		h->ka_stop = 1;
		pthread_cond_signal(&h->ka_cond);
		pthread_mutex_unlock(&h->ka_lock);
		pthread_join(h->ka, NULL);
	}
	for (unsigned i = 0; i < h->nioqs; i++)
		queue_free(&h->ioqs[i]);
	if (h->admin.ready) {
		/* A normal shutdown, as Linux's host does before it goes. */
		uint64_t cc = NVME_CC_ENABLE | 1u << 14 | 6u << 16 | 4u << 20;

		property(h, 1, NVME_REG_CC, 0, &cc);
	}
	queue_free(&h->admin);
	free(h->ioqs);
	free(h);
}
