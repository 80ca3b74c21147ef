/* link: src/nvme/pdu.c src/nvme/queue.c src/nvme/digest.c src/util/crc32c.c */
/* The NVMe/TCP PDU parser and the receive machine on arbitrary bytes. The
 * first byte picks the receiver (host or controller, before or after the
 * initialisation, which digests, which alignment); the rest is, once, a header
 * for pdu_hdr_bytes()/pdu_parse(), whose verdict must agree with the framing
 * rules restated here, and then a stream fed to a queue in pieces, whose owner
 * takes every PDU the parser lets through: nothing may crash or read or write
 * out of bounds, and the queue either keeps up or fails cleanly. */
#include "fuzz.h"

#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../include/usmc/ddp.h"
#include "../../src/nvme/queue.h"

/* No placement here: the socket offers none. */
unsigned usmc_ddp_caps(int fd) { (void)fd; return 0; }
struct usmc_ddp *usmc_ddp_sk_add(int fd, const struct usmc_ddp_config *c) { (void)fd; (void)c; return NULL; }
void usmc_ddp_sk_del(struct usmc_ddp *d) { (void)d; }
ssize_t usmc_ddp_recv(struct usmc_ddp *d, unsigned t, size_t o, size_t l, uint32_t *c, void *a,
		      size_t al, size_t *ag, int f)
{
	(void)d; (void)t; (void)o; (void)l; (void)c; (void)a; (void)al; (void)ag; (void)f;
	return -1;
}

ssize_t usmc_ddp_send(int fd, const struct iovec *v, int n, uint32_t *c, int f)
{
	(void)fd; (void)v; (void)n; (void)c; (void)f;
	return -1;
}

static struct pdu_rx config(uint8_t b)
{
	struct pdu_rx rx;

	memset(&rx, 0, sizeof(rx));
	rx.role = b & 1 ? PDU_CTRL : PDU_HOST;
	rx.connected = (b >> 1) & 1;
	rx.f.hdgst = (b >> 2) & 1;
	rx.f.ddgst = (b >> 3) & 1;
	rx.f.pda = (uint8_t)((b >> 4) * 2); /* 0..30 */
	rx.max_data = 65536;
	rx.max_incapsule = 8192;
	return rx;
}

static void check_verdict(const struct pdu_rx *rx, const uint8_t *b, size_t n)
{
	struct pdu_fault f;
	struct pdu_info pi;
	uint32_t hb;

	if (n < PDU_CH_LEN)
		return;
	hb = pdu_hdr_bytes(rx, b, &f);
	if (!hb) {
		FUZZ_ASSERT(f.why && f.fes >= FES_INVALID_HEADER && f.fes <= FES_UNSUPPORTED);
		return;
	}
	FUZZ_ASSERT(hb == b[CH_HLEN] || hb == b[CH_HLEN] + 4u);
	if (hb > n)
		return;
	if (pdu_parse(rx, b, &pi, &f) < 0) {
		FUZZ_ASSERT(f.why != NULL);
		return;
	}
	/* An accepted header describes its PDU exactly. */
	FUZZ_ASSERT(pi.hdr_bytes == hb && pi.plen == get_le32(b + CH_PLEN));
	if (pi.data_len && pi.type != PDU_H2C_TERM && pi.type != PDU_C2H_TERM) {
		FUZZ_ASSERT(pi.hdr_bytes + pi.pad == b[CH_PDO]);
		FUZZ_ASSERT(b[CH_PDO] % (4u * (rx->f.pda + 1u)) == 0);
		FUZZ_ASSERT((uint64_t)b[CH_PDO] + pi.data_len + (pi.ddgst ? 4u : 0u) == pi.plen);
		FUZZ_ASSERT(pi.data_len <= (pi.type == PDU_CMD ? rx->max_incapsule : rx->max_data));
		FUZZ_ASSERT(pi.ddgst == rx->f.ddgst);
	} else if (pi.type == PDU_H2C_TERM || pi.type == PDU_C2H_TERM) {
		FUZZ_ASSERT(pi.data_len <= PDU_TERM_DATA_MAX && pi.plen == hb + pi.data_len);
	} else {
		FUZZ_ASSERT(pi.plen == hb && pi.data_len == 0);
	}
}

static uint8_t scratch[65536 + 8192];

static int on_header(struct nvq *q, const struct pdu_info *pi, const uint8_t *hdr,
		     struct nvq_sink *sink)
{
	(void)q;
	(void)hdr;
	FUZZ_ASSERT(pi->data_len <= sizeof(scratch));
	/* Every other PDU's data is dropped rather than kept. */
	if (pi->data_len && (pi->plen & 1)) {
		sink->iov[0].iov_base = scratch;
		sink->iov[0].iov_len = pi->data_len;
		sink->iovcnt = 1;
	}
	return 0;
}

static int on_data(struct nvq *q, const struct pdu_info *pi, const uint8_t *hdr, int ok)
{
	(void)q;
	(void)pi;
	(void)hdr;
	(void)ok;
	return 0;
}

static const struct nvq_ops ops = {on_header, on_data};

static void feed_queue(const struct pdu_rx *rx, const uint8_t *b, size_t n)
{
	struct nvq q;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
		return;
	if (nvq_init(&q, sv[0], rx->role, &ops, NULL) == 0) {
		q.rx = *rx;
		for (size_t at = 0, step = 1; at < n && !q.failed; at += step, step = step * 2 + 1) {
			size_t k = n - at < step ? n - at : step;

			if (write(sv[1], b + at, k) != (ssize_t)k)
				break;
			nvq_rx(&q);
		}
		nvq_destroy(&q);
	}
	close(sv[0]);
	close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pdu_rx rx;

	if (size < 1)
		return 0;
	rx = config(data[0]);
	check_verdict(&rx, data + 1, size - 1);
	feed_queue(&rx, data + 1, size - 1);
	return 0;
}

static void emit_with(fuzz_emit_fn *emit, uint8_t cfg, const uint8_t *pdu, size_t n, size_t data)
{
	uint8_t b[PDU_HDR_MAX + 512];

	b[0] = cfg;
	memcpy(b + 1, pdu, n);
	memset(b + 1 + n, 0x42, data);
	emit(b, 1 + n + data);
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	static const struct pdu_frame plain = {0, 0, 0}, digests = {1, 1, 0}, aligned = {0, 1, 2};
	struct nvme_sqe sqe = {{NVME_CMD_WRITE}};
	struct nvme_cqe cqe = {{0}};
	uint8_t b[PDU_HDR_MAX];
	size_t n;

	n = pdu_icreq(b, 0, 3, 0);
	emit_with(emit, 0x1, b, n, 0);
	n = pdu_icresp(b, 0, 3, 131072);
	emit_with(emit, 0x0, b, n, 0);
	n = pdu_cmd(b, &plain, &sqe, 256);
	emit_with(emit, 0x3, b, n, 256);
	n = pdu_cmd(b, &digests, &sqe, 256);
	emit_with(emit, 0xf, b, n, 260);
	n = pdu_data(b, &plain, PDU_C2H_DATA, PDU_F_LAST | PDU_F_SUCCESS, 1, 0, 0, 300);
	emit_with(emit, 0x2, b, n, 300);
	n = pdu_data(b, &aligned, PDU_C2H_DATA, PDU_F_LAST, 1, 0, 0, 200);
	emit_with(emit, 0x2a, b, n, 204);
	n = pdu_data(b, &digests, PDU_H2C_DATA, PDU_F_LAST, 1, 3, 0, 100);
	emit_with(emit, 0xf, b, n, 104);
	n = pdu_resp(b, &digests, &cqe);
	emit_with(emit, 0xe, b, n, 0);
	n = pdu_r2t(b, &plain, 1, 2, 0, 4096);
	emit_with(emit, 0x2, b, n, 0);
	n = pdu_term(b, PDU_H2C_TERM, FES_HDGST, 0, b, 0);
	emit_with(emit, 0x3, b, n, 24);
}
