/* I/O commands of the NVM command set on the target's one namespace. */
#include "target.h"

#include <stdlib.h>

#include "digest.h"

static uint32_t cdw(const struct tcmd *cmd, unsigned off)
{
	return get_le32(cmd->sqe.b + off);
}

int tcmd_data_in(const struct tconn *c, const struct nvme_sqe *sqe)
{
	uint8_t opc = sqe->b[SQE_OPC];

	if (opc == NVME_FABRICS)
		return sqe->b[SQE_FCTYPE] == NVMF_CONNECT;
	if (c->qid == 0)
		return opc == NVME_ADMIN_SET_FEATURES;
	return opc == NVME_CMD_WRITE || opc == NVME_CMD_DSM;
}

/* The blocks [slba, slba + nlb) as a byte range, if the namespace has them. */
static int range(const struct ns *ns, uint64_t slba, uint64_t nlb, uint64_t *off, uint64_t *len)
{
	if (slba > ns_blocks(ns) || nlb > ns_blocks(ns) - slba)
		return -1;
	*off = slba << ns->lba_shift;
	*len = nlb << ns->lba_shift;
	return 0;
}

static void rw(struct tconn *c, struct tcmd *cmd, int write)
{
	const struct ns *ns = &c->t->ns;
	uint64_t slba = cdw(cmd, SQE_CDW10) | (uint64_t)cdw(cmd, SQE_CDW11) << 32;
	uint64_t nlb = (cdw(cmd, SQE_CDW12) & 0xffff) + 1, off, len;
	const void *src;

	if (range(ns, slba, nlb, &off, &len) < 0) {
		tcmd_complete(c, cmd, NVME_SC_LBA_RANGE | NVME_SC_DNR, 0);
		return;
	}
	if (len != cmd->len || len > TGT_MAX_XFER ||
	    (!write && cmd->sqe.b[SQE_SGL_TYPE] != NVME_SGL_TRANSPORT)) {
		tcmd_complete(c, cmd, NVME_SC_SGL_INVALID_DATA | NVME_SC_DNR, 0);
		return;
	}
	if (write) {
		tcmd_complete(c, cmd, ns_write(ns, cmd->buf, off, len) < 0 ? NVME_SC_INTERNAL : 0, 0);
		return;
	}
	src = ns_map(ns, off, len);
	if (src && (!c->q.tx.ddgst || c->q.tx_fused)) {
		/* Straight from memory: a write overlapping it meanwhile may tear
		 * the data, as NVMe allows of overlapping commands in flight; a
		 * digest summed as the data is copied into the ring sums what left. */
		tcmd_send_data(c, cmd, src, (uint32_t)len, NVME_SC_SUCCESS, NULL);
		return;
	}
	cmd->buf = malloc(len);
	if (!cmd->buf) {
		tcmd_complete(c, cmd, NVME_SC_INTERNAL, 0);
		return;
	}
	if (src) {
		/* A digest must sum the bytes that leave: a copy of them, made in
		 * the same pass that sums them, which no write changes. */
		uint32_t crc = crc32c_final(crc32c_copy(CRC32C_INIT, cmd->buf, src, len));

		tcmd_send_data(c, cmd, cmd->buf, (uint32_t)len, NVME_SC_SUCCESS, &crc);
		return;
	}
	if (ns_read(ns, cmd->buf, off, len) < 0) {
		tcmd_complete(c, cmd, NVME_SC_INTERNAL, 0);
		return;
	}
	tcmd_send_data(c, cmd, cmd->buf, (uint32_t)len, NVME_SC_SUCCESS, NULL);
}

/* Dataset Management: deallocation zeroes its ranges (16 bytes each: attributes,
 * block count, first block); other hints are taken and ignored. */
static void dsm(struct tconn *c, struct tcmd *cmd)
{
	const struct ns *ns = &c->t->ns;
	uint32_t nr = (cdw(cmd, SQE_CDW10) & 0xff) + 1;
	int deallocate = (cdw(cmd, SQE_CDW11) & 0x4) != 0;

	if (cmd->len < nr * 16 || !cmd->buf) {
		tcmd_complete(c, cmd, NVME_SC_SGL_INVALID_DATA | NVME_SC_DNR, 0);
		return;
	}
	for (uint32_t i = 0; deallocate && i < nr; i++) {
		const uint8_t *r = cmd->buf + 16 * i;
		uint64_t off, len;

		if (range(ns, get_le64(r + 8), get_le32(r + 4), &off, &len) < 0) {
			tcmd_complete(c, cmd, NVME_SC_LBA_RANGE | NVME_SC_DNR, 0);
			return;
		}
		if (len && ns_zero(ns, off, len) < 0) {
			tcmd_complete(c, cmd, NVME_SC_INTERNAL, 0);
			return;
		}
	}
	tcmd_complete(c, cmd, NVME_SC_SUCCESS, 0);
}

void io_exec(struct tconn *c, struct tcmd *cmd)
{
	uint8_t opc = cmd->sqe.b[SQE_OPC];
	uint64_t off, len;

	if (opc != NVME_CMD_FLUSH && get_le32(cmd->sqe.b + SQE_NSID) != 1) {
		tcmd_complete(c, cmd, NVME_SC_INVALID_NS | NVME_SC_DNR, 0);
		return;
	}
	switch (opc) {
	case NVME_CMD_READ:
		rw(c, cmd, 0);
		return;
	case NVME_CMD_WRITE:
		rw(c, cmd, 1);
		return;
	case NVME_CMD_FLUSH:
		tcmd_complete(c, cmd, ns_flush(&c->t->ns) < 0 ? NVME_SC_INTERNAL : 0, 0);
		return;
	case NVME_CMD_WRITE_ZEROES:
		if (range(&c->t->ns, cdw(cmd, SQE_CDW10) | (uint64_t)cdw(cmd, SQE_CDW11) << 32,
			  (cdw(cmd, SQE_CDW12) & 0xffff) + 1, &off, &len) < 0) {
			tcmd_complete(c, cmd, NVME_SC_LBA_RANGE | NVME_SC_DNR, 0);
			return;
		}
		tcmd_complete(c, cmd, ns_zero(&c->t->ns, off, len) < 0 ? NVME_SC_INTERNAL : 0, 0);
		return;
	case NVME_CMD_DSM:
		dsm(c, cmd);
		return;
	}
	tcmd_complete(c, cmd, NVME_SC_INVALID_OPCODE | NVME_SC_DNR, 0);
}
