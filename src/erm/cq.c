/* Completions. A connection has two rings of them, each with one producer:
 *
 *   ours:   completions of our own commands, in our memory, posted by the
 *           command as it ends (cmd.c);
 *   events: the peer's commands that asked for a remote completion, in our
 *           area (wire.h), posted by the peer's process.
 *
 * A reader takes ours first, then the events, and turns each event into a
 * completion only after checking it against our registrations: the peer says
 * which region (memid and generation), where and how much; the address comes
 * from our own table. An event naming a region deregistered since carries
 * ESTALE and no address; one no honest peer writes, EPROTO. An event is there
 * once its entry's sequence number is the reader's cursor plus one: nothing a
 * peer writes can make the reader take more than the ring, or skip.
 *
 * Readers: recvmsg(MSG_ERRQUEUE) (erm_recv_errqueue()) and usmc_erm_poll(),
 * which reads both rings without a system call. poll() and epoll report
 * POLLERR while either ring holds something, as for MSG_ZEROCOPY's
 * completions. */
#include "erm.h"

#include <errno.h>
#include <string.h>


uint32_t erm_cq_room(struct erm_conn *e)
{
	uint64_t prod = atomic_load_explicit(&e->local_prod, memory_order_relaxed);

	return ERM_LOCAL_CQ - (uint32_t)(prod - atomic_load_explicit(&e->local_cons,
								      memory_order_acquire));
}

void erm_cq_post(struct erm_conn *e, const struct smc_rmem_compl_event *ev)
{
	uint64_t prod = atomic_load_explicit(&e->local_prod, memory_order_relaxed);

	e->local[prod % ERM_LOCAL_CQ] = *ev;
	atomic_store_explicit(&e->local_prod, prod + 1, memory_order_release);
}

int erm_cq_pending(struct erm_conn *e)
{
	struct erm_area *a = atomic_load_explicit(&e->area, memory_order_acquire);

	if (atomic_load_explicit(&e->local_prod, memory_order_acquire) !=
	    atomic_load_explicit(&e->local_cons, memory_order_relaxed))
		return 1;
	if (!a)
		return 0;
	uint64_t cons = atomic_load_explicit(&a->ev_cons, memory_order_relaxed);
	return erm_event_ready(&a->ev[cons % ERM_EVQ], cons);
}

/* The completion an event of the peer's stands for, on our region as it is
 * registered now. Called with e->lock held. */
static void from_event(const struct erm_conn *e, const struct erm_rev *v,
		       struct smc_rmem_compl_event *out)
{
	const struct erm_mr *mr = erm_mr(e, (int32_t)v->memid);
	uint32_t right = v->type == SMC_ERM_CMD_COPY ? SMC_ACCESS_REMOTE_WRITE : SMC_ACCESS_REMOTE_READ;

	*out = (struct smc_rmem_compl_event){
		.event = v->type, .flags = SMC_ERM_COMPL_REMOTE, .memid = (int32_t)v->memid,
		.tag = v->tag, .copy = {NULL, v->len}, .offset = v->offset,
		.peer_memid = v->src_memid,
	};
	if (!mr || mr->gen != v->gen)
		out->status = ESTALE;
	else if (!(mr->access & right) || !erm_within(v->offset, v->len, mr->len))
		out->status = EPROTO;
	else
		out->copy.addr = mr->addr + v->offset;
}

/* Up to max events of the peer's. Called with e->cq_lock held. */
static int take_events(struct erm_conn *e, struct smc_rmem_compl_event *out, int max)
{
	struct erm_area *a = atomic_load_explicit(&e->area, memory_order_acquire);
	int n = 0;

	if (!a)
		return 0;
	uint64_t cons = atomic_load_explicit(&a->ev_cons, memory_order_relaxed);
	if (!erm_event_ready(&a->ev[cons % ERM_EVQ], cons))
		return 0;
	pthread_mutex_lock(&e->lock);
	/* News from the peer: it is there, no need to look at its channel. */
	e->probed_ns = erm_coarse_ns();
	for (; n < max && erm_event_ready(&a->ev[cons % ERM_EVQ], cons); n++, cons++) {
		struct erm_rev v;
		if (erm_event_read(&a->ev[cons % ERM_EVQ], &v) < 0)
			out[n] = (struct smc_rmem_compl_event){
				.event = SMC_ERM_CMD_COPY, .status = EPROTO,
				.flags = SMC_ERM_COMPL_REMOTE, .memid = -1, .peer_memid = -1};
		else
			from_event(e, &v, &out[n]);
	}
	pthread_mutex_unlock(&e->lock);
	atomic_store_explicit(&a->ev_cons, cons, memory_order_release);
	return n;
}

int erm_cq_take(struct erm_conn *e, struct smc_rmem_compl_event *out, int max)
{
	int n = 0;

	pthread_mutex_lock(&e->cq_lock);
	uint64_t cons = atomic_load_explicit(&e->local_cons, memory_order_relaxed);
	uint64_t prod = atomic_load_explicit(&e->local_prod, memory_order_acquire);
	for (; n < max && cons != prod; n++, cons++)
		out[n] = e->local[cons % ERM_LOCAL_CQ];
	atomic_store_explicit(&e->local_cons, cons, memory_order_release);
	if (n < max)
		n += take_events(e, out + n, max - n);
	pthread_mutex_unlock(&e->cq_lock);
	return n;
}

/* Completions one recvmsg() takes at most. */
#define ERRQUEUE_BATCH 64

ssize_t erm_recv_errqueue(struct usock *s, struct msghdr *m)
{
	struct erm_conn *e = atomic_load_explicit(&s->ext, memory_order_acquire);
	struct smc_rmem_compl_event ev[ERRQUEUE_BATCH];
	size_t room = m->msg_control ? m->msg_controllen / CMSG_SPACE(sizeof(ev[0])) : 0;

	if (!e || !erm_cq_pending(e)) {
		errno = EAGAIN;
		return -1;
	}
	m->msg_namelen = 0;
	if (!room) {
		/* Nothing fits: the completions stay, and the caller is told. */
		m->msg_controllen = 0;
		m->msg_flags = MSG_ERRQUEUE | MSG_CTRUNC;
		return 0;
	}
	int n = erm_cq_take(e, ev, room < ERRQUEUE_BATCH ? (int)room : ERRQUEUE_BATCH);
	if (!n) {
		errno = EAGAIN;
		return -1;
	}
	memset(m->msg_control, 0, (size_t)n * CMSG_SPACE(sizeof(ev[0])));
	struct cmsghdr *c = CMSG_FIRSTHDR(m);
	for (int i = 0; i < n; i++, c = CMSG_NXTHDR(m, c)) {
		c->cmsg_level = SOL_SMC;
		c->cmsg_type = SMC_ERM_CMD_COMPL;
		c->cmsg_len = CMSG_LEN(sizeof(ev[0]));
		memcpy(CMSG_DATA(c), &ev[i], sizeof(ev[0]));
	}
	m->msg_controllen = (size_t)n * CMSG_SPACE(sizeof(ev[0]));
	m->msg_flags = MSG_ERRQUEUE;
	return 0;
}
