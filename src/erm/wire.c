#include "wire.h"

#include "usmc/erm.h"

#define REMOTE_RIGHTS (SMC_ACCESS_REMOTE_READ | SMC_ACCESS_REMOTE_WRITE)

int erm_area_check(const struct erm_area *a)
{
	return atomic_load_explicit(&a->magic, memory_order_relaxed) == ERM_AREA_MAGIC &&
			       atomic_load_explicit(&a->version, memory_order_relaxed) == ERM_AREA_VERSION
		       ? 0
		       : -1;
}

int erm_slot_read(const struct erm_slot *s, struct erm_rslot *out)
{
	out->state = atomic_load_explicit(&s->state, memory_order_relaxed);
	out->access = atomic_load_explicit(&s->access, memory_order_relaxed);
	out->kind = atomic_load_explicit(&s->kind, memory_order_relaxed);
	out->fd_index = atomic_load_explicit(&s->fd_index, memory_order_relaxed);
	out->base = atomic_load_explicit(&s->base, memory_order_relaxed);
	out->len = atomic_load_explicit(&s->len, memory_order_relaxed);
	if (!out->access || (out->access & ~REMOTE_RIGHTS) || !out->len ||
	    !erm_within(out->base, out->len, ERM_REGION_MAX))
		return -1;
	if (out->kind == ERM_MEM_SHM)
		return out->fd_index && out->fd_index < ERM_FDS ? 0 : -1;
	/* In the owner's address space: not at page zero, and fd_index unused. */
	return out->kind == ERM_MEM_VM && !out->fd_index && out->base ? 0 : -1;
}

int erm_event_read(const struct erm_event *e, struct erm_rev *out)
{
	out->type = atomic_load_explicit(&e->type, memory_order_relaxed);
	out->memid = atomic_load_explicit(&e->memid, memory_order_relaxed);
	out->gen = atomic_load_explicit(&e->gen, memory_order_relaxed);
	out->src_memid = atomic_load_explicit(&e->src_memid, memory_order_relaxed);
	out->offset = atomic_load_explicit(&e->offset, memory_order_relaxed);
	out->len = atomic_load_explicit(&e->len, memory_order_relaxed);
	out->tag = atomic_load_explicit(&e->tag, memory_order_relaxed);
	if ((out->type != SMC_ERM_CMD_COPY && out->type != SMC_ERM_CMD_READ) ||
	    out->memid >= ERM_MRS || out->src_memid < 0 || (uint32_t)out->src_memid >= ERM_MRS ||
	    !out->len || !erm_within(out->offset, out->len, ERM_REGION_MAX))
		return -1;
	return 0;
}

int erm_evq_room(uint64_t prod, uint64_t cons, uint64_t *room)
{
	if (cons > prod || prod - cons > ERM_EVQ)
		return -1;
	*room = ERM_EVQ - (prod - cons);
	return 0;
}
