/* link: src/erm/wire.c */
/* The decoders of what an ERM peer writes into shared memory, on arbitrary bytes: a slot of
 * its remote MR table, an event in our ring, its area's header, an event's sequence number
 * against our cursor, and the consumer's cursor against the producer's.
 * The first byte picks which. Besides memory safety, each verdict must agree with the rules of
 * wire.h restated here, and what a decoder accepts must be what it was given, within bounds. */
#include "../../src/erm/wire.h"
#include "fuzz.h"

#include <string.h>

#include "../../include/usmc/erm.h"

_Static_assert(sizeof(struct erm_rslot) == sizeof(struct erm_slot), "a slot and its copy");
_Static_assert(sizeof(struct erm_rev) == offsetof(struct erm_event, pad) - offsetof(struct erm_event, type),
	       "an event and its copy");

static int slot_ok(const struct erm_rslot *s)
{
	uint32_t rights = SMC_ACCESS_REMOTE_READ | SMC_ACCESS_REMOTE_WRITE;

	if (!s->access || (s->access & ~rights) || !s->len || s->base > ERM_REGION_MAX ||
		s->len > ERM_REGION_MAX - s->base)
		return 0;
	if (s->kind == ERM_MEM_SHM)
		return s->fd_index >= 1 && s->fd_index < ERM_FDS;
	return s->kind == ERM_MEM_VM && s->fd_index == 0 && s->base != 0;
}

static int event_ok(const struct erm_rev *v)
{
	return (v->type == SMC_ERM_CMD_COPY || v->type == SMC_ERM_CMD_READ) && v->memid < ERM_MRS &&
		   v->src_memid >= 0 && v->src_memid < (int32_t)ERM_MRS && v->len &&
		   (unsigned __int128)v->offset + v->len <= ERM_REGION_MAX;
}

static uint64_t u64_at(const uint8_t *d)
{
	uint64_t v;

	memcpy(&v, d, sizeof v);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t which = data[0] % 4;
	data++;
	size--;
	if (which < 2 && size >= sizeof(struct erm_event)) {
		/* a slot (0) or an event (1); each private copy has the layout of what it
		 * copies, without atomics (an event's from its type on) */
		union {
			struct erm_slot s;
			struct erm_event e;
		} in;
		union {
			struct erm_rslot s;
			struct erm_rev e;
		} out, raw;
		memcpy(&in, data, sizeof in);
		memcpy(&raw, data + (which ? offsetof(struct erm_event, type) : 0), sizeof raw);
		int ok = which ? erm_event_read(&in.e, &out.e) == 0 : erm_slot_read(&in.s, &out.s) == 0;
		FUZZ_ASSERT(!memcmp(&out, &raw, which ? sizeof out.e : sizeof out.s));
		FUZZ_ASSERT(ok == (which ? event_ok(&raw.e) : slot_ok(&raw.s)));
		if (ok && !which)
			FUZZ_ASSERT(erm_within(out.s.base, out.s.len, ERM_REGION_MAX));
	} else if (which == 2 && size >= 8) {
		/* the header's first line: magic, version, pid */
		static struct erm_area a;
		memcpy(&a, data, 8);
		uint32_t magic, version;
		memcpy(&magic, data, 4);
		memcpy(&version, data + 4, 4);
		FUZZ_ASSERT((erm_area_check(&a) == 0) ==
					(magic == ERM_AREA_MAGIC && version == ERM_AREA_VERSION));
	} else if (which == 3 && size >= 16) {
		uint64_t a = u64_at(data), b = u64_at(data + 8), room = 7;
		static struct erm_event e;
		atomic_store(&e.seq, b);
		FUZZ_ASSERT(erm_event_ready(&e, a) == (b == a + 1));
		int room_ok = erm_evq_room(a, b, &room) == 0;
		FUZZ_ASSERT(room_ok == (b <= a && a - b <= ERM_EVQ));
		if (room_ok)
			FUZZ_ASSERT(room == ERM_EVQ - (a - b) && room <= ERM_EVQ);
	}
	return 0;
}

static void emit_with(fuzz_emit_fn *emit, uint8_t which, const void *p, size_t n)
{
	uint8_t b[1 + 64];

	b[0] = which;
	memcpy(b + 1, p, n);
	emit(b, 1 + n);
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	struct {
		uint32_t state, access, kind, fd_index;
		uint64_t base, len;
	} slot = {erm_state(3, 1), SMC_ACCESS_REMOTE_WRITE, ERM_MEM_SHM, 1, 4096, 65536};
	emit_with(emit, 0, &slot, sizeof slot);
	slot.kind = ERM_MEM_VM;
	slot.fd_index = 0;
	slot.base = 0x7f0000000000ull;
	emit_with(emit, 0, &slot, sizeof slot);
	struct {
		uint64_t seq;
		uint32_t type, memid, gen;
		int32_t src;
		uint64_t offset, len, tag;
	} ev = {8, SMC_ERM_CMD_COPY, 5, 3, 1, 128, 64, 42};
	emit_with(emit, 1, &ev, sizeof ev);
	uint32_t hdr[2] = {ERM_AREA_MAGIC, ERM_AREA_VERSION};
	emit_with(emit, 2, hdr, sizeof hdr);
	uint64_t cursors[2] = {1000, 1500};
	emit_with(emit, 3, cursors, sizeof cursors);
}
