/* ERM's shared memory: what each end of a connection publishes to the other.
 *
 * Each side that uses ERM makes one area (a sealed memfd, sent on the link
 * group's channel as the connection's extension index 0) and the peer maps it:
 *
 *   page 0: struct erm_area: the owner's header and lines, then a line
 *           written by the peer (the command it has in flight on the owner's
 *           memory)
 *   then:   ERM_EVQ events, written by the peer: its commands on the
 *           owner's memory that asked for a remote completion, each one
 *           cache line carrying its own sequence number, so that a reader
 *           learns of an event and reads it in one transfer
 *   then:   ERM_MRS slots, written by the owner: its regions with a remote
 *           right, indexed by memid: the remote MR table the peer reads
 *
 * The owner's regions in memory from usmc_erm_alloc() live in further memfds
 * it sends (indexes from 1), which the peer maps too; a slot names its memfd.
 * Everything a side reads of what the other wrote goes through the decoders
 * below, which accept only what lies within bounds, so a hostile peer can make
 * one command fail, never this process touch memory it was not given. */
#ifndef USMC_ERM_WIRE_H
#define USMC_ERM_WIRE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ERM_AREA_MAGIC 0x4d524555u /* "UERM" */
#define ERM_AREA_VERSION 1u
#define ERM_LINE 64

/* Regions a side may register on one connection (memids 0..ERM_MRS-1), events
 * its ring holds, memfds of regions it may send. */
#define ERM_MRS 4096u
#define ERM_EVQ 1024u
#define ERM_FDS 4096u
/* No region is larger (nor lies higher, for one in the owner's own address
 * space): user space ends below 2^47 on x86-64. */
#define ERM_REGION_MAX (1ull << 47)

enum erm_kind {
	ERM_MEM_SHM = 1, /* in a memfd the peer maps (usmc_erm_alloc()) */
	ERM_MEM_VM = 2,  /* in the owner's address space (process_vm_readv/writev) */
};

/* A slot of the remote MR table. state is gen << 1 | valid: the owner writes
 * the other fields only while it is not valid, and a new registration of the
 * memid gets a new gen. */
struct erm_slot {
	_Atomic uint32_t state;
	_Atomic uint32_t access;   /* SMC_ACCESS_REMOTE_* */
	_Atomic uint32_t kind;     /* enum erm_kind */
	_Atomic uint32_t fd_index; /* ERM_MEM_SHM: its memfd, 1..ERM_FDS-1 */
	_Atomic uint64_t base;     /* ERM_MEM_SHM: offset in the memfd; ERM_MEM_VM: address */
	_Atomic uint64_t len;
};

/* An event in the owner's ring: the peer's command touched region memid (of
 * generation gen) at offset. seq, written last, is the producer's cursor past
 * it: the entry at cursor c holds an event once seq is c + 1. */
struct erm_event {
	_Atomic uint64_t seq;
	_Atomic uint32_t type; /* SMC_ERM_CMD_COPY or SMC_ERM_CMD_READ */
	_Atomic uint32_t memid;
	_Atomic uint32_t gen;
	_Atomic int32_t src_memid; /* the peer's region */
	_Atomic uint64_t offset;
	_Atomic uint64_t len;
	_Atomic uint64_t tag;
	uint64_t pad[2];
};

struct erm_area {
	/* The owner, before it sends the area. */
	_Alignas(ERM_LINE) _Atomic uint32_t magic;
	_Atomic uint32_t version;
	_Atomic int32_t pid; /* its process, as the peer is to verify */
	/* The owner: it closed its end; no more commands on its memory. */
	_Alignas(ERM_LINE) _Atomic uint32_t closed;
	/* The owner: one past the highest memid it ever announced (a hint for
	 * listings). */
	_Atomic uint32_t mrs_used;
	_Alignas(ERM_LINE) _Atomic uint64_t ev_cons; /* the owner, consuming */
	/* The peer: the command it runs on the owner's memory, as
	 * erm_inflight(memid, gen), 0 for none. */
	_Alignas(ERM_LINE) _Atomic uint64_t inflight;
	_Alignas(4096) struct erm_event ev[ERM_EVQ];
	struct erm_slot slot[ERM_MRS];
};

#define ERM_AREA_SIZE ((sizeof(struct erm_area) + 4095) & ~(size_t)4095)

_Static_assert(sizeof(struct erm_slot) == 32, "erm slot layout");
_Static_assert(sizeof(struct erm_event) == ERM_LINE, "erm event layout");
_Static_assert(offsetof(struct erm_area, ev) == 4096, "erm area header exceeds its page");

static inline uint32_t erm_state(uint32_t gen, int valid)
{
	return gen << 1 | (valid ? 1u : 0u);
}

static inline uint64_t erm_inflight(uint32_t memid, uint32_t gen)
{
	return (uint64_t)(memid + 1) << 32 | gen;
}

/* A slot as read: a private copy, within bounds. */
struct erm_rslot {
	uint32_t state, access, kind, fd_index;
	uint64_t base, len;
};

/* An event as read. */
struct erm_rev {
	uint32_t type, memid, gen;
	int32_t src_memid;
	uint64_t offset, len, tag;
};

/* off and len lie within a region of size bytes, without overflow. */
static inline int erm_within(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* The header the owner wrote: 0, or -1 for an area that is not one. */
int erm_area_check(const struct erm_area *a);
/* Reads slot s of a peer's area (after its state was loaded): 0 with out
 * filled, -1 for a slot no honest peer writes (unknown kind or rights, a
 * region past its bounds). */
int erm_slot_read(const struct erm_slot *s, struct erm_rslot *out);
/* Whether entry e holds the event at our cursor cons (acquire: its fields are
 * then there to read). */
static inline int erm_event_ready(const struct erm_event *e, uint64_t cons)
{
	return atomic_load_explicit(&e->seq, memory_order_acquire) == cons + 1;
}
/* Reads event e of our ring (once ready): 0, or -1 for one no honest peer
 * writes. Whether it lies within the region it names is the reader's to check. */
int erm_event_read(const struct erm_event *e, struct erm_rev *out);
/* Our room in the peer's ring, we producing at prod and it consuming at cons:
 * 0 with *room, or -1 when cons lies ahead of prod or a ring behind. */
int erm_evq_room(uint64_t prod, uint64_t cons, uint64_t *room);

#endif
