/* Controllers: a Connect on an admin queue makes one (dynamic controller ids
 * only), a Connect on an I/O queue joins it; properties stand in for the
 * registers a host enables and shuts the controller down through. */
#include "target.h"

#include <stdlib.h>
#include <string.h>

/* A Connect's invalid parameter: where it was, as the result reports it (bit
 * 16: in the data; else in the command). */
#define IN_DATA(off) ((1u << 16) | (off))

static int nqn_valid(const uint8_t *p)
{
	return p[0] && memchr(p, 0, NVMF_NQN_SIZE) != NULL;
}

static struct tctrl *ctrl_new(struct target *t, const uint8_t *data, int disc, uint32_t kato)
{
	struct tctrl *ctrl = calloc(1, sizeof(*ctrl));

	if (!ctrl)
		return NULL;
	ctrl->t = t;
	ctrl->disc = disc;
	ctrl->kato_ms = kato;
	ctrl->refs = 1;
	memcpy(ctrl->hostnqn, data + CONNECT_HOSTNQN, NVMF_NQN_SIZE);
	memcpy(ctrl->hostid, data + CONNECT_HOSTID, sizeof(ctrl->hostid));
	pthread_mutex_lock(&t->lock);
	ctrl->cntlid = t->next_cntlid;
	/* Dynamic ids run 1..0xffef; past that they start over. */
	t->next_cntlid = t->next_cntlid >= 0xffef ? 1 : t->next_cntlid + 1;
	ctrl->next = t->ctrls;
	t->ctrls = ctrl;
	pthread_mutex_unlock(&t->lock);
	return ctrl;
}

/* An I/O queue's controller: the one with its id, alive, of the same host. */
static struct tctrl *ctrl_join(struct target *t, const uint8_t *data, uint16_t qid, uint16_t *status)
{
	uint16_t id = get_le16(data + CONNECT_CNTLID);
	struct tctrl *ctrl;

	pthread_mutex_lock(&t->lock);
	for (ctrl = t->ctrls; ctrl; ctrl = ctrl->next)
		if (ctrl->cntlid == id && !atomic_load(&ctrl->dead) && !ctrl->disc &&
		    !memcmp(ctrl->hostnqn, data + CONNECT_HOSTNQN, NVMF_NQN_SIZE))
			break;
	if (!ctrl) {
		*status = NVME_SC_CONNECT_INVALID_PARAM | NVME_SC_DNR;
	} else if (ctrl->io_queue_used & (1ull << (qid - 1))) {
		*status = NVME_SC_CMD_SEQ_ERROR | NVME_SC_DNR;
		ctrl = NULL;
	} else {
		ctrl->io_queue_used |= 1ull << (qid - 1);
		ctrl->refs++;
	}
	pthread_mutex_unlock(&t->lock);
	return ctrl;
}

void ctrl_connect(struct tconn *c, struct tcmd *cmd)
{
	const uint8_t *sqe = cmd->sqe.b, *data = cmd->buf;
	uint16_t qid = get_le16(sqe + SQE_CONNECT_QID), sqsize = get_le16(sqe + SQE_CONNECT_SQSIZE);
	uint16_t status = NVME_SC_CONNECT_INVALID_PARAM | NVME_SC_DNR;
	uint32_t where = 0;
	int disc;

	if (c->ctrl) {
		tcmd_complete(c, cmd, NVME_SC_CMD_SEQ_ERROR | NVME_SC_DNR, 0);
		return;
	}
	if (!data || cmd->len < NVMF_CONNECT_DATA) {
		tcmd_complete(c, cmd, NVME_SC_SGL_INVALID_DATA | NVME_SC_DNR, 0);
		return;
	}
	if (get_le16(sqe + SQE_CONNECT_RECFMT) != 0) {
		tcmd_complete(c, cmd, NVME_SC_CONNECT_FORMAT | NVME_SC_DNR, 0);
		return;
	}
	disc = !strncmp((const char *)data + CONNECT_SUBNQN, NVME_DISC_SUBSYS_NAME, NVMF_NQN_SIZE);
	if (!nqn_valid(data + CONNECT_SUBNQN) ||
	    (!disc && strncmp((const char *)data + CONNECT_SUBNQN, c->t->nqn, NVMF_NQN_SIZE)))
		where = IN_DATA(CONNECT_SUBNQN);
	else if (!nqn_valid(data + CONNECT_HOSTNQN))
		where = IN_DATA(CONNECT_HOSTNQN);
	else if (sqsize < 1 || sqsize > (qid ? TGT_MQES : TGT_AQ_MAX - 1))
		where = SQE_CONNECT_SQSIZE;
	else if (qid > TGT_MAX_IO_QUEUES || (qid && disc))
		where = SQE_CONNECT_QID;
	else if (!qid && get_le16(data + CONNECT_CNTLID) != NVMF_CNTLID_DYNAMIC)
		where = IN_DATA(CONNECT_CNTLID);
	if (where) {
		tcmd_complete(c, cmd, status, where);
		return;
	}
	if (qid) {
		c->ctrl = ctrl_join(c->t, data, qid, &status);
		if (!c->ctrl) {
			tcmd_complete(c, cmd, status, IN_DATA(CONNECT_CNTLID));
			return;
		}
	} else {
		c->ctrl = ctrl_new(c->t, data, disc, get_le32(sqe + SQE_CONNECT_KATO));
		if (!c->ctrl) {
			tcmd_complete(c, cmd, NVME_SC_INTERNAL, 0);
			return;
		}
	}
	c->qid = qid;
	c->sqflow_off = (sqe[SQE_CONNECT_CATTR] & NVMF_CATTR_DISABLE_SQFLOW) != 0;
	tconn_resize(c, sqsize);
	if (c->t->o.verbose)
		tlog(c, "connected to controller %u (%s) of %s, %u entries%s", c->ctrl->cntlid,
		     c->ctrl->disc ? "discovery" : "I/O", c->ctrl->hostnqn, sqsize + 1u,
		     c->sqflow_off ? ", SQ flow control off" : "");
	tcmd_complete(c, cmd, NVME_SC_SUCCESS, c->ctrl->cntlid);
}

void ctrl_release(struct tconn *c)
{
	struct target *t = c->t;
	struct tctrl *ctrl = c->ctrl, **p;

	if (!ctrl)
		return;
	pthread_mutex_lock(&t->lock);
	if (c->qid)
		ctrl->io_queue_used &= ~(1ull << (c->qid - 1));
	else
		atomic_store(&ctrl->dead, 1); /* its I/O queues follow */
	if (--ctrl->refs == 0) {
		for (p = &t->ctrls; *p != ctrl; p = &(*p)->next)
			;
		*p = ctrl->next;
		free(ctrl);
	}
	pthread_mutex_unlock(&t->lock);
	c->ctrl = NULL;
}

/* MQES, contiguous queues required, a 7.5 s ready timeout, the NVM command set.
 * The discovery controller's too: hosts size its one queue by it, and Connect
 * holds admin queues to TGT_AQ_MAX anyway. */
static uint64_t cap(void)
{
	return TGT_MQES | (1ull << 16) | (15ull << 24) | (1ull << 37);
}

void ctrl_property(struct tconn *c, struct tcmd *cmd)
{
	struct tctrl *ctrl = c->ctrl;
	const uint8_t *sqe = cmd->sqe.b;
	int wide = sqe[SQE_PROP_ATTRIB] & 1;
	uint32_t off = get_le32(sqe + SQE_PROP_OFFSET);
	uint64_t v = 0;

	if (sqe[SQE_FCTYPE] == NVMF_PROP_SET) {
		uint32_t cc = (uint32_t)get_le64(sqe + SQE_PROP_VALUE);

		if (off != NVME_REG_CC || wide) {
			tcmd_complete(c, cmd, NVME_SC_INVALID_FIELD | NVME_SC_DNR, 0);
			return;
		}
		if ((cc & NVME_CC_ENABLE) && !(ctrl->cc & NVME_CC_ENABLE))
			ctrl->csts |= NVME_CSTS_RDY;
		if (!(cc & NVME_CC_ENABLE) && (ctrl->cc & NVME_CC_ENABLE))
			ctrl->csts &= ~NVME_CSTS_RDY;
		if (cc & NVME_CC_SHN_MASK)
			ctrl->csts |= NVME_CSTS_SHST_CMPLT;
		else
			ctrl->csts &= ~NVME_CSTS_SHST_CMPLT;
		ctrl->cc = cc;
		tcmd_complete(c, cmd, NVME_SC_SUCCESS, 0);
		return;
	}
	if (off == NVME_REG_CAP && wide)
		v = cap();
	else if (off == NVME_REG_VS && !wide)
		v = NVME_VS_1_3;
	else if (off == NVME_REG_CC && !wide)
		v = ctrl->cc;
	else if (off == NVME_REG_CSTS && !wide)
		v = ctrl->csts;
	else {
		tcmd_complete(c, cmd, NVME_SC_INVALID_FIELD | NVME_SC_DNR, 0);
		return;
	}
	tcmd_complete(c, cmd, NVME_SC_SUCCESS, v);
}
