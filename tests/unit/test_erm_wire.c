/* link: src/erm/wire.c */
/* What an ERM peer writes into shared memory, read back: a slot of its remote MR table is
 * accepted only with a known kind and rights and within bounds, an event only naming a region
 * that may exist and a range without overflow, and a ring's cursors only within a ring of
 * each other; an area only with our magic and version. */
#include "check.h"

#include <string.h>

#include "../../src/erm/wire.h"
#include "usmc/erm.h"

static void slot_set(struct erm_slot *s, uint32_t access, uint32_t kind, uint32_t fdi,
		     uint64_t base, uint64_t len)
{
	atomic_store(&s->state, erm_state(1, 1));
	atomic_store(&s->access, access);
	atomic_store(&s->kind, kind);
	atomic_store(&s->fd_index, fdi);
	atomic_store(&s->base, base);
	atomic_store(&s->len, len);
}

static int slot_ok(uint32_t access, uint32_t kind, uint32_t fdi, uint64_t base, uint64_t len)
{
	struct erm_slot s;
	struct erm_rslot r;

	slot_set(&s, access, kind, fdi, base, len);
	return erm_slot_read(&s, &r) == 0;
}

static void test_slots(void)
{
	const uint32_t W = SMC_ACCESS_REMOTE_WRITE, R = SMC_ACCESS_REMOTE_READ;
	struct erm_slot s;
	struct erm_rslot r;

	slot_set(&s, W | R, ERM_MEM_SHM, 3, 4096, 8192);
	CHECK_EQ(erm_slot_read(&s, &r), 0);
	CHECK(r.state == erm_state(1, 1) && r.access == (W | R) && r.kind == ERM_MEM_SHM &&
	      r.fd_index == 3 && r.base == 4096 && r.len == 8192);
	CHECK(slot_ok(R, ERM_MEM_VM, 0, 0x7f0000001000ull, 1));
	/* rights: some remote right, nothing else */
	CHECK(!slot_ok(0, ERM_MEM_SHM, 1, 0, 1));
	CHECK(!slot_ok(SMC_ACCESS_LOCAL_WRITE | W, ERM_MEM_SHM, 1, 0, 1));
	CHECK(!slot_ok(0x80 | W, ERM_MEM_SHM, 1, 0, 1));
	/* kinds */
	CHECK(!slot_ok(W, 0, 1, 0, 1));
	CHECK(!slot_ok(W, 3, 1, 0, 1));
	/* memfds: 1 .. ERM_FDS - 1, and none for memory of the owner's own */
	CHECK(!slot_ok(W, ERM_MEM_SHM, 0, 0, 1));
	CHECK(slot_ok(W, ERM_MEM_SHM, ERM_FDS - 1, 0, 1));
	CHECK(!slot_ok(W, ERM_MEM_SHM, ERM_FDS, 0, 1));
	CHECK(!slot_ok(W, ERM_MEM_VM, 1, 4096, 1));
	CHECK(!slot_ok(W, ERM_MEM_VM, 0, 0, 1));
	/* bounds: not empty, nothing past 2^47, no overflow */
	CHECK(!slot_ok(W, ERM_MEM_SHM, 1, 0, 0));
	CHECK(slot_ok(W, ERM_MEM_SHM, 1, 0, ERM_REGION_MAX));
	CHECK(!slot_ok(W, ERM_MEM_SHM, 1, 1, ERM_REGION_MAX));
	CHECK(!slot_ok(W, ERM_MEM_VM, 0, UINT64_MAX - 4095, 8192));
	CHECK(!slot_ok(W, ERM_MEM_VM, 0, ERM_REGION_MAX, 1));
}

static int event_ok(uint32_t type, uint32_t memid, int32_t src, uint64_t off, uint64_t len)
{
	struct erm_event e;
	struct erm_rev v;

	memset(&e, 0, sizeof(e));
	atomic_store(&e.type, type);
	atomic_store(&e.memid, memid);
	atomic_store(&e.gen, 9);
	atomic_store(&e.src_memid, src);
	atomic_store(&e.offset, off);
	atomic_store(&e.len, len);
	atomic_store(&e.tag, 77);
	if (erm_event_read(&e, &v))
		return 0;
	CHECK(v.type == type && v.memid == memid && v.gen == 9 && v.src_memid == src &&
	      v.offset == off && v.len == len && v.tag == 77);
	return 1;
}

static void test_events(void)
{
	CHECK(event_ok(SMC_ERM_CMD_COPY, 0, 0, 0, 1));
	CHECK(event_ok(SMC_ERM_CMD_READ, ERM_MRS - 1, ERM_MRS - 1, 4096, 4096));
	CHECK(!event_ok(SMC_ERM_CMD_REG_MR, 0, 0, 0, 1));
	CHECK(!event_ok(0, 0, 0, 0, 1));
	CHECK(!event_ok(SMC_ERM_CMD_COPY, ERM_MRS, 0, 0, 1));
	CHECK(!event_ok(SMC_ERM_CMD_COPY, 0, -1, 0, 1));
	CHECK(!event_ok(SMC_ERM_CMD_COPY, 0, ERM_MRS, 0, 1));
	CHECK(!event_ok(SMC_ERM_CMD_COPY, 0, 0, 0, 0));
	CHECK(!event_ok(SMC_ERM_CMD_COPY, 0, 0, UINT64_MAX, 2));
	CHECK(!event_ok(SMC_ERM_CMD_COPY, 0, 0, ERM_REGION_MAX, 1));
}

static void test_cursors(void)
{
	struct erm_event e;
	uint64_t n;

	/* an entry holds the event at cursor c once its sequence number is c + 1 */
	memset(&e, 0, sizeof(e));
	CHECK(!erm_event_ready(&e, 0));
	atomic_store(&e.seq, 1);
	CHECK(erm_event_ready(&e, 0) && !erm_event_ready(&e, 1));
	atomic_store(&e.seq, 11 + ERM_EVQ);
	CHECK(erm_event_ready(&e, 10 + ERM_EVQ) && !erm_event_ready(&e, 10));
	/* the producer's room, from the consumer's cursor */
	CHECK(erm_evq_room(10, 10, &n) == 0 && n == ERM_EVQ);
	CHECK(erm_evq_room(10 + ERM_EVQ, 10, &n) == 0 && n == 0);
	CHECK(erm_evq_room(11 + ERM_EVQ, 10, &n) < 0);
	CHECK(erm_evq_room(10, 11, &n) < 0);
}

static void test_area(void)
{
	static struct erm_area a;

	CHECK(erm_area_check(&a) < 0);
	atomic_store(&a.magic, ERM_AREA_MAGIC);
	CHECK(erm_area_check(&a) < 0);
	atomic_store(&a.version, ERM_AREA_VERSION);
	CHECK_EQ(erm_area_check(&a), 0);
	atomic_store(&a.version, ERM_AREA_VERSION + 1);
	CHECK(erm_area_check(&a) < 0);
	CHECK_EQ(ERM_AREA_SIZE % 4096, 0);
	CHECK(ERM_AREA_SIZE >= sizeof(struct erm_area));
}

int main(void)
{
	RUN(test_slots);
	RUN(test_events);
	RUN(test_cursors);
	RUN(test_area);
	return check_report();
}
