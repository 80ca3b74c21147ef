/* Bad peers for the nvme suite.
 *
 *   hostile host PORT CASE
 *       connects to a target as a host that breaks the transport binding one
 *       way (CASE), and checks that the target answers with the termination
 *       request the binding prescribes (or closes); exit 0 when it did.
 *   hostile proxy LISTEN_PORT TARGET_PORT CASE
 *       forwards every connection to the target PDU by PDU, and spoils one PDU
 *       once (CASE: which direction, which PDU, how).
 *
 * Both speak through src/nvme/pdu.h's encoder, so that what they send is
 * exactly one fault away from a good PDU. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/nvme/pdu.h"

static int dial(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("hostile: connect");
		exit(2);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int full(int fd, void *b, size_t n, int rd)
{
	for (size_t at = 0; at < n;) {
		ssize_t r = rd ? read(fd, (uint8_t *)b + at, n - at) : write(fd, (uint8_t *)b + at, n - at);

		if (r <= 0)
			return -1;
		at += (size_t)r;
	}
	return 0;
}

/* ------------------------------------------------------------ host */

/* The initialisation exchange, asking for digests dgst. */
static void hello(int fd, uint8_t dgst)
{
	uint8_t b[PDU_HDR_MAX];
	size_t n = pdu_icreq(b, 0, dgst, 0);

	if (full(fd, b, n, 0) < 0 || full(fd, b, PDU_IC_LEN, 1) < 0 || b[CH_TYPE] != PDU_ICRESP) {
		fprintf(stderr, "hostile: no ICResp\n");
		exit(2);
	}
}

/* What the target says last: a C2HTermReq's status and field, or the close. */
static int expect_term(int fd, uint16_t fes, uint32_t fei)
{
	uint8_t b[PDU_TERM_LEN + PDU_TERM_DATA_MAX];
	struct pollfd p = {fd, POLLIN, 0};

	for (;;) {
		if (poll(&p, 1, 5000) <= 0) {
			fprintf(stderr, "hostile: the target neither answered nor closed\n");
			return 1;
		}
		if (full(fd, b, PDU_CH_LEN, 1) < 0) {
			if (fes) {
				fprintf(stderr, "hostile: closed without a termination request\n");
				return 1;
			}
			printf("hostile: the target closed the connection\n");
			return 0;
		}
		uint32_t plen = get_le32(b + CH_PLEN);
		if (b[CH_TYPE] != PDU_C2H_TERM) {
			/* Something owed from before the fault: skip it. */
			uint8_t skip[4096];

			for (uint32_t left = plen - PDU_CH_LEN; left;) {
				uint32_t k = left < sizeof(skip) ? left : sizeof(skip);

				if (full(fd, skip, k, 1) < 0)
					return 1;
				left -= k;
			}
			continue;
		}
		if (plen < PDU_TERM_LEN || plen > sizeof(b) || full(fd, b + PDU_CH_LEN, plen - PDU_CH_LEN, 1) < 0) {
			fprintf(stderr, "hostile: a malformed termination request\n");
			return 1;
		}
		printf("hostile: C2HTermReq, fatal error status %u, field %u\n", get_le16(b + TERM_FES),
		       get_le32(b + TERM_FEI));
		if (get_le16(b + TERM_FES) != fes || get_le32(b + TERM_FEI) != fei) {
			fprintf(stderr, "hostile: expected status %u, field %u\n", fes, fei);
			return 1;
		}
		/* ...and then the close. */
		return read(fd, b, 1) == 0 ? 0 : 1;
	}
}

/* The target answers the command with status (and keeps the connection). */
static int expect_resp(int fd, uint16_t status)
{
	uint8_t b[PDU_RESP_LEN];

	if (full(fd, b, sizeof(b), 1) < 0 || b[CH_TYPE] != PDU_RESP) {
		fprintf(stderr, "hostile: no response\n");
		return 1;
	}
	printf("hostile: response, status %#x\n", get_le16(b + PDU_CH_LEN + CQE_STATUS) >> 1);
	return get_le16(b + PDU_CH_LEN + CQE_STATUS) >> 1 == status ? 0 : 1;
}

static int host_case(int port, const char *c)
{
	static const struct pdu_frame plain = {0, 0, 0}, hd = {1, 0, 0};
	struct nvme_sqe sqe = {{NVME_CMD_WRITE}};
	uint8_t b[PDU_HDR_MAX + 16384] = {0};
	int fd = dial(port);
	size_t n;

	if (!strcmp(c, "bad-pfv")) {
		n = pdu_icreq(b, 0, 0, 0);
		put_le16(b + IC_PFV, 1);
		full(fd, b, n, 0);
		return expect_term(fd, FES_UNSUPPORTED, IC_PFV);
	}
	if (!strcmp(c, "before-icreq")) {
		n = pdu_cmd(b, &plain, &sqe, 0);
		full(fd, b, n, 0);
		return expect_term(fd, FES_SEQUENCE, CH_TYPE);
	}
	hello(fd, !strcmp(c, "bad-hdgst") ? PDU_DGST_HEADER : 0);
	if (!strcmp(c, "unknown-type")) {
		n = pdu_cmd(b, &plain, &sqe, 0);
		b[CH_TYPE] = 0x0b;
		full(fd, b, n, 0);
		return expect_term(fd, FES_INVALID_HEADER, CH_TYPE);
	}
	if (!strcmp(c, "wrong-pdo")) {
		n = pdu_cmd(b, &plain, &sqe, 512);
		b[CH_PDO] += 4;
		full(fd, b, n + 512, 0);
		return expect_term(fd, FES_INVALID_HEADER, CH_PDO);
	}
	if (!strcmp(c, "wrong-hlen")) {
		n = pdu_cmd(b, &plain, &sqe, 0);
		b[CH_HLEN] = 80;
		full(fd, b, n, 0);
		return expect_term(fd, FES_INVALID_HEADER, CH_HLEN);
	}
	if (!strcmp(c, "oversized-capsule")) {
		n = pdu_cmd(b, &plain, &sqe, 16384);
		full(fd, b, n + 16384, 0);
		return expect_term(fd, FES_LIMIT_EXCEEDED, CH_PLEN);
	}
	if (!strcmp(c, "huge-plen")) {
		n = pdu_cmd(b, &plain, &sqe, 4096);
		put_le32(b + CH_PLEN, 0xfffffff0u);
		full(fd, b, n + 4096, 0);
		return expect_term(fd, FES_LIMIT_EXCEEDED, CH_PLEN);
	}
	if (!strcmp(c, "bad-hdgst")) {
		n = pdu_cmd(b, &hd, &sqe, 0);
		b[PDU_CH_LEN + SQE_NSID] ^= 1;
		full(fd, b, n, 0);
		return expect_term(fd, FES_HDGST, 0);
	}
	if (!strcmp(c, "huge-transfer")) {
		/* A read of 4 GiB: refused, not attempted. */
		sqe.b[SQE_OPC] = NVME_CMD_READ;
		sqe.b[SQE_SGL_TYPE] = NVME_SGL_TRANSPORT;
		put_le32(sqe.b + SQE_SGL_LEN, 0xffffffffu);
		n = pdu_cmd(b, &plain, &sqe, 0);
		full(fd, b, n, 0);
		return expect_resp(fd, NVME_SC_SGL_INVALID_DATA | NVME_SC_DNR);
	}
	if (!strcmp(c, "unasked-h2c")) {
		n = pdu_data(b, &plain, PDU_H2C_DATA, PDU_F_LAST, 1, 7, 0, 512);
		full(fd, b, n + 512, 0);
		return expect_term(fd, FES_INVALID_HEADER, DATA_TTAG);
	}
	if (!strcmp(c, "truncated")) {
		/* Half a command, then gone: the target must just close. */
		n = pdu_cmd(b, &plain, &sqe, 0);
		full(fd, b, n / 2, 0);
		shutdown(fd, SHUT_WR);
		return expect_term(fd, 0, 0);
	}
	fprintf(stderr, "hostile: no such case %s\n", c);
	return 2;
}

/* ------------------------------------------------------------ proxy */

/* A case: direction (0 host to target, 1 back), the PDU type it spoils, the
 * ordinal of that PDU (counted over every connection: the admin queues' come
 * first, a few), and what it does. */
struct spoil {
	const char *name;
	int dir;
	uint8_t type;
	int nth;
	enum { FLIP_DATA, FLIP_HEADER, TYPE_UNKNOWN, PDO_PLUS4, TRUNCATE, LENGTH_PLUS } how;
};

static const struct spoil spoils[] = {
	{"c2h-data-digest", 1, PDU_C2H_DATA, 20, FLIP_DATA},
	{"h2c-data-digest", 0, PDU_H2C_DATA, 20, FLIP_DATA},
	{"c2h-header-digest", 1, PDU_C2H_DATA, 20, FLIP_HEADER},
	{"c2h-unknown-type", 1, PDU_C2H_DATA, 20, TYPE_UNKNOWN},
	{"c2h-wrong-pdo", 1, PDU_C2H_DATA, 20, PDO_PLUS4},
	{"c2h-truncated", 1, PDU_C2H_DATA, 20, TRUNCATE},
	{"c2h-oversized", 1, PDU_C2H_DATA, 20, LENGTH_PLUS},
	{"none", 0, 0xff, 0, FLIP_DATA},
};

static const struct spoil *spoil;
static _Atomic int seen, spoiled;

struct pipe_arg {
	int from, to, dir;
};

static void *forward(void *arg)
{
	struct pipe_arg *p = arg;
	uint8_t *b = malloc(64u << 20 | 4096);

	while (b) {
		uint32_t plen;

		if (full(p->from, b, PDU_CH_LEN, 1) < 0)
			break;
		plen = get_le32(b + CH_PLEN);
		if (plen < PDU_CH_LEN || plen > (64u << 20) || full(p->from, b + PDU_CH_LEN, plen - PDU_CH_LEN, 1) < 0)
			break;
		if (p->dir == spoil->dir && b[CH_TYPE] == spoil->type &&
		    atomic_fetch_add(&seen, 1) + 1 == spoil->nth) {
			atomic_store(&spoiled, 1);
			switch (spoil->how) {
			case FLIP_DATA:
				b[b[CH_PDO] + 1] ^= 0x10;
				break;
			case FLIP_HEADER:
				b[DATA_OFFSET] ^= 0x10;
				break;
			case TYPE_UNKNOWN:
				b[CH_TYPE] = 0x0b;
				break;
			case PDO_PLUS4:
				b[CH_PDO] += 4;
				break;
			case TRUNCATE:
				full(p->to, b, plen / 2, 0);
				goto out;
			case LENGTH_PLUS:
				put_le32(b + DATA_LENGTH, get_le32(b + DATA_LENGTH) + 4096);
				put_le32(b + CH_PLEN, plen + 4096);
				if (full(p->to, b, plen, 0) < 0 || full(p->to, b, 4096, 0) < 0)
					goto out;
				continue;
			}
			fprintf(stderr, "hostile: spoiled a %s (%s)\n", pdu_type_name(spoil->type), spoil->name);
		}
		if (full(p->to, b, plen, 0) < 0)
			break;
	}
out:
	free(b);
	shutdown(p->to, SHUT_RDWR);
	shutdown(p->from, SHUT_RDWR);
	return NULL;
}

static void *serve_pair(void *arg)
{
	struct pipe_arg *p = arg, back = {p->to, p->from, 1};
	pthread_t t;

	pthread_create(&t, NULL, forward, &back);
	forward(p);
	pthread_join(t, NULL);
	close(p->from);
	close(p->to);
	free(p);
	return NULL;
}

static int proxy(int lport, int tport, const char *c)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)lport)};
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	for (size_t i = 0; i < sizeof(spoils) / sizeof(spoils[0]); i++)
		if (!strcmp(spoils[i].name, c))
			spoil = &spoils[i];
	if (!spoil) {
		fprintf(stderr, "hostile: no such case %s\n", c);
		return 2;
	}
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 64) < 0) {
		perror("hostile: listen");
		return 2;
	}
	for (;;) {
		int c_fd = accept(l, NULL, NULL);
		struct pipe_arg *p;
		pthread_t t;

		if (c_fd < 0)
			continue;
		setsockopt(c_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		p = malloc(sizeof(*p));
		p->from = c_fd;
		p->to = dial(tport);
		p->dir = 0;
		pthread_create(&t, NULL, serve_pair, p);
		pthread_detach(t);
	}
}

int main(int argc, char **argv)
{
	/* A peer gone is what these cases are about: no signal for it. */
	signal(SIGPIPE, SIG_IGN);
	if (argc == 4 && !strcmp(argv[1], "host"))
		return host_case(atoi(argv[2]), argv[3]);
	if (argc == 5 && !strcmp(argv[1], "proxy"))
		return proxy(atoi(argv[2]), atoi(argv[3]), argv[4]);
	fprintf(stderr, "usage: hostile host PORT CASE | hostile proxy LISTEN_PORT TARGET_PORT CASE\n");
	return 2;
}
