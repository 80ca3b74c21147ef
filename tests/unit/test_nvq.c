/* link: src/nvme/queue.c src/nvme/pdu.c src/nvme/digest.c src/util/crc32c.c src/core/ddp.c */
/* The NVMe/TCP receive machine (src/nvme/queue.c) on a host's socket: a stream
 * of PDUs (padding, digests, data placed and staged) arriving in pieces of
 * every size ends up where it should, each data digest judged right; a bad
 * data digest is reported, a bad header digest fails the queue with a
 * termination request. Placement is stood in for: the library's own is tested
 * through the nvme suite. */
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/nvme/queue.h"
#include "../../src/util/crc32c.h"
#include "ddp.h"
#include "stats.h"

void stat_add(enum stat_id id, uint64_t n)
{
	(void)id;
	(void)n;
}

static unsigned caps;

unsigned usmc_ddp_caps(int fd)
{
	(void)fd;
	return caps;
}

struct usmc_ddp *usmc_ddp_sk_add(int fd, const struct usmc_ddp_config *cfg)
{
	return ddp_new(fd, cfg);
}

void usmc_ddp_sk_del(struct usmc_ddp *d)
{
	ddp_free(d);
}

int usmc_ddp_setup(struct usmc_ddp *d, unsigned tag, const struct iovec *iov, int iovcnt)
{
	return ddp_setup(d, tag, iov, iovcnt);
}

void usmc_ddp_teardown(struct usmc_ddp *d, unsigned tag)
{
	ddp_teardown(d, tag);
}

/* A stand-in placement: the window from the socket, summed when asked. */
ssize_t usmc_ddp_recv(struct usmc_ddp *d, unsigned tag, size_t off, size_t len, uint32_t *crc,
		      void *ahead, size_t ahead_len, size_t *ahead_got, int flags)
{
	struct iovec win[USMC_DDP_IOV_MAX];
	int n = ddp_window(d, tag, off, len, win);
	ssize_t r;

	(void)ahead;
	(void)ahead_len;
	*ahead_got = 0;
	if (n < 0)
		return -1;
	r = readv(d->fd, win, n);
	(void)flags;
	for (int i = 0, left = (int)r; crc && i < n && left > 0; i++) {
		size_t l = win[i].iov_len < (size_t)left ? win[i].iov_len : (size_t)left;

		*crc = crc32c(*crc, win[i].iov_base, l);
		left -= (int)l;
	}
	return r;
}

ssize_t usmc_ddp_send(int fd, const struct iovec *iov, int iovcnt, uint32_t *crc, int flags)
{
	(void)fd; (void)iov; (void)iovcnt; (void)crc; (void)flags;
	errno = EOPNOTSUPP; /* the receive side is what is tested here */
	return -1;
}

#define DATA_LEN 20000
#define PDUS 4

struct host {
	uint8_t dest[PDUS][DATA_LEN];
	struct iovec iov[PDUS][2];
	int headers, datas, bad_digests, icresp;
	int place;
};

static int on_header(struct nvq *q, const struct pdu_info *pi, const uint8_t *hdr,
		     struct nvq_sink *sink)
{
	struct host *h = q->owner;
	uint16_t cid = get_le16(hdr + DATA_CID);

	h->headers++;
	if (pi->type == PDU_ICRESP) {
		h->icresp++;
		return 0;
	}
	if (pi->type != PDU_C2H_DATA || cid >= PDUS)
		return nvq_fail(q, "unexpected");
	memcpy(sink->iov, h->iov[cid], sizeof(h->iov[cid]));
	sink->iovcnt = 2;
	if (h->place) {
		if (usmc_ddp_setup(q->ddp, cid, h->iov[cid], 2) < 0)
			return nvq_fail(q, "setup");
		sink->tag = cid;
		sink->tag_off = 0;
	}
	return 0;
}

static int on_data(struct nvq *q, const struct pdu_info *pi, const uint8_t *hdr, int ok)
{
	struct host *h = q->owner;

	(void)pi;
	if (h->place)
		usmc_ddp_teardown(q->ddp, get_le16(hdr + DATA_CID));
	h->datas++;
	h->bad_digests += !ok;
	return 0;
}

static const struct nvq_ops ops = {on_header, on_data};

/* The controller's side of the stream: ICResp, then PDUS C2HData with
 * padding and digests; the data of the one numbered bad gets a wrong digest. */
static size_t make_stream(uint8_t *s, const struct pdu_frame *tx, uint8_t *src, int bad)
{
	size_t n = pdu_icresp(s, tx->pda, (uint8_t)(tx->hdgst | tx->ddgst << 1), 131072);

	for (int i = 0; i < PDUS; i++) {
		uint8_t *d = src + i * DATA_LEN;

		n += pdu_data(s + n, tx, PDU_C2H_DATA, PDU_F_LAST, (uint16_t)i, 0, 0, DATA_LEN);
		memcpy(s + n, d, DATA_LEN);
		n += DATA_LEN;
		if (tx->ddgst) {
			put_le32(s + n, crc32c_final(crc32c(CRC32C_INIT, d, DATA_LEN)) ^ (i == bad));
			n += 4;
		}
	}
	return n;
}

/* Feeds the stream in pieces of step bytes, running the queue after each. */
static int feed(struct nvq *q, int peer, const uint8_t *s, size_t len, size_t step)
{
	for (size_t at = 0; at < len; at += step) {
		size_t k = len - at < step ? len - at : step;

		if (write(peer, s + at, k) != (ssize_t)k || nvq_rx(q) < 0)
			return -1;
	}
	return nvq_rx(q);
}

static void run_case(int hd, int dd, uint8_t pda, int place, size_t step, int bad)
{
	static uint8_t src[PDUS * DATA_LEN], stream[PDUS * (DATA_LEN + 256) + 256];
	struct pdu_frame f = {(uint8_t)hd, (uint8_t)dd, pda};
	struct host *h = calloc(1, sizeof(*h));
	struct nvq q;
	int sv[2];
	size_t len;

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7 + i / 251);
	len = make_stream(stream, &f, src, bad);
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	for (int i = 0; i < PDUS; i++) {
		h->iov[i][0] = (struct iovec){h->dest[i], 777};
		h->iov[i][1] = (struct iovec){h->dest[i] + 777, DATA_LEN - 777};
	}
	h->place = place;
	caps = place ? USMC_DDP_CAP_PLACE | USMC_DDP_CAP_RING | USMC_DDP_CAP_CRC : 0;
	CHECK_EQ(nvq_init(&q, sv[0], PDU_HOST, &ops, h), 0);
	q.rx.max_data = 1 << 20;
	/* As the host does on the ICResp: the framing it asked for. */
	if (feed(&q, sv[1], stream, PDU_IC_LEN, step) < 0 || h->icresp != 1)
		CHECK(0);
	nvq_connected(&q, &f, &f);
	if (place)
		CHECK_EQ(nvq_place(&q, PDUS, 1), 1);
	CHECK(feed(&q, sv[1], stream + PDU_IC_LEN, len - PDU_IC_LEN, step) >= 0);
	if (!CHECK_EQ(h->datas, PDUS))
		printf("    hd %d dd %d pda %u place %d step %zu: %s\n", hd, dd, pda, place, step, q.err);
	CHECK_EQ(h->bad_digests, dd && bad >= 0 ? 1 : 0);
	for (int i = 0; i < PDUS; i++)
		CHECK(!memcmp(h->dest[i], src + i * DATA_LEN, DATA_LEN));
	if (place)
		CHECK(q.stats.bytes_placed > 0);
	else
		CHECK_EQ(q.stats.bytes_placed, 0);
	nvq_destroy(&q);
	close(sv[0]);
	close(sv[1]);
	free(h);
}

static void check_pieces(void)
{
	static const size_t steps[] = {1, 3, 29, 64, 4096, 100000};

	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++)
		for (int hd = 0; hd < 2; hd++)
			for (int dd = 0; dd < 2; dd++)
				for (int place = 0; place < 2; place++) {
					run_case(hd, dd, 0, place, steps[s], -1);
					run_case(hd, dd, 7, place, steps[s], -1);
				}
}

static void check_bad_data_digest(void)
{
	for (int place = 0; place < 2; place++)
		run_case(1, 1, 0, place, 4096, 2);
}

/* A header whose digest does not match: the queue fails, telling the peer
 * why in a termination request (fatal error status 3). */
static void check_bad_header_digest(void)
{
	uint8_t s[PDU_HDR_MAX], got[PDU_HDR_MAX];
	struct pdu_frame f = {1, 0, 0};
	struct host h = {0};
	struct nvq q;
	int sv[2];
	size_t n;

	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	nvq_init(&q, sv[0], PDU_HOST, &ops, &h);
	q.rx.max_data = 1 << 20;
	nvq_connected(&q, &f, &f);
	n = pdu_data(s, &f, PDU_C2H_DATA, PDU_F_LAST, 0, 0, 0, 100);
	s[DATA_OFFSET] ^= 0x40;
	CHECK(write(sv[1], s, n) == (ssize_t)n);
	CHECK_EQ(nvq_rx(&q), -1);
	CHECK(q.failed);
	CHECK_EQ(q.stats.hdgst_errors, 1);
	CHECK(read(sv[1], got, sizeof(got)) >= PDU_TERM_LEN);
	CHECK_EQ(got[CH_TYPE], PDU_H2C_TERM);
	CHECK_EQ(get_le16(got + TERM_FES), FES_HDGST);
	CHECK(!memcmp(got + PDU_TERM_LEN, s, n));
	nvq_destroy(&q);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	RUN(check_pieces);
	RUN(check_bad_data_digest);
	RUN(check_bad_header_digest);
	return check_report();
}
