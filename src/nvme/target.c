/* The target's queues: listening, a thread per connection, the connection's
 * initialisation, and the PDU flow of a command (capsule, in-capsule data or
 * R2T and H2CData, then C2HData and the response). */
#include "target.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* A queue stops reading while this much waits to be sent: a host that sends
 * and never reads holds up its own queue, not the target's memory. */
#define TX_BACKLOG_MAX 4096u
/* How often a quiet queue looks at its controller (keep-alive, teardown). */
#define TICK_MS 500

void tlog(const struct tconn *c, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c)
		fprintf(stderr, "usmc nvme target: %s queue %u: %s\n", c->peer, c->qid, msg);
	else
		fprintf(stderr, "usmc nvme target: %s\n", msg);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------ commands */

static struct tcmd *slot_new(struct tconn *c, uint16_t cid)
{
	struct tcmd *cmd;

	if (!c->nfree)
		return NULL;
	cmd = &c->cmds[c->free_slots[--c->nfree]];
	cmd->cid = cid;
	cmd->buf = NULL;
	cmd->len = cmd->rcvd = cmd->capsule_off = 0;
	cmd->status = NVME_SC_SUCCESS;
	return cmd;
}

static void slot_free(struct tconn *c, struct tcmd *cmd)
{
	free(cmd->buf);
	cmd->buf = NULL;
	cmd->state = TC_FREE;
	c->free_slots[c->nfree++] = (uint16_t)(cmd - c->cmds);
}

static void slot_sent(struct nvq *q, void *arg)
{
	slot_free(q->owner, arg);
}

void tconn_resize(struct tconn *c, uint16_t sqsize)
{
	/* Slots beyond the old depth were never handed out. */
	for (unsigned i = (unsigned)c->sqsize + 1; i <= sqsize; i++)
		c->free_slots[c->nfree++] = (uint16_t)i;
	c->sqsize = sqsize;
}

/* The slot is kept until its last PDU left: the PDU's data is its buffer. */
static void push_last(struct tconn *c, struct nvq_txe *e, struct tcmd *cmd, const struct iovec *data,
		      int cnt, size_t len)
{
	cmd->state = TC_HELD;
	e->sent = slot_sent;
	e->arg = cmd;
	nvq_tx_push(&c->q, e, data, cnt, len);
}

static void fill_cqe(struct tconn *c, struct tcmd *cmd, struct nvme_cqe *cqe, uint16_t status,
		     uint64_t result)
{
	memset(cqe, 0, sizeof(*cqe));
	put_le64(cqe->b + CQE_RESULT, result);
	put_le16(cqe->b + CQE_SQHD, c->sqflow_off ? 0xffff : c->sqhd);
	put_le16(cqe->b + CQE_SQID, c->qid);
	put_le16(cqe->b + CQE_CID, cmd->cid);
	put_le16(cqe->b + CQE_STATUS, (uint16_t)(status << 1));
}

void tcmd_complete(struct tconn *c, struct tcmd *cmd, uint16_t status, uint64_t result)
{
	struct nvq_txe *e = nvq_tx_entry(&c->q);
	struct nvme_cqe cqe;

	if (!e) {
		nvq_fail(&c->q, "out of memory");
		slot_free(c, cmd);
		return;
	}
	fill_cqe(c, cmd, &cqe, status, result);
	e->hdr_len = (uint32_t)pdu_resp(e->hdr, &c->q.tx, &cqe);
	push_last(c, e, cmd, NULL, 0, 0);
}

void tcmd_send_data(struct tconn *c, struct tcmd *cmd, const void *data, uint32_t len,
		    uint16_t status, const uint32_t *ddgst)
{
	struct nvq_txe *e = nvq_tx_entry(&c->q);
	int success = c->sqflow_off && status == NVME_SC_SUCCESS;

	if (!e) {
		nvq_fail(&c->q, "out of memory");
		slot_free(c, cmd);
		return;
	}
	cmd->iov[0].iov_base = (void *)data;
	cmd->iov[0].iov_len = len;
	/* One PDU for the whole transfer: the host places it wherever it likes,
	 * and fewer headers cost both ends less. */
	e->hdr_len = (uint32_t)pdu_data(e->hdr, &c->q.tx, PDU_C2H_DATA,
					PDU_F_LAST | (success ? PDU_F_SUCCESS : 0), cmd->cid, 0, 0, len);
	if (ddgst) {
		put_le32(e->ddgst, *ddgst);
		e->summed = 1;
	}
	if (success) {
		push_last(c, e, cmd, cmd->iov, 1, len);
		return;
	}
	/* The slot stays held until the response leaves, after the data. */
	cmd->state = TC_HELD;
	nvq_tx_push(&c->q, e, cmd->iov, 1, len);
	tcmd_complete(c, cmd, status, 0);
}

/* Runs a command whose data (if any) is all in. */
static void exec(struct tconn *c, struct tcmd *cmd)
{
	uint8_t opc = cmd->sqe.b[SQE_OPC];

	if (opc == NVME_FABRICS) {
		uint8_t fct = cmd->sqe.b[SQE_FCTYPE];

		if (fct == NVMF_CONNECT)
			ctrl_connect(c, cmd);
		else if (!c->ctrl)
			tcmd_complete(c, cmd, NVME_SC_CMD_SEQ_ERROR | NVME_SC_DNR, 0);
		else if ((fct == NVMF_PROP_GET || fct == NVMF_PROP_SET) && c->qid == 0)
			ctrl_property(c, cmd);
		else
			tcmd_complete(c, cmd, NVME_SC_INVALID_OPCODE | NVME_SC_DNR, 0);
		return;
	}
	if (!c->ctrl) {
		tcmd_complete(c, cmd, NVME_SC_CMD_SEQ_ERROR | NVME_SC_DNR, 0);
		return;
	}
	if (c->qid == 0) {
		admin_exec(c, cmd);
	} else if (!(c->ctrl->csts & NVME_CSTS_RDY)) {
		tcmd_complete(c, cmd, NVME_SC_CMD_SEQ_ERROR, 0);
	} else {
		io_exec(c, cmd);
	}
}

/* Sends the R2T for all of the command's data (the host sends it in
 * H2CData PDUs of at most MAXH2CDATA bytes). */
static void send_r2t(struct tconn *c, struct tcmd *cmd)
{
	struct nvq_txe *e = nvq_tx_entry(&c->q);

	if (!e) {
		nvq_fail(&c->q, "out of memory");
		return;
	}
	cmd->state = TC_R2T;
	e->hdr_len = (uint32_t)pdu_r2t(e->hdr, &c->q.tx, cmd->cid, (uint16_t)(cmd - c->cmds), 0,
				       cmd->len);
	nvq_tx_push(&c->q, e, NULL, 0, 0);
}

/* A command capsule's header: its slot, and where in-capsule data goes. */
static int on_cmd(struct tconn *c, const struct pdu_info *pi, const uint8_t *hdr,
		  struct nvq_sink *sink)
{
	struct tcmd *cmd = slot_new(c, get_le16(hdr + PDU_CH_LEN + SQE_CID));
	uint8_t type;
	uint64_t off;
	uint32_t len;

	if (!cmd)
		return nvq_fail(&c->q, "more commands in flight than the queue has entries");
	memcpy(cmd->sqe.b, hdr + PDU_CH_LEN, NVME_SQE_SIZE);
	c->sqhd = (uint16_t)((c->sqhd + 1) % ((unsigned)c->sqsize + 1));
	type = cmd->sqe.b[SQE_SGL_TYPE];
	off = get_le64(cmd->sqe.b + SQE_SGL_ADDR);
	len = get_le32(cmd->sqe.b + SQE_SGL_LEN);
	/* No command moves more, either way: its buffers are the target's. */
	if (len > TGT_MAX_XFER)
		len = UINT32_MAX;
	if (pi->data_len) {
		/* In-capsule data: the descriptor is an offset into it. */
		cmd->buf = malloc(pi->data_len);
		if (!cmd->buf)
			return nvq_fail(&c->q, "out of memory");
		sink->iov[0].iov_base = cmd->buf;
		sink->iov[0].iov_len = pi->data_len;
		sink->iovcnt = 1;
		cmd->state = TC_DATA_IN;
		c->capsule = cmd;
		if (type != NVME_SGL_DATA_OFFSET || off > pi->data_len || len > pi->data_len - off)
			cmd->len = UINT32_MAX; /* failed when the data is in */
		else
			cmd->len = len;
		cmd->capsule_off = (uint32_t)off;
		return 0;
	}
	cmd->state = TC_DATA_IN;
	if (len == UINT32_MAX) {
		tcmd_complete(c, cmd, NVME_SC_SGL_INVALID_DATA | NVME_SC_DNR, 0);
		return 0;
	}
	if (len && tcmd_data_in(c, &cmd->sqe)) {
		if (type != NVME_SGL_TRANSPORT) {
			tcmd_complete(c, cmd, NVME_SC_SGL_INVALID_DATA | NVME_SC_DNR, 0);
			return 0;
		}
		cmd->buf = malloc(len);
		if (!cmd->buf) {
			tcmd_complete(c, cmd, NVME_SC_INTERNAL, 0);
			return 0;
		}
		cmd->len = len;
		send_r2t(c, cmd);
		return 0;
	}
	cmd->len = len;
	exec(c, cmd);
	return 0;
}

/* In-capsule data is in: the command runs on the part its descriptor named. */
static void cmd_data(struct tconn *c, struct tcmd *cmd, int digest_ok)
{
	if (!digest_ok) {
		tcmd_complete(c, cmd, NVME_SC_TRANSIENT_TR_ERR, 0);
		return;
	}
	if (cmd->len == UINT32_MAX) {
		tcmd_complete(c, cmd, NVME_SC_SGL_INVALID_OFFSET | NVME_SC_DNR, 0);
		return;
	}
	if (cmd->capsule_off)
		memmove(cmd->buf, cmd->buf + cmd->capsule_off, cmd->len);
	cmd->rcvd = cmd->len;
	exec(c, cmd);
}

static int on_h2c(struct tconn *c, const struct pdu_info *pi, const uint8_t *hdr,
		  struct nvq_sink *sink)
{
	uint16_t ttag = get_le16(hdr + DATA_TTAG);
	uint32_t off = get_le32(hdr + DATA_OFFSET);
	struct tcmd *cmd = ttag <= TGT_MQES ? &c->cmds[ttag] : NULL;
	struct pdu_fault f = {FES_INVALID_HEADER, DATA_TTAG, "H2CData for no transfer we asked for"};

	if (!cmd || cmd->state != TC_R2T || cmd->cid != get_le16(hdr + DATA_CID))
		return nvq_fatal(&c->q, &f);
	if (off != cmd->rcvd || pi->data_len > cmd->len - off) {
		f.fes = FES_OUT_OF_RANGE;
		f.fei = DATA_OFFSET;
		f.why = "H2CData outside what the R2T asked for";
		return nvq_fatal(&c->q, &f);
	}
	if (((pi->flags & PDU_F_LAST) != 0) != (off + pi->data_len == cmd->len)) {
		f.fei = CH_FLAGS;
		f.why = "H2CData's last flag not on the transfer's last PDU";
		return nvq_fatal(&c->q, &f);
	}
	sink->iov[0].iov_base = cmd->buf + off;
	sink->iov[0].iov_len = pi->data_len;
	sink->iovcnt = 1;
	return 0;
}

static void h2c_data(struct tconn *c, const uint8_t *hdr, const struct pdu_info *pi, int digest_ok)
{
	struct tcmd *cmd = &c->cmds[get_le16(hdr + DATA_TTAG)];

	cmd->rcvd += pi->data_len;
	/* The transfer's other PDUs still come: taken, and the command failed
	 * once they are in. */
	if (!digest_ok)
		cmd->status = NVME_SC_TRANSIENT_TR_ERR;
	if (cmd->rcvd < cmd->len)
		return;
	if (cmd->status != NVME_SC_SUCCESS) {
		tcmd_complete(c, cmd, cmd->status, 0);
		return;
	}
	cmd->state = TC_DATA_IN;
	exec(c, cmd);
}

/* ------------------------------------------------------------ connection */

static int on_icreq(struct tconn *c, const uint8_t *hdr)
{
	uint8_t hpda = hdr[IC_PDA], dgst = hdr[IC_DGST];
	struct pdu_frame rx = {0}, tx = {0};
	struct pdu_fault f = {FES_UNSUPPORTED, IC_PFV, "unsupported PDU format version"};
	struct nvq_txe *e;

	if (get_le16(hdr + IC_PFV) != NVME_TCP_PFV_1_0)
		return nvq_fatal(&c->q, &f);
	if (hpda > 31) {
		f.fei = IC_PDA;
		f.why = "host PDU data alignment out of range";
		return nvq_fatal(&c->q, &f);
	}
	if (c->t->o.require_digest && (dgst & 3) != 3) {
		f.fei = IC_DGST;
		f.why = "this target requires header and data digests";
		return nvq_fatal(&c->q, &f);
	}
	c->maxr2t = get_le32(hdr + IC_MAXR2T);
	rx.hdgst = tx.hdgst = (dgst & PDU_DGST_HEADER) != 0;
	rx.ddgst = tx.ddgst = (dgst & PDU_DGST_DATA) != 0;
	tx.pda = hpda;
	e = nvq_tx_entry(&c->q);
	if (!e)
		return nvq_fail(&c->q, "out of memory");
	e->hdr_len = (uint32_t)pdu_icresp(e->hdr, 0, dgst & 3, TGT_MAXH2CDATA);
	nvq_tx_push(&c->q, e, NULL, 0, 0);
	nvq_connected(&c->q, &rx, &tx);
	nvq_sum_on_send(&c->q);
	return 0;
}

static int on_header(struct nvq *q, const struct pdu_info *pi, const uint8_t *hdr,
		     struct nvq_sink *sink)
{
	struct tconn *c = q->owner;

	switch (pi->type) {
	case PDU_ICREQ:
		return on_icreq(c, hdr);
	case PDU_CMD:
		return on_cmd(c, pi, hdr, sink);
	case PDU_H2C_DATA:
		return on_h2c(c, pi, hdr, sink);
	case PDU_H2C_TERM:
		/* Its quoted header is dropped: data() ends the queue. */
		return 0;
	}
	return nvq_fail(q, "unexpected %s", pdu_type_name(pi->type));
}

static int on_data(struct nvq *q, const struct pdu_info *pi, const uint8_t *hdr, int digest_ok)
{
	struct tconn *c = q->owner;

	if (!digest_ok)
		atomic_fetch_add(&c->t->ddgst_errors, 1);
	switch (pi->type) {
	case PDU_CMD:
		cmd_data(c, c->capsule, digest_ok);
		c->capsule = NULL;
		return 0;
	case PDU_H2C_DATA:
		h2c_data(c, hdr, pi, digest_ok);
		return 0;
	case PDU_H2C_TERM:
		return nvq_fail(q, "the host ended the connection: fatal error status %u, field %u",
				get_le16(hdr + TERM_FES), get_le32(hdr + TERM_FEI));
	}
	return nvq_fail(q, "unexpected data on %s", pdu_type_name(pi->type));
}

static const struct nvq_ops target_ops = {on_header, on_data};

static void conn_free(struct tconn *c)
{
	ctrl_release(c);
	nvq_destroy(&c->q);
	close(c->q.fd);
	for (unsigned i = 0; c->cmds && i <= TGT_MQES; i++)
		free(c->cmds[i].buf);
	free(c->cmds);
	free(c->free_slots);
	free(c);
}

/* Keep-alive: a controller whose host went quiet for longer than it promised
 * (with the grace Linux gives its own) is torn down. */
static int expired(struct tconn *c, uint64_t *last_seen)
{
	struct tctrl *ctrl = c->ctrl;
	uint64_t now = now_ms();

	if (!ctrl)
		return 0;
	if (atomic_load(&ctrl->dead))
		return 1;
	if (c->qid || !ctrl->kato_ms)
		return 0;
	if (c->q.stats.pdus_in != last_seen[0]) {
		last_seen[0] = c->q.stats.pdus_in;
		last_seen[1] = now;
		return 0;
	}
	if (now - last_seen[1] > ctrl->kato_ms + 5000) {
		tlog(c, "keep-alive timeout (%u ms): controller %u torn down", ctrl->kato_ms,
		     ctrl->cntlid);
		atomic_store(&ctrl->dead, 1);
		return 1;
	}
	return 0;
}

static void *conn_main(void *arg)
{
	struct tconn *c = arg;
	uint64_t seen[2] = {0, now_ms()};

	for (;;) {
		int r = c->q.tx_count < TX_BACKLOG_MAX ? nvq_rx(&c->q) : 0;
		int f = r < 0 ? -1 : nvq_tx_flush(&c->q);

		if (r < 0 || f < 0 || expired(c, seen))
			break;
		if (r == 0) {
			struct pollfd p = {c->q.fd, 0, 0};

			if (c->q.tx_count < TX_BACKLOG_MAX)
				p.events |= POLLIN;
			if (f)
				p.events |= POLLOUT;
			if (poll(&p, 1, TICK_MS) < 0 && errno != EINTR)
				break;
		}
	}
	if (c->q.failed && c->t->o.verbose)
		tlog(c, "closed: %s", c->q.err);
	else if (c->q.failed && !strstr(c->q.err, "closed by the peer"))
		tlog(c, "closed: %s", c->q.err);
	atomic_fetch_add(&c->t->hdgst_errors, c->q.stats.hdgst_errors);
	conn_free(c);
	return NULL;
}

static void accept_one(struct target *t, int lfd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK), one = 1;
	struct tconn *c;
	pthread_t th;
	pthread_attr_t attr;
	char host[INET6_ADDRSTRLEN] = "?", serv[8] = "?";

	if (fd < 0)
		return;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c = calloc(1, sizeof(*c));
	if (!c || nvq_init(&c->q, fd, PDU_CTRL, &target_ops, c) < 0) {
		free(c);
		close(fd);
		return;
	}
	c->t = t;
	c->cmds = calloc(TGT_MQES + 1, sizeof(*c->cmds));
	c->free_slots = calloc(TGT_MQES + 1, sizeof(*c->free_slots));
	/* Room for the Connect; Connect itself sets the depth. */
	c->sqsize = 0;
	c->nfree = 1;
	c->q.rx.max_data = TGT_MAXH2CDATA;
	c->q.rx.max_incapsule = TGT_INCAPSULE > TGT_ADMIN_INCAPSULE ? TGT_INCAPSULE : TGT_ADMIN_INCAPSULE;
	getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), serv, sizeof(serv),
		    NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(c->peer, sizeof(c->peer), "%s:%s", host, serv);
	atomic_fetch_add(&t->queues, 1);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (!c->cmds || !c->free_slots || pthread_create(&th, &attr, conn_main, c) != 0) {
		tlog(NULL, "cannot serve %s: %s", c->peer, strerror(errno));
		conn_free(c);
	}
	pthread_attr_destroy(&attr);
}

static int listen_on(struct target *t, uint16_t port, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
	struct addrinfo *ai;
	char serv[8];
	int fd, one = 1, rc;

	snprintf(serv, sizeof(serv), "%u", port);
	rc = getaddrinfo(t->o.addr, serv, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "%s: %s", t->o.addr ? t->o.addr : "*", gai_strerror(rc));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
		snprintf(err, errlen, "listen on port %u: %s", port, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	t->lfd[t->nports] = fd;
	t->lport[t->nports++] = port;
	return 0;
}

int target_start(struct target *t, const struct target_opts *o, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	t->o = *o;
	pthread_mutex_init(&t->lock, NULL);
	t->next_cntlid = 1;
	snprintf(t->nqn, sizeof(t->nqn), "%s", o->nqn);
	snprintf(t->serial, sizeof(t->serial), "usmc%08x", (unsigned)getpid());
	if (ns_open(&t->ns, o->path, o->size, o->lba_shift, err, errlen) < 0)
		return -1;
	if (listen_on(t, o->port, err, errlen) < 0)
		return -1;
	if (o->disc_port && o->disc_port != o->port && listen_on(t, o->disc_port, err, errlen) < 0)
		return -1;
	return 0;
}

void target_run(struct target *t)
{
	struct pollfd p[TGT_PORTS_MAX];

	for (int i = 0; i < t->nports; i++)
		p[i] = (struct pollfd){t->lfd[i], POLLIN, 0};
	for (;;) {
		if (poll(p, (nfds_t)t->nports, -1) < 0 && errno != EINTR)
			return;
		for (int i = 0; i < t->nports; i++)
			if (p[i].revents & POLLIN)
				accept_one(t, t->lfd[i]);
	}
}
