#include "socks.h"

#include <string.h>

const struct socktab_hdr *socks_table(const struct procfile *f)
{
	const struct socktab_hdr *h = f->map;

	if (h->magic != SOCKTAB_MAGIC || h->version != SOCKTAB_VERSION ||
	    h->slot_size != sizeof(struct socktab_slot) || h->nslots > SOCKTAB_MAX_SLOTS ||
	    f->size != sizeof(*h) + (size_t)h->nslots * sizeof(struct socktab_slot) || h->pid <= 0)
		return NULL;
	return h;
}

uint32_t socks_used(const struct socktab_hdr *h)
{
	uint32_t used = atomic_load((_Atomic uint32_t *)&h->used);
	return used < h->nslots ? used : h->nslots;
}

int socks_slot(const struct socktab_hdr *h, uint32_t i, struct socktab_slot *out)
{
	const struct socktab_slot *sl = (const struct socktab_slot *)(h + 1) + i;
	_Atomic uint32_t *seq = (_Atomic uint32_t *)&sl->seq;

	if (i >= socks_used(h))
		return 0;
	for (int tries = 0; tries < 100; tries++) {
		uint32_t a = atomic_load_explicit(seq, memory_order_acquire);
		if (a & 1)
			continue;
		memcpy(out, (const void *)sl, sizeof(*out));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(seq, memory_order_relaxed) != a)
			continue;
		return out->state != SOCKTAB_FREE && out->state < SOCKTAB_STATES &&
		       out->decline < DECL_MAX;
	}
	return 0;
}
