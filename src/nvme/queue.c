#include "queue.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../include/usmc/ddp.h"

#include "../util/iov.h"
#include "digest.h"

#define TXQ_INITIAL 64

int nvq_init(struct nvq *q, int fd, enum pdu_role role, const struct nvq_ops *ops, void *owner)
{
	memset(q, 0, sizeof(*q));
	q->fd = fd;
	q->ops = ops;
	q->owner = owner;
	q->rx.role = role;
	q->need = PDU_CH_LEN;
	q->fused = 1;
	q->stage = malloc(NVQ_STAGE_SIZE);
	q->txq = calloc(TXQ_INITIAL, sizeof(*q->txq));
	q->txq_cap = TXQ_INITIAL;
	if (!q->stage || !q->txq) {
		nvq_destroy(q);
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

static void tx_pop(struct nvq *q)
{
	struct nvq_txe *e = &q->txq[q->tx_head];

	q->tx_head = (q->tx_head + 1) % q->txq_cap;
	q->tx_count--;
	if (e->sent)
		e->sent(q, e->arg);
}

void nvq_destroy(struct nvq *q)
{
	while (q->txq && q->tx_count)
		tx_pop(q);
	if (q->ddp)
		usmc_ddp_sk_del(q->ddp);
	free(q->stage);
	free(q->txq);
	q->ddp = NULL;
	q->stage = NULL;
	q->txq = NULL;
}

void nvq_connected(struct nvq *q, const struct pdu_frame *rx, const struct pdu_frame *tx)
{
	q->rx.f = *rx;
	q->rx.connected = 1;
	q->tx = *tx;
}

int nvq_place(struct nvq *q, unsigned max_tags, int fused)
{
	struct usmc_ddp_config cfg = {USMC_DDP_NVME_TCP, max_tags};
	unsigned caps = usmc_ddp_caps(q->fd);

	q->fused = fused;
	if (!(caps & USMC_DDP_CAP_PLACE))
		return 0;
	q->ddp = usmc_ddp_sk_add(q->fd, &cfg);
	if (!q->ddp)
		return 0;
	q->ring = (caps & USMC_DDP_CAP_CRC) != 0;
	q->exact = (caps & USMC_DDP_CAP_RING) != 0;
	return 1;
}

int nvq_sum_on_send(struct nvq *q)
{
	q->tx_fused = (usmc_ddp_caps(q->fd) & USMC_DDP_CAP_CRC) != 0;
	return q->tx_fused;
}

int nvq_fail(struct nvq *q, const char *fmt, ...)
{
	va_list ap;

	if (!q->failed) {
		va_start(ap, fmt);
		vsnprintf(q->err, sizeof(q->err), fmt, ap);
		va_end(ap);
		q->failed = 1;
	}
	return -1;
}

int nvq_fatal(struct nvq *q, const struct pdu_fault *f)
{
	struct nvq_txe *e = nvq_tx_entry(q);
	enum pdu_type t = q->rx.role == PDU_CTRL ? PDU_C2H_TERM : PDU_H2C_TERM;

	if (f->fes == FES_HDGST)
		q->stats.hdgst_errors++;
	if (e) {
		e->hdr_len = (uint32_t)pdu_term(e->hdr, t, f->fes, f->fei, q->hdr, q->have);
		nvq_tx_push(q, e, NULL, 0, 0);
		/* The peer gets what the socket takes now; it will see the close. */
		while (nvq_tx_flush(q) > 0 && nvq_wait(q, 1, 100) > 0)
			;
	}
	return nvq_fail(q, "%s (fatal error status %u, field %u)", f->why, f->fes, f->fei);
}

/* ------------------------------------------------------------ receive */

/* What a read that took nothing means: 0 for nothing there yet, else -1 with
 * the queue failed. */
static int nothing_read(struct nvq *q, ssize_t r, const char *what)
{
	if (r == 0)
		return nvq_fail(q, "connection closed by the peer");
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return 0;
	return nvq_fail(q, "%s: %s", what, strerror(errno));
}

/* Reads into the staging buffer, which is empty: all it holds (plain sockets)
 * or exactly want bytes (a ring's placement). 1, 0 (nothing there), -1. */
static int fill(struct nvq *q, size_t want)
{
	size_t n = q->exact && want < NVQ_STAGE_SIZE ? want : NVQ_STAGE_SIZE;
	ssize_t r = recv(q->fd, q->stage, n, MSG_DONTWAIT);

	if (r <= 0)
		return nothing_read(q, r, "receive");
	q->stage_off = 0;
	q->stage_len = (size_t)r;
	return 1;
}

/* Takes up to n staged bytes into dst (NULL: drops them); returns how many. */
static size_t take(struct nvq *q, void *dst, size_t n)
{
	if (n > q->stage_len)
		n = q->stage_len;
	if (dst)
		memcpy(dst, q->stage + q->stage_off, n);
	q->stage_off += n;
	q->stage_len -= n;
	return n;
}

/* Copies n staged bytes into the sink at q->done, summing them on the way when
 * the digest is fused. */
static void stage_to_sink(struct nvq *q, size_t n)
{
	struct iovec win[NVQ_IOV_MAX];
	const uint8_t *src = q->stage + q->stage_off;
	int cnt = iov_window(q->sink.iov, q->sink.iovcnt, q->done, n, win);

	for (int i = 0; i < cnt; i++) {
		if (q->pi.ddgst && q->fused)
			q->crc = crc32c_copy(q->crc, win[i].iov_base, src, win[i].iov_len);
		else
			memcpy(win[i].iov_base, src, win[i].iov_len);
		src += win[i].iov_len;
	}
	q->stage_off += n;
	q->stage_len -= n;
	q->done += (uint32_t)n;
	q->stats.bytes_staged += n;
}

/* Sums the n bytes of the sink from at. */
static uint32_t sum_sink(const struct nvq *q, uint32_t crc, size_t at, size_t n)
{
	struct iovec win[NVQ_IOV_MAX];
	int cnt = iov_window(q->sink.iov, q->sink.iovcnt, at, n, win);

	for (int i = 0; i < cnt; i++)
		crc = digest_sum(crc, win[i].iov_base, win[i].iov_len);
	return crc;
}

/* The placed part of the data: straight from the socket into the tag's
 * buffers. 1, 0, -1 as fill(). */
static int place(struct nvq *q)
{
	size_t want = q->pi.data_len - q->done, got = 0;
	int sum = q->pi.ddgst && q->fused;
	uint32_t *crc = sum && q->ring ? &q->crc : NULL;
	ssize_t r = usmc_ddp_recv(q->ddp, (unsigned)q->sink.tag, q->sink.tag_off + q->done, want, crc,
				  q->exact ? NULL : q->stage, NVQ_AHEAD, &got, MSG_DONTWAIT);

	if (r <= 0)
		return nothing_read(q, r, "placement");
	if (sum && !q->ring)
		q->crc = sum_sink(q, q->crc, q->done, (size_t)r);
	q->done += (uint32_t)r;
	q->stats.bytes_placed += (uint64_t)r;
	q->stage_off = 0;
	q->stage_len = got;
	return 1;
}

static void next_pdu(struct nvq *q)
{
	q->st = RX_CH;
	q->have = 0;
	q->need = PDU_CH_LEN;
	q->stats.pdus_in++;
}

static int header_done(struct nvq *q)
{
	struct pdu_fault f;

	if (pdu_parse(&q->rx, q->hdr, &q->pi, &f) < 0)
		return nvq_fatal(q, &f);
	memset(&q->sink, 0, sizeof(q->sink));
	q->sink.tag = -1;
	if (q->ops->header(q, &q->pi, q->hdr, &q->sink) < 0)
		return -1;
	if (q->pi.data_len && q->sink.iovcnt &&
	    iov_length(q->sink.iov, q->sink.iovcnt) != q->pi.data_len)
		return nvq_fail(q, "%s data does not fit where it goes", pdu_type_name(q->pi.type));
	q->done = 0;
	q->crc = CRC32C_INIT;
	if (q->pi.pad) {
		q->st = RX_PAD;
	} else if (q->pi.data_len) {
		q->st = RX_DATA;
	} else {
		next_pdu(q);
	}
	return 1;
}

static int data_done(struct nvq *q)
{
	int ok = 1;

	if (q->pi.ddgst) {
		if (!q->fused)
			q->crc = sum_sink(q, q->crc, 0, q->pi.data_len);
		ok = get_le32(q->dgst) == crc32c_final(q->crc);
		q->stats.ddgst_errors += !ok;
	}
	if (q->ops->data(q, &q->pi, q->hdr, ok) < 0)
		return -1;
	next_pdu(q);
	return 1;
}

/* One step of the machine: 1 progress, 0 wait for the socket, -1 failed. */
static int rx_step(struct nvq *q)
{
	uint32_t left;

	switch (q->st) {
	case RX_CH:
	case RX_HDR:
		if (!q->stage_len && fill(q, q->need - q->have) <= 0)
			return q->failed ? -1 : 0;
		q->have += (uint32_t)take(q, q->hdr + q->have, q->need - q->have);
		if (q->have < q->need)
			return 1;
		if (q->st == RX_CH) {
			struct pdu_fault f;
			uint32_t hb = pdu_hdr_bytes(&q->rx, q->hdr, &f);

			if (!hb)
				return nvq_fatal(q, &f);
			q->need = hb;
			q->st = RX_HDR;
			return 1;
		}
		return header_done(q);
	case RX_PAD:
		left = q->pi.pad - q->done;
		if (!q->stage_len && fill(q, left) <= 0)
			return q->failed ? -1 : 0;
		q->done += (uint32_t)take(q, NULL, left);
		if (q->done == q->pi.pad) {
			q->done = 0;
			q->st = RX_DATA;
		}
		return 1;
	case RX_DATA:
		left = q->pi.data_len - q->done;
		if (q->stage_len) {
			stage_to_sink(q, left < q->stage_len ? left : q->stage_len);
		} else if (q->sink.tag >= 0 && q->ddp) {
			int r = place(q);

			if (r <= 0)
				return r;
		} else if (fill(q, left) <= 0) {
			return q->failed ? -1 : 0;
		}
		if (q->done < q->pi.data_len)
			return 1;
		q->done = 0;
		if (!q->pi.ddgst)
			return data_done(q);
		q->st = RX_DDGST;
		return 1;
	case RX_DDGST:
		if (!q->stage_len && fill(q, PDU_DIGEST_LEN - q->done) <= 0)
			return q->failed ? -1 : 0;
		q->done += (uint32_t)take(q, q->dgst + q->done, PDU_DIGEST_LEN - q->done);
		if (q->done < PDU_DIGEST_LEN)
			return 1;
		return data_done(q);
	}
	return nvq_fail(q, "receive state lost");
}

int nvq_rx(struct nvq *q)
{
	int any = 0, r;

	if (q->failed)
		return -1;
	while ((r = rx_step(q)) > 0)
		any = 1;
	return r < 0 ? -1 : any;
}

/* ------------------------------------------------------------ transmit */

struct nvq_txe *nvq_tx_entry(struct nvq *q)
{
	if (q->tx_count == q->txq_cap) {
		struct nvq_txe *n = calloc(q->txq_cap * 2, sizeof(*n));

		if (!n)
			return NULL;
		for (unsigned i = 0; i < q->tx_count; i++)
			n[i] = q->txq[(q->tx_head + i) % q->txq_cap];
		free(q->txq);
		q->txq = n;
		q->tx_head = 0;
		q->txq_cap *= 2;
	}
	struct nvq_txe *e = &q->txq[(q->tx_head + q->tx_count) % q->txq_cap];

	e->sent = NULL;
	e->arg = NULL;
	e->summed = 0;
	return e;
}

void nvq_tx_push(struct nvq *q, struct nvq_txe *e, const struct iovec *data, int cnt, size_t len)
{
	e->data = data;
	e->data_cnt = cnt;
	e->data_len = len;
	e->has_ddgst = len && q->tx.ddgst;
	e->sum_at_send = e->has_ddgst && !e->summed && q->tx_fused;
	e->crc = CRC32C_INIT;
	if (e->has_ddgst && !e->summed && !e->sum_at_send) {
		uint32_t crc = CRC32C_INIT;

		for (int i = 0; i < cnt; i++)
			crc = digest_sum(crc, data[i].iov_base, data[i].iov_len);
		put_le32(e->ddgst, crc32c_final(crc));
	}
	q->tx_count++;
	q->stats.pdus_out++;
}

/* Adds the part of b (n bytes) past *skip to the vector; false when it is full. */
static int gather(struct iovec *v, int *cnt, int max, const void *b, size_t n, size_t *skip)
{
	if (*skip >= n) {
		*skip -= n;
		return 1;
	}
	if (*cnt == max)
		return 0;
	v[*cnt].iov_base = (uint8_t *)b + *skip;
	v[*cnt].iov_len = n - *skip;
	(*cnt)++;
	*skip = 0;
	return 1;
}

static size_t txe_len(const struct nvq_txe *e)
{
	return e->hdr_len + e->data_len + (e->has_ddgst ? PDU_DIGEST_LEN : 0);
}

/* The head entry's data when it is summed as it is sent: the placement
 * interface copies it and sums it in one pass; once it all left, its digest is
 * known and goes with what follows. 1 progress, 0 the socket is full, -1. */
static int send_summed(struct nvq *q, struct nvq_txe *e)
{
	struct iovec win[NVQ_IOV_MAX];
	size_t off = q->tx_sent - e->hdr_len;
	int n = iov_window(e->data, e->data_cnt, off, e->data_len - off, win);
	ssize_t w = usmc_ddp_send(q->fd, win, n, &e->crc, MSG_DONTWAIT | MSG_NOSIGNAL);

	if (w < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return 0;
		return nvq_fail(q, "send: %s", strerror(errno));
	}
	q->tx_sent += (size_t)w;
	if (q->tx_sent == e->hdr_len + e->data_len)
		put_le32(e->ddgst, crc32c_final(e->crc));
	return 1;
}

int nvq_tx_flush(struct nvq *q)
{
	struct iovec v[IOV_MAX < 256 ? IOV_MAX : 256];
	const int max = (int)(sizeof(v) / sizeof(v[0]));

	while (q->tx_count) {
		struct nvq_txe *head = &q->txq[q->tx_head];
		int cnt = 0, full = 0;
		size_t skip = q->tx_sent;

		if (head->sum_at_send && skip >= head->hdr_len && skip < head->hdr_len + head->data_len) {
			int r = send_summed(q, head);

			if (r <= 0)
				return r < 0 ? -1 : 1;
			continue;
		}
		for (unsigned i = 0; i < q->tx_count && !full; i++) {
			const struct nvq_txe *e = &q->txq[(q->tx_head + i) % q->txq_cap];

			full = !gather(v, &cnt, max, e->hdr, e->hdr_len, &skip);
			/* Data summed as it is sent goes on its own, after its header. */
			if (e->sum_at_send && skip < e->data_len) {
				full = 1;
				break;
			}
			for (int k = 0; k < e->data_cnt && !full; k++)
				full = !gather(v, &cnt, max, e->data[k].iov_base, e->data[k].iov_len, &skip);
			if (e->has_ddgst && !full)
				full = !gather(v, &cnt, max, e->ddgst, PDU_DIGEST_LEN, &skip);
		}
		struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t)cnt};
		ssize_t w = sendmsg(q->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return 1;
			return nvq_fail(q, "send: %s", strerror(errno));
		}
		q->tx_sent += (size_t)w;
		while (q->tx_count && q->tx_sent >= txe_len(&q->txq[q->tx_head])) {
			q->tx_sent -= txe_len(&q->txq[q->tx_head]);
			tx_pop(q);
		}
	}
	return 0;
}

int nvq_wait(struct nvq *q, int out, int timeout_ms)
{
	struct pollfd p = {q->fd, (short)(out ? POLLOUT : POLLIN), 0};
	int r;

	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	return r;
}
