#include "heap.h"

#include <stdatomic.h>
#include <string.h>

#include "slots.h"

static _Atomic uint64_t *desc(const struct region *r)
{
	return (_Atomic uint64_t *)region_at(r, r->h.heap_desc_off);
}

static uint64_t granules(uint64_t bytes)
{
	return (bytes + REGION_PAGE - 1) / REGION_PAGE;
}

/* Gives back granules [from, to) claimed for owner. */
static void unclaim(_Atomic uint64_t *d, uint64_t from, uint64_t to, uint64_t owner)
{
	for (uint64_t i = from; i < to; i++) {
		uint64_t o = owner;
		atomic_compare_exchange_strong(&d[i], &o, 0);
	}
}

uint64_t heap_alloc(const struct region *r, uint64_t owner, uint64_t bytes, uint64_t *hint)
{
	_Atomic uint64_t *d = desc(r);
	uint64_t n = granules(bytes), total = r->h.heap_granules;

	if (!n || n > total || !owner)
		return 0;
	uint64_t start = *hint < total ? *hint : 0;
	/* Twice round at most: once from the hint, once more for what freed up
	 * behind it meanwhile. */
	for (uint64_t scanned = 0, i = start; scanned < 2 * total;) {
		if (i + n > total) {
			scanned += total - i;
			i = 0;
			continue;
		}
		uint64_t k = 0;
		while (k < n && !atomic_load_explicit(&d[i + k], memory_order_relaxed))
			k++;
		if (k < n) {
			scanned += k + 1;
			i += k + 1;
			continue;
		}
		for (k = 0; k < n; k++) {
			uint64_t free_ = 0;
			if (!atomic_compare_exchange_strong(&d[i + k], &free_, owner))
				break;
		}
		if (k == n) {
			*hint = i + n;
			return r->h.heap_off + i * REGION_PAGE;
		}
		/* Another allocator took granule i + k first. */
		unclaim(d, i, i + k, owner);
		scanned += k + 1;
		i += k + 1;
	}
	return 0;
}

/* The granule range of [off, off + bytes), or -1 when it is not one in the heap. */
static int64_t first_granule(const struct region *r, uint64_t off, uint64_t bytes, uint64_t *n)
{
	uint64_t heap_end = r->h.heap_off + r->h.heap_granules * REGION_PAGE;

	*n = granules(bytes);
	if (off < r->h.heap_off || off >= heap_end || (off - r->h.heap_off) % REGION_PAGE || !*n ||
	    *n > (heap_end - off) / REGION_PAGE)
		return -1;
	return (int64_t)((off - r->h.heap_off) / REGION_PAGE);
}

void heap_free(const struct region *r, uint64_t owner, uint64_t off, uint64_t bytes)
{
	uint64_t n;
	int64_t g = first_granule(r, off, bytes, &n);

	if (g >= 0)
		unclaim(desc(r), (uint64_t)g, (uint64_t)g + n, owner);
}

uint64_t heap_free_owner(const struct region *r, uint64_t owner)
{
	_Atomic uint64_t *d = desc(r);
	uint64_t freed = 0;

	for (uint64_t i = 0; i < r->h.heap_granules; i++) {
		uint64_t o = owner;
		if (atomic_load_explicit(&d[i], memory_order_relaxed) == owner &&
		    atomic_compare_exchange_strong(&d[i], &o, 0))
			freed++;
	}
	return freed;
}

int heap_owned(const struct region *r, uint64_t owner, uint64_t off, uint64_t bytes)
{
	_Atomic uint64_t *d = desc(r);
	uint64_t n;
	int64_t g = first_granule(r, off, bytes, &n);

	if (g < 0 || !owner)
		return 0;
	for (uint64_t i = 0; i < n; i++)
		if (atomic_load_explicit(&d[(uint64_t)g + i], memory_order_relaxed) != owner)
			return 0;
	return 1;
}

void heap_usage(const struct region *r, uint64_t *used, uint64_t *by_slot)
{
	_Atomic uint64_t *d = desc(r);

	*used = 0;
	if (by_slot)
		memset(by_slot, 0, r->h.nslots * sizeof(*by_slot));
	for (uint64_t i = 0; i < r->h.heap_granules; i++) {
		uint64_t o = atomic_load_explicit(&d[i], memory_order_relaxed);
		if (!o)
			continue;
		(*used)++;
		if (by_slot && slot_key_valid(r, o))
			by_slot[slot_of_key(o)]++;
	}
}
