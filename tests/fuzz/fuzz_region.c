/* link: src/dev/region.c src/dev/slots.c src/dev/heap.c src/dev/chan.c src/dev/listeners.c src/core/addr.c src/core/sys.c */
/* What a peer may write into a region, as every decoder of the ivshmem device
 * reads it: the input overlays a freshly formatted region's header, a slot, a
 * channel entry, a listener entry, a channel's cursors and first message slots,
 * and the first heap descriptors. Besides memory safety: a header that checks
 * keeps every table inside the region; a message received fits its slot; a
 * doorbell names a page of the region or everything; a listener read holds
 * together; memory allocated is ours and inside the heap, and a slot's reclaim
 * frees only what its key owned. */
#include "fuzz.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "../../src/dev/chan.h"
#include "../../src/dev/heap.h"
#include "../../src/dev/listeners.h"
#include "../../src/dev/region.h"
#include "../../src/dev/slots.h"

#define SIZE REGION_MIN_SIZE

static unsigned char *base;
static struct region_hdr layout;

/* Copies what input is left (at most n bytes) over dst. */
static void overlay(void *dst, size_t n, const uint8_t **data, size_t *size)
{
	size_t k = *size < n ? *size : n;

	memcpy(dst, *data, k);
	*data += k;
	*size -= k;
}

static uint32_t pages[CHAN_BELLS + 1];
static int npages;

static void rang(void *arg, uint32_t page)
{
	(void)arg;
	if (npages < (int)(sizeof(pages) / sizeof(pages[0])))
		pages[npages++] = page;
}

static int none_alive(void *arg, uint64_t key)
{
	(void)arg;
	(void)key;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct region r;
	struct slot_self me;

	if (!base) {
		base = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		FUZZ_ASSERT(base != MAP_FAILED && region_layout_default(&layout, SIZE, 1000) == 0);
	}
	slot_self_init(&me);
	region_format(base, &layout, 1);
	FUZZ_ASSERT(region_attach(&r, base, SIZE) == REGION_OK);
	uint64_t ours = slot_claim(&r, &me), hint = 0;
	uint64_t chmem = heap_alloc(&r, ours, CHAN_MEM_SIZE, &hint);
	FUZZ_ASSERT(ours && chmem);

	/* The header, as a later attach would copy it. */
	struct region_hdr h;
	memcpy(&h, base, sizeof(h));
	overlay(&h, sizeof(h), &data, &size);
	if (region_check(&h, SIZE) == REGION_OK) {
		FUZZ_ASSERT(h.heap_off + h.heap_granules * REGION_PAGE <= SIZE);
		FUZZ_ASSERT(h.slots_off + h.nslots * sizeof(struct region_slot) <= h.chans_off);
		FUZZ_ASSERT(h.nslots <= REGION_SLOTS_MAX && h.lease_ms >= REGION_LEASE_MIN_MS);
	}

	/* The tables, under the layout we checked at attach. */
	overlay(slot_at(&r, 1), sizeof(struct region_slot), &data, &size);
	overlay(chan_at(&r, 0), sizeof(struct chan_entry), &data, &size);
	overlay(region_at(&r, r.h.listeners_off), sizeof(struct listener_entry), &data, &size);
	struct chan_mem *m = region_at(&r, chmem);
	overlay(m, 10 * sizeof(struct chan_cursor), &data, &size);
	overlay(m->up, 4 * sizeof(struct chan_msg), &data, &size);
	overlay(m->bells, 64, &data, &size);
	overlay(region_at(&r, r.h.heap_desc_off), 64 * sizeof(uint64_t), &data, &size);

	struct listener l;
	if (listeners_read(&r, 0, &l) == 0) {
		FUZZ_ASSERT(l.naddr >= 1 && l.naddr <= LISTENER_ADDRS && slot_key_valid(&r, l.owner));
		struct addr probe = {.family = AF_INET, .ip = {127, 0, 0, 1}, .port = 80};
		listener_accepts(&l, &probe, me.boot_id, me.pidns);
		probe = (struct addr){.family = AF_INET6, .ip = {0xfe, 0x80}, .port = 80};
		listener_accepts(&l, &probe, me.boot_id, me.pidns);
	}

	struct chan_end e = {.m = m};
	char msg[CHAN_MSG_MAX];
	for (int i = 0; i < 8; i++) {
		ssize_t n = chan_recv(&e, CHAN_UP, msg, sizeof(msg));
		FUZZ_ASSERT(n <= (ssize_t)CHAN_MSG_MAX);
		if (n < 0)
			break;
	}
	chan_send(&e, CHAN_DOWN, "decline", 7);
	npages = 0;
	chan_bell_pop(&e, CHAN_UP, rang, NULL);
	chan_bell_pop(&e, CHAN_UP, rang, NULL);

	struct slot_seen seen = {0};
	for (uint32_t i = 0; i < 2; i++) {
		uint64_t w = atomic_load(&slot_at(&r, i)->word);
		uint64_t key = slot_key(i, w >> 8);
		if (slot_key_valid(&r, key)) {
			slot_alive(&r, key, &seen, 1, &me);
			slot_alive(&r, key, &seen, 1ull << 40, &me);
		}
	}
	/* A reclaim of slot 1 frees nothing of ours. */
	uint64_t before, after;
	heap_usage(&r, &before, NULL);
	slot_declare_dead(&r, slot_key(1, atomic_load(&slot_at(&r, 1)->word) >> 8));
	slot_reclaim(&r, 1, none_alive, NULL);
	heap_usage(&r, &after, NULL);
	FUZZ_ASSERT(after <= before);

	uint64_t got = heap_alloc(&r, ours, 3 * REGION_PAGE, &hint);
	if (got) {
		FUZZ_ASSERT(got >= r.h.heap_off && got + 3 * REGION_PAGE <= SIZE);
		FUZZ_ASSERT(heap_owned(&r, ours, got, 3 * REGION_PAGE));
	}
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	static unsigned char seed[2048];
	struct region_hdr h;

	/* Untouched: the region as formatted. */
	region_layout_default(&h, SIZE, 1000);
	atomic_store(&h.state, REGION_READY);
	memcpy(seed, &h, sizeof(h));
	emit(seed, sizeof(h));
	/* A listener and a message. */
	size_t off = sizeof(h) + sizeof(struct region_slot) + sizeof(struct chan_entry);
	struct listener_entry le = {.port = 80, .naddr = 1, .owner = slot_key(0, 1),
				    .addr = {{.family = 4, .prefix = 24, .ip = {10, 1, 1}}}};
	memcpy(seed + off, &le, sizeof(le));
	off += sizeof(le);
	uint64_t tail = 1;
	memcpy(seed + off + sizeof(struct chan_cursor) * 2, &tail, sizeof(tail));
	off += 10 * sizeof(struct chan_cursor);
	struct chan_msg cm = {.len = 24};
	memcpy(seed + off, &cm, sizeof(cm));
	emit(seed, off + sizeof(cm));
}
