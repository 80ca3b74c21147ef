/* The region: memory shared by the kernels (virtual machines, or the host's
 * processes mapping the same file) attached to one ivshmem device, and
 * everything usmc keeps in it. Nothing else is shared between them: no
 * directory, no socket, no descriptor, no futex.
 *
 *   header        this struct, one page: what the rest is and where
 *   peer table    one slot per attached process tree (slots.h)
 *   channels      one per link group: message rings and doorbell queues (chan.h)
 *   listeners     the registry of listeners (listeners.h)
 *   ports         per TCP port: listeners registered, changes (listeners.h)
 *   heap          granules for segments and channel rings, each owned (heap.h)
 *
 * Every peer can write every byte of it: whatever is read from it is untrusted.
 * The layout is read once, checked (region_check) and kept privately; later
 * reads of shared words are each checked where they are used. A region whose
 * first page is zero is formatted by its first user. */
#ifndef USMC_REGION_H
#define USMC_REGION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define REGION_MAGIC 0x314e4752434d5355ull /* "USMCRGN1" */
#define REGION_VERSION 1u
#define REGION_PAGE 4096u

enum region_state { REGION_BLANK = 0, REGION_FORMATTING = 1, REGION_READY = 2 };

/* Limits a header must respect; region_check() enforces them. */
#define REGION_SLOTS_MAX 255u        /* a key's slot number is 8 bits */
#define REGION_CHANS_MAX 65536u
#define REGION_LISTENERS_MAX 65536u
#define REGION_LEASE_MIN_MS 100u
#define REGION_LEASE_MAX_MS 600000u
/* The lease of a region formatted without saying (its first user's, or usmc
 * region create's): a process that sleeps outside the library, with no other on
 * its kernel to vouch for it, lives this long. */
#define REGION_LEASE_DEFAULT_MS 5000u
#define REGION_MIN_SIZE (4u << 20)
#define REGION_MAX_SIZE (1ull << 40)

struct region_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_size;          /* REGION_PAGE */
	uint64_t size;              /* bytes, as formatted */
	/* Random, new at each format: a peer that finds another one knows the
	 * region was formatted again under it. */
	uint64_t format_id;
	_Atomic uint32_t state;     /* enum region_state */
	uint32_t lease_ms;          /* how long a silent peer lives (slots.h) */
	/* While FORMATTING: who formats (random), so that a formatter that died
	 * can be told from one still at work. */
	_Atomic uint64_t formatter;
	uint32_t nslots, nchans, nlisteners, granule;
	uint64_t slots_off, chans_off, listeners_off, ports_off;
	uint64_t heap_desc_off, heap_off, heap_granules;
};

/* A region as this process checked it: the layout is the copy's, the words are
 * the region's. */
struct region {
	unsigned char *base;
	uint64_t mapped;            /* bytes mapped */
	struct region_hdr h;        /* the header as checked */
};

/* Where the layout puts what, for a region of size bytes with these counts;
 * fills h (all but the identity words). Returns 0, or -1 when they do not fit. */
int region_layout(struct region_hdr *h, uint64_t size, uint32_t nslots, uint32_t nchans,
		  uint32_t nlisteners, uint32_t lease_ms);
/* The defaults for a region of size bytes (usmc region create without options,
 * or a blank region formatted by its first user). */
int region_layout_default(struct region_hdr *h, uint64_t size, uint32_t lease_ms);

/* Whether h, copied out of a region of which mapped bytes are mapped, holds
 * together: magic, version, sizes, every table inside the region and none over
 * another. Returns 0 or an error (REGION_E*), which region_strerror() names. */
enum region_err {
	REGION_OK = 0,
	REGION_EMAGIC = -1,    /* not a usmc region */
	REGION_EVERSION = -2,  /* another format version */
	REGION_ESMALL = -3,    /* smaller than its header claims */
	REGION_ELAYOUT = -4,   /* tables out of place or out of range */
	REGION_EBLANK = -5,    /* not formatted (yet) */
};
int region_check(const struct region_hdr *h, uint64_t mapped);
const char *region_strerror(int err);

/* Formats the mapped region: every table zeroed, then the header, then READY.
 * The caller has taken the right to (REGION_FORMATTING, region_claim_format). */
void region_format(unsigned char *base, const struct region_hdr *layout, uint64_t format_id);
/* Whether we (me, random) may format the region: it was blank and is now
 * FORMATTING, or stale, the formatter the caller saw REGION_FORMAT_STALE_MS ago
 * at least, is still at it (it died) and we replaced it. */
#define REGION_FORMAT_STALE_MS 2000u
int region_claim_format(unsigned char *base, uint64_t me, uint64_t stale);

/* Attaches r to the memory at base (mapped bytes): checks the header, copying
 * it. Returns 0 or REGION_E*, leaving r as it was. */
int region_attach(struct region *r, unsigned char *base, uint64_t mapped);
/* The region was formatted again (or broken) since region_attach(). */
int region_changed(const struct region *r);

static inline void *region_at(const struct region *r, uint64_t off)
{
	return r->base + off;
}

#endif
