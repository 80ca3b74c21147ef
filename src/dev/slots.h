/* The peer table: one slot per attached process tree (a process and the
 * children it forks, or the program it execs, which hold what it made).
 *
 * A slot is named by a key, its number and a generation that grows each time
 * the slot is taken, so that nothing of a peer that left, or was declared
 * dead, is taken for its successor's: a virtual machine that reboots gets a
 * fresh key, and its old connections are never reused.
 *
 * Liveness is a lease. The holder bumps its heartbeat as it runs and as its
 * waits wake (a waiting call wakes at least once per polling interval, far
 * below the lease). Each observer notes, in its own clock (the kernels' clocks
 * have nothing in common), when it last saw the heartbeat move; a slot silent
 * for longer than the region's lease is dead, and the first observer to say so
 * (one compare-and-swap) takes it back: its listeners go, the channels it opened
 * and the memory it owns are freed once no live peer still uses them, and its
 * peers' connections with it end (ECONNRESET). A holder on the observer's own
 * kernel whose processes have all exited is dead at once. */
#ifndef USMC_SLOTS_H
#define USMC_SLOTS_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "region.h"

#define SLOTS_DEFAULT 64u
/* How often an observer asks its kernel whether a silent slot's processes there
 * have exited. */
#define SLOT_EXIT_ASK_NS 10000000ull
#define SLOT_PIDS 8

enum slot_state { SLOT_FREE = 0, SLOT_LIVE = 1, SLOT_DEAD = 2 };

/* A file (on the host, or one a server sent), a PCI BAR through sysfs, or
 * through vfio-pci (ivs_vfio.c). */
enum slot_mapping { SLOT_MAP_UNKNOWN, SLOT_MAP_FILE, SLOT_MAP_SYSFS, SLOT_MAP_VFIO };
#define SLOT_MAPPINGS 4
extern const char *const slot_mapping_names[SLOT_MAPPINGS];

struct region_slot {
	_Atomic uint64_t word;       /* generation << 8 | enum slot_state */
	_Atomic uint64_t heartbeat;  /* bumped by its holder as it runs */
	_Atomic uint32_t chan_seq;   /* bumped after a channel to this endpoint was opened */
	/* 1 + its ivshmem peer number when it takes interrupts (a doorbell), else
	 * 0: it polls. */
	_Atomic uint32_t doorbell;
	_Atomic uint32_t conns;      /* connections it has open, for usmc region status */
	uint32_t pad;
	uint8_t boot_id[16];         /* the kernel it runs on */
	uint64_t pidns;              /* in this pid namespace */
	_Atomic int32_t pids[SLOT_PIDS]; /* its processes there (0: none) */
	char name[64];               /* host and program, for usmc region status */
	/* How it maps the region (enum slot_mapping), and whether its loads hit
	 * the cache, for usmc region status. */
	uint8_t mapping;
	uint8_t mapping_cached;
	uint8_t reserved[102];
};
_Static_assert(sizeof(struct region_slot) == 256, "slot layout");

/* A slot's key: 0 is none. */
static inline uint64_t slot_key(uint32_t idx, uint64_t gen)
{
	return gen << 8 | (uint64_t)(idx + 1);
}

static inline uint32_t slot_of_key(uint64_t key)
{
	return (uint32_t)(key & 0xff) - 1;
}

static inline uint64_t slot_gen_of_key(uint64_t key)
{
	return key >> 8;
}

static inline struct region_slot *slot_at(const struct region *r, uint32_t idx)
{
	return (struct region_slot *)region_at(r, r->h.slots_off) + idx;
}

/* Whether key names a slot of r at all (a key read from the region is checked
 * with this before anything else). */
int slot_key_valid(const struct region *r, uint64_t key);

/* Who we are, for the slots we take and those we judge. */
struct slot_self {
	uint8_t boot_id[16];
	uint64_t pidns;
	pid_t pid;
	char name[64];
	uint8_t mapping, mapping_cached;
};
void slot_self_init(struct slot_self *me);

/* Takes a free slot for us; returns its key, or 0 when the table is full. */
uint64_t slot_claim(const struct region *r, const struct slot_self *me);
/* Bumps the heartbeat of the slot we hold; -1 when it is not ours any more
 * (declared dead while we slept, or the region was formatted again). */
int slot_renew(const struct region *r, uint64_t key);
/* A forked child or a program a connection was handed to holds the slot too:
 * its pid joins the slot's (for the same-kernel judgement). */
void slot_add_pid(const struct region *r, uint64_t key, pid_t pid);
/* Lets a slot go at once (its holder leaves cleanly, nothing of it in use). */
void slot_release(const struct region *r, uint64_t key);

/* What an observer last saw of a slot. */
struct slot_seen {
	uint64_t key;
	uint64_t heartbeat;
	uint64_t since_ns;         /* when it last moved, in our clock */
	uint64_t asked_ns;         /* when its processes on our kernel were last asked after */
};

/* Whether the slot key names still lives, as seen by an observer at now (ns, its
 * own clock), lease_ns being the region's lease. */
int slot_alive(const struct region *r, uint64_t key, struct slot_seen *seen, uint64_t now,
	       const struct slot_self *me);
/* The slot key names is dead: the first to say so marks it DEAD and returns 1. */
int slot_declare_dead(const struct region *r, uint64_t key);
/* A DEAD slot: frees what it held once no live peer uses it, then the slot.
 * alive(key) says whether another slot lives. Returns 1 when the slot is free. */
int slot_reclaim(const struct region *r, uint32_t idx, int (*alive)(void *, uint64_t), void *arg);

#endif
