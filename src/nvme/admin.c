/* Admin commands of the NVM subsystem's controllers and of the discovery
 * controller: what Linux's host and nvme-cli ask for on connecting, scanning
 * and discovering, and keep-alive. */
#include "target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AERL 3 /* asynchronous event requests held, 0's based */

static uint32_t cdw(const struct tcmd *cmd, unsigned off)
{
	return get_le32(cmd->sqe.b + off);
}

static void put_str(uint8_t *b, const char *s, size_t n)
{
	size_t l = strlen(s);

	memset(b, ' ', n);
	memcpy(b, s, l < n ? l : n);
}

static void identify_ctrl(const struct tconn *c, uint8_t *id)
{
	const struct target *t = c->t;
	int disc = c->ctrl->disc;

	put_str(id + IDC_SN, t->serial, 20);
	put_str(id + IDC_MN, disc ? "usmc NVMe/TCP discovery" : "usmc NVMe/TCP target", 40);
	put_str(id + IDC_FR, "0.1", 8);
	id[IDC_RAB] = 6;
	id[IDC_MDTS] = disc ? 0 : TGT_MDTS;
	put_le16(id + IDC_CNTLID, c->ctrl->cntlid);
	put_le32(id + IDC_VER, NVME_VS_1_3);
	id[IDC_CNTRLTYPE] = disc ? NVME_CTRL_DISC : NVME_CTRL_IO;
	id[IDC_ACL] = 3;
	id[IDC_AERL] = AERL;
	id[IDC_FRMW] = 0x3;  /* one firmware slot, read-only */
	id[IDC_LPA] = 0x4;   /* log pages read at an offset */
	put_le16(id + IDC_KAS, 10); /* keep-alive granularity: 100 ms units */
	id[IDC_SQES] = 0x66;
	id[IDC_CQES] = 0x44;
	put_le16(id + IDC_MAXCMD, TGT_MQES + 1);
	put_le32(id + IDC_NN, disc ? 0 : 1);
	if (!disc) {
		put_le16(id + IDC_ONCS, NVME_ONCS_DSM | NVME_ONCS_WRITE_ZEROES);
		id[IDC_VWC] = 1;
	}
	/* SGLs, with offsets into in-capsule data */
	put_le32(id + IDC_SGLS, 1u | (1u << 20));
	snprintf((char *)id + IDC_SUBNQN, NVMF_NQN_SIZE, "%s", disc ? NVME_DISC_SUBSYS_NAME : t->nqn);
	put_le32(id + IDC_IOCCSZ, (NVME_SQE_SIZE + TGT_INCAPSULE) / 16);
	put_le32(id + IDC_IORCSZ, NVME_CQE_SIZE / 16);
	id[IDC_MSDBD] = 1;
}

static void identify_ns(const struct ns *ns, uint8_t *id)
{
	put_le64(id + IDN_NSZE, ns_blocks(ns));
	put_le64(id + IDN_NCAP, ns_blocks(ns));
	put_le64(id + IDN_NUSE, ns_blocks(ns));
	id[IDN_DLFEAT] = 0x1; /* deallocated blocks read as zeroes */
	memcpy(id + IDN_NGUID, ns->nguid, sizeof(ns->nguid));
	id[IDN_LBAF0 + 2] = (uint8_t)ns->lba_shift;
}

/* Namespace identification descriptors: its NGUID, the same bytes as a UUID,
 * and its command set (NVM). */
static void ns_descs(const struct ns *ns, uint8_t *d)
{
	d[0] = NVME_NIDT_NGUID;
	d[1] = 16;
	memcpy(d + 4, ns->nguid, 16);
	d += 20;
	d[0] = NVME_NIDT_UUID;
	d[1] = 16;
	memcpy(d + 4, ns->nguid, 16);
	d[4 + 6] = (uint8_t)((d[4 + 6] & 0x0f) | 0x40); /* a version 4 UUID */
	d[4 + 8] = (uint8_t)((d[4 + 8] & 0x3f) | 0x80);
	d += 20;
	d[0] = NVME_NIDT_CSI;
	d[1] = 1;
}

/* Sends the first cmd->len bytes of a page built in buf (which becomes the
 * command's). */
static void send_page(struct tconn *c, struct tcmd *cmd, uint8_t *buf, uint32_t size)
{
	free(cmd->buf);
	cmd->buf = buf;
	tcmd_send_data(c, cmd, buf, cmd->len < size ? cmd->len : size, NVME_SC_SUCCESS, NULL);
}

static void identify(struct tconn *c, struct tcmd *cmd)
{
	uint8_t cns = (uint8_t)cdw(cmd, SQE_CDW10), csi = (uint8_t)(cdw(cmd, SQE_CDW11) >> 24);
	uint32_t nsid = get_le32(cmd->sqe.b + SQE_NSID);
	int disc = c->ctrl->disc;
	uint8_t *id;

	if (cmd->len < NVME_IDENTIFY_SIZE) {
		tcmd_complete(c, cmd, NVME_SC_SGL_INVALID_DATA | NVME_SC_DNR, 0);
		return;
	}
	id = calloc(1, NVME_IDENTIFY_SIZE);
	if (!id) {
		tcmd_complete(c, cmd, NVME_SC_INTERNAL, 0);
		return;
	}
	switch (disc ? (cns == NVME_ID_CNS_CTRL ? cns : 0xff) : cns) {
	case NVME_ID_CNS_CTRL:
		identify_ctrl(c, id);
		break;
	case NVME_ID_CNS_NS:
	case NVME_ID_CNS_NS_DESC_LIST:
	case NVME_ID_CNS_CS_NS:
		if (nsid != 1) {
			free(id);
			tcmd_complete(c, cmd, NVME_SC_INVALID_NS | NVME_SC_DNR, 0);
			return;
		}
		if (cns == NVME_ID_CNS_NS)
			identify_ns(&c->t->ns, id);
		else if (cns == NVME_ID_CNS_NS_DESC_LIST)
			ns_descs(&c->t->ns, id);
		else if (csi != 0)
			goto invalid;
		break;
	case NVME_ID_CNS_NS_ACTIVE_LIST:
		/* Namespaces above nsid: ours is 1. */
		if (nsid < 1)
			put_le32(id, 1);
		break;
	case NVME_ID_CNS_CS_CTRL:
		if (csi != 0)
			goto invalid;
		break;
	default:
		goto invalid;
	}
	send_page(c, cmd, id, NVME_IDENTIFY_SIZE);
	return;
invalid:
	free(id);
	tcmd_complete(c, cmd, NVME_SC_INVALID_FIELD | NVME_SC_DNR, 0);
}

static void get_log_page(struct tconn *c, struct tcmd *cmd)
{
	uint32_t d10 = cdw(cmd, SQE_CDW10), d11 = cdw(cmd, SQE_CDW11);
	uint8_t lid = (uint8_t)d10;
	uint64_t numd = ((uint64_t)(d11 & 0xffff) << 16 | d10 >> 16) + 1;
	uint64_t off = cdw(cmd, SQE_CDW12) | (uint64_t)cdw(cmd, SQE_CDW13) << 32;
	uint8_t *page;

	if (numd * 4 > cmd->len || off & 3) {
		tcmd_complete(c, cmd, NVME_SC_INVALID_FIELD | NVME_SC_DNR, 0);
		return;
	}
	page = calloc(1, numd * 4);
	if (!page) {
		tcmd_complete(c, cmd, NVME_SC_INTERNAL, 0);
		return;
	}
	switch (lid) {
	case NVME_LOG_DISC:
		if (!c->ctrl->disc)
			goto invalid;
		discovery_log(c, page, off, (uint32_t)(numd * 4));
		break;
	case NVME_LOG_FW_SLOT: {
		/* Slot 1 active, with its revision. */
		uint8_t full[16] = {1, 0, 0, 0, 0, 0, 0, 0, '0', '.', '1', ' ', ' ', ' ', ' ', ' '};

		if (off < sizeof(full))
			memcpy(page, full + off,
			       sizeof(full) - off < numd * 4 ? sizeof(full) - off : numd * 4);
		break;
	}
	case NVME_LOG_ERROR:
	case NVME_LOG_SMART:
	case NVME_LOG_CHANGED_NS:
		if (c->ctrl->disc)
			goto invalid;
		break; /* nothing to tell */
	default:
		goto invalid;
	}
	send_page(c, cmd, page, (uint32_t)(numd * 4));
	return;
invalid:
	free(page);
	tcmd_complete(c, cmd, NVME_SC_INVALID_LOG_PAGE | NVME_SC_DNR, 0);
}

static void features(struct tconn *c, struct tcmd *cmd, int set)
{
	struct tctrl *ctrl = c->ctrl;
	uint8_t fid = (uint8_t)cdw(cmd, SQE_CDW10);
	uint32_t v = cdw(cmd, SQE_CDW11), result = 0;

	switch (fid) {
	case NVME_FEAT_NUM_QUEUES:
		if (ctrl->disc)
			goto invalid;
		if (set) {
			uint32_t nsq = (v & 0xffff) + 1, ncq = (v >> 16) + 1;

			if ((v & 0xffff) == 0xffff || v >> 16 == 0xffff)
				goto invalid;
			nsq = nsq < ncq ? nsq : ncq;
			ctrl->nr_io_queues = (uint16_t)(nsq < TGT_MAX_IO_QUEUES ? nsq : TGT_MAX_IO_QUEUES);
		}
		result = (uint32_t)(ctrl->nr_io_queues - 1u) << 16 | (ctrl->nr_io_queues - 1u);
		if (!ctrl->nr_io_queues)
			result = (TGT_MAX_IO_QUEUES - 1u) << 16 | (TGT_MAX_IO_QUEUES - 1u);
		break;
	case NVME_FEAT_ASYNC_EVENT:
		if (set)
			ctrl->aec = v;
		result = ctrl->aec;
		break;
	case NVME_FEAT_KATO:
		if (set)
			ctrl->kato_ms = v;
		result = ctrl->kato_ms;
		break;
	case NVME_FEAT_VOLATILE_WC:
		if (ctrl->disc)
			goto invalid;
		result = 1; /* enabled, always */
		break;
	default:
		goto invalid;
	}
	tcmd_complete(c, cmd, NVME_SC_SUCCESS, result);
	return;
invalid:
	tcmd_complete(c, cmd, NVME_SC_INVALID_FIELD | NVME_SC_DNR, 0);
}

void admin_exec(struct tconn *c, struct tcmd *cmd)
{
	switch (cmd->sqe.b[SQE_OPC]) {
	case NVME_ADMIN_IDENTIFY:
		identify(c, cmd);
		return;
	case NVME_ADMIN_GET_LOG_PAGE:
		get_log_page(c, cmd);
		return;
	case NVME_ADMIN_SET_FEATURES:
		features(c, cmd, 1);
		return;
	case NVME_ADMIN_GET_FEATURES:
		features(c, cmd, 0);
		return;
	case NVME_ADMIN_KEEP_ALIVE:
		tcmd_complete(c, cmd, NVME_SC_SUCCESS, 0);
		return;
	case NVME_ADMIN_ABORT:
		tcmd_complete(c, cmd, NVME_SC_SUCCESS, 1); /* not aborted: it runs to the end */
		return;
	case NVME_ADMIN_ASYNC_EVENT:
		/* Held: nothing here ever changes, so it completes never, and goes
		 * with the queue. */
		if (c->ctrl->aers > AERL) {
			tcmd_complete(c, cmd, NVME_SC_ASYNC_LIMIT | NVME_SC_DNR, 0);
			return;
		}
		c->ctrl->aers++;
		cmd->state = TC_HELD;
		return;
	}
	tcmd_complete(c, cmd, NVME_SC_INVALID_OPCODE | NVME_SC_DNR, 0);
}
