#include "region.h"

#include <string.h>

#include "chan.h"
#include "heap.h"
#include "listeners.h"
#include "slots.h"

static uint64_t page_up(uint64_t v)
{
	return (v + REGION_PAGE - 1) & ~(uint64_t)(REGION_PAGE - 1);
}

int region_layout(struct region_hdr *h, uint64_t size, uint32_t nslots, uint32_t nchans,
		  uint32_t nlisteners, uint32_t lease_ms)
{
	memset(h, 0, sizeof(*h));
	if (size < REGION_MIN_SIZE || size > REGION_MAX_SIZE || nslots < 2 ||
	    nslots > REGION_SLOTS_MAX || !nchans || nchans > REGION_CHANS_MAX || !nlisteners ||
	    nlisteners > REGION_LISTENERS_MAX || lease_ms < REGION_LEASE_MIN_MS ||
	    lease_ms > REGION_LEASE_MAX_MS)
		return -1;
	h->magic = REGION_MAGIC;
	h->version = REGION_VERSION;
	h->hdr_size = REGION_PAGE;
	h->size = size & ~(uint64_t)(REGION_PAGE - 1);
	h->lease_ms = lease_ms;
	h->nslots = nslots;
	h->nchans = nchans;
	h->nlisteners = nlisteners;
	h->granule = REGION_PAGE;
	h->slots_off = REGION_PAGE;
	h->chans_off = page_up(h->slots_off + (uint64_t)nslots * sizeof(struct region_slot));
	h->listeners_off = page_up(h->chans_off + (uint64_t)nchans * sizeof(struct chan_entry));
	h->ports_off = page_up(h->listeners_off + (uint64_t)nlisteners * sizeof(struct listener_entry));
	h->heap_desc_off = page_up(h->ports_off + sizeof(struct region_ports));
	if (h->heap_desc_off >= h->size)
		return -1;
	/* What is left: a descriptor and a granule each. */
	uint64_t left = h->size - h->heap_desc_off;
	uint64_t g = left / (REGION_PAGE + sizeof(uint64_t));
	while (g && page_up(h->heap_desc_off + g * sizeof(uint64_t)) + g * REGION_PAGE > h->size)
		g--;
	if (g < HEAP_MIN_GRANULES)
		return -1;
	h->heap_granules = g;
	h->heap_off = page_up(h->heap_desc_off + g * sizeof(uint64_t));
	return 0;
}

int region_layout_default(struct region_hdr *h, uint64_t size, uint32_t lease_ms)
{
	return region_layout(h, size, SLOTS_DEFAULT, CHANS_DEFAULT, LISTENERS_DEFAULT, lease_ms);
}

/* [off, off + len) lies in [lo, hi). */
static int inside(uint64_t off, uint64_t len, uint64_t lo, uint64_t hi)
{
	return off >= lo && off <= hi && len <= hi - off;
}

int region_check(const struct region_hdr *h, uint64_t mapped)
{
	if (h->magic == 0 && h->version == 0)
		return REGION_EBLANK;
	if (h->magic != REGION_MAGIC)
		return REGION_EMAGIC;
	if (h->version != REGION_VERSION)
		return REGION_EVERSION;
	if (atomic_load_explicit(&((struct region_hdr *)h)->state, memory_order_acquire) !=
	    REGION_READY)
		return REGION_EBLANK;
	if (h->hdr_size != REGION_PAGE || h->granule != REGION_PAGE || h->size < REGION_MIN_SIZE ||
	    h->size > REGION_MAX_SIZE || (h->size & (REGION_PAGE - 1)))
		return REGION_ELAYOUT;
	if (h->size > mapped)
		return REGION_ESMALL;
	if (h->nslots < 2 || h->nslots > REGION_SLOTS_MAX || !h->nchans ||
	    h->nchans > REGION_CHANS_MAX || !h->nlisteners || h->nlisteners > REGION_LISTENERS_MAX ||
	    h->lease_ms < REGION_LEASE_MIN_MS || h->lease_ms > REGION_LEASE_MAX_MS ||
	    h->heap_granules < HEAP_MIN_GRANULES || h->heap_granules > h->size / REGION_PAGE)
		return REGION_ELAYOUT;
	/* In this order, each after the one before, page-aligned, none past the end. */
	const struct {
		uint64_t off, len;
	} t[] = {
		{h->slots_off, (uint64_t)h->nslots * sizeof(struct region_slot)},
		{h->chans_off, (uint64_t)h->nchans * sizeof(struct chan_entry)},
		{h->listeners_off, (uint64_t)h->nlisteners * sizeof(struct listener_entry)},
		{h->ports_off, sizeof(struct region_ports)},
		{h->heap_desc_off, h->heap_granules * sizeof(uint64_t)},
		{h->heap_off, h->heap_granules * REGION_PAGE},
	};
	uint64_t from = REGION_PAGE;
	for (unsigned i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if ((t[i].off & (REGION_PAGE - 1)) || !inside(t[i].off, t[i].len, from, h->size))
			return REGION_ELAYOUT;
		from = t[i].off + t[i].len;
	}
	return REGION_OK;
}

const char *region_strerror(int err)
{
	switch (err) {
	case REGION_OK: return "ok";
	case REGION_EMAGIC: return "not a usmc region (its first page holds something else)";
	case REGION_EVERSION: return "a region of another format version";
	case REGION_ESMALL: return "smaller than its header claims (truncated?)";
	case REGION_ELAYOUT: return "its header's layout does not hold together";
	case REGION_EBLANK: return "not formatted";
	}
	return "unknown error";
}

void region_format(unsigned char *base, const struct region_hdr *layout, uint64_t format_id)
{
	struct region_hdr *h = (struct region_hdr *)base;

	/* The tables first: a peer that sees READY finds them empty. Only what
	 * the tables take is written: a large region's heap is left as it is,
	 * untouched pages costing nothing. */
	memset(base + layout->slots_off, 0, layout->heap_off - layout->slots_off);
	h->magic = layout->magic;
	h->version = layout->version;
	h->hdr_size = layout->hdr_size;
	h->size = layout->size;
	h->format_id = format_id;
	h->lease_ms = layout->lease_ms;
	h->nslots = layout->nslots;
	h->nchans = layout->nchans;
	h->nlisteners = layout->nlisteners;
	h->granule = layout->granule;
	h->slots_off = layout->slots_off;
	h->chans_off = layout->chans_off;
	h->listeners_off = layout->listeners_off;
	h->ports_off = layout->ports_off;
	h->heap_desc_off = layout->heap_desc_off;
	h->heap_off = layout->heap_off;
	h->heap_granules = layout->heap_granules;
	atomic_store_explicit(&h->state, REGION_READY, memory_order_release);
}

int region_claim_format(unsigned char *base, uint64_t me, uint64_t stale)
{
	struct region_hdr *h = (struct region_hdr *)base;
	uint32_t blank = REGION_BLANK;

	if (atomic_compare_exchange_strong(&h->state, &blank, REGION_FORMATTING)) {
		atomic_store(&h->formatter, me);
		return 1;
	}
	return blank == REGION_FORMATTING && stale &&
	       atomic_compare_exchange_strong(&h->formatter, &stale, me);
}

int region_attach(struct region *r, unsigned char *base, uint64_t mapped)
{
	struct region_hdr h;

	if (mapped < REGION_PAGE)
		return REGION_ESMALL;
	/* The state first: once READY, every word of the header was written. */
	uint32_t st = atomic_load_explicit(&((struct region_hdr *)base)->state, memory_order_acquire);
	memcpy(&h, base, sizeof(h));
	if (st != REGION_READY)
		return h.magic && h.magic != REGION_MAGIC ? REGION_EMAGIC : REGION_EBLANK;
	int e = region_check(&h, mapped);
	/* Only a header that passed: a process whose region was overwritten keeps
	 * the layout it had (ivs_lost), and its connections that end afterwards
	 * still find their slot where it was, not at offsets read from garbage. */
	if (e == REGION_OK) {
		r->base = base;
		r->mapped = mapped;
		r->h = h;
	}
	return e;
}

int region_changed(const struct region *r)
{
	const struct region_hdr *h = (const struct region_hdr *)r->base;

	return h->magic != REGION_MAGIC || h->format_id != r->h.format_id ||
	       atomic_load_explicit(&((struct region_hdr *)r->base)->state, memory_order_acquire) !=
		       REGION_READY;
}
