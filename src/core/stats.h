/* Per-process counters in a small file under <rundir>/stats/, mapped shared so
 * that `usmc stats` can sum them while the process runs and after it exits, and
 * so that a forked child keeps adding to the same totals. The file stays until
 * `usmc stats reset`; the process holds a lock on it while it lives (procfile.h). */
#ifndef USMC_STATS_H
#define USMC_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "decline.h"

/* Ring sizes are powers of two from 4 KiB to 64 MiB (CLC_RING_MIN..CLC_RING_MAX). */
#define STAT_RING_BUCKETS 15
/* The devices, by their names (src/dev/dev.h's enum dev_kind). */
#define STAT_DEVICES 2
extern const char *const stat_device_names[STAT_DEVICES];

enum stat_side { SIDE_CLIENT, SIDE_SERVER, SIDE_MAX };

/* What each side (the connecting one, the accepting one) counts for itself. */
enum side_stat {
	SIDE_ACCEL,
	SIDE_FALLBACK,
	SIDE_REASON,                              /* DECL_MAX counters */
	SIDE_RING_TX = SIDE_REASON + DECL_MAX,    /* STAT_RING_BUCKETS: rings this end writes */
	SIDE_RING_RX = SIDE_RING_TX + STAT_RING_BUCKETS, /* ...and reads */
	SIDE_STATS = SIDE_RING_RX + STAT_RING_BUCKETS
};

/* Direct data placement (include/usmc/ddp.h), as Linux's ulp_ddp counts it. */
enum ddp_stat {
	DDP_SK_ADD,       /* sockets given placement */
	DDP_SK_ADD_FAIL,
	DDP_SK_DEL,
	DDP_SETUP,        /* transfers registered */
	DDP_SETUP_FAIL,
	DDP_TEARDOWN,
	DDP_DROP,         /* payloads the placement could not take */
	DDP_RESYNC,       /* streams framed again after their place was lost */
	DDP_PACKETS,      /* placements made */
	DDP_BYTES,        /* bytes placed */
	DDP_STATS
};

/* The first ids keep their numbers from one version to the next: tests and
 * older readers look them up by index. */
enum stat_id {
	STAT_CONN_ACCEL,       /* both sides */
	STAT_CONN_FALLBACK,    /* both sides */
	STAT_CONN_ABORT,       /* accelerated connections aborted on corrupt shared state */
	STAT_HANDSHAKE_ERR,    /* malformed or unusable control messages */
	STAT_BYTES_SENT,
	STAT_BYTES_RECV,
	STAT_SEND_CALLS,
	STAT_RECV_CALLS,
	STAT_RING_FULL,        /* a writer found the peer's ring full */
	STAT_DOORBELLS,        /* doorbells rung */
	STAT_HANDOFFS,         /* proposals a sibling acceptor handed us (handoff.h) */
	STAT_HANDOFF_LINKS,    /* connections to siblings opened to ask them (handoff.h) */
	STAT_HANDOFF_ASKS,     /* connections we asked siblings about (handoff.h) */
	STAT_BELL_PAIRS,       /* doorbells made: none when a segment's ends kept theirs */
	STAT_ARENA_MAPS,       /* arenas mapped, made or received */
	STAT_FALLBACK_REASON,  /* DECL_MAX counters follow, both sides */
	/* Calls on accelerated sockets that shared memory serves its own way. */
	STAT_PEEK_CALLS = STAT_FALLBACK_REASON + DECL_MAX,
	STAT_OOB_CALLS,        /* urgent data sent or asked for (MSG_OOB) */
	STAT_SENDFILE_CALLS,
	STAT_SPLICE_CALLS,
	/* SIGURG for urgent data we sent, to the owner the receiver published:
	 * sent; not sent, as nothing vouched for the process it named (another
	 * pid namespace, a process the link group's channel does not lead to, an
	 * owner that is neither the receiver nor its group); refused by the
	 * kernel (no permission to signal it). */
	STAT_SIGURG_SENT,
	STAT_SIGURG_UNVERIFIED,
	STAT_SIGURG_DENIED,
	/* Spins given up because the core went to another thread: spinning is
	 * off for a while then (conn_wait.c). */
	STAT_SPIN_CORE_LOST,
	/* SMC-ERM commands (src/erm): those that moved their bytes, the bytes
	 * they moved, and those that failed. */
	STAT_ERM_COMMANDS,
	STAT_ERM_BYTES,
	STAT_ERM_FAILED,
	STAT_DDP,              /* DDP_STATS counters of direct data placement (ddp.h) */
	STAT_SIDE = STAT_DDP + DDP_STATS, /* SIDE_STATS counters per side, client first */
	/* Ends accelerated, per device (enum dev_kind: lo, ivshmem). */
	STAT_DEV_ACCEL = STAT_SIDE + SIDE_MAX * SIDE_STATS,
	/* Interrupts of the ivshmem device (ivs_doorbell.c): written to a peer's
	 * vector, and heard on ours. */
	STAT_IVS_IRQ_SENT = STAT_DEV_ACCEL + STAT_DEVICES,
	STAT_IVS_IRQ_RECV,
	STAT_MAX
};

#define STATS_MAGIC 0x5354534355534d43ull
#define STATS_VERSION 13u

/* The counters every send and receive adds to, STAT_HOT_FIRST and the
 * STAT_HOT - 1 after it, are also kept in slots a thread owns alone, which it
 * adds to without a locked instruction: a locked add waits until every store
 * before it has left the core, the ring's included, whose cache lines the
 * peer's core holds, and so cost a send and a receive a tenth of a ping-pong.
 * A thread without a slot (more threads than slots) adds to v[] instead. */
#define STAT_HOT_FIRST STAT_BYTES_SENT
#define STAT_HOT 6
#define STAT_SLOTS 64

struct stat_slot {
	_Alignas(64) _Atomic int32_t owner; /* the thread's id; 0: free */
	_Atomic uint64_t v[STAT_HOT];
};

struct stats_file {
	uint64_t magic;
	uint32_t version;
	uint32_t nstats;
	_Atomic uint64_t v[STAT_MAX];
	struct stat_slot slot[STAT_SLOTS];
};

/* The name of a counter below STAT_FALLBACK_REASON, among the calls or the
 * placement's. */
const char *stat_name(enum stat_id id);

static inline enum stat_id stat_side_id(enum stat_side side, enum side_stat k)
{
	return (enum stat_id)(STAT_SIDE + side * SIDE_STATS + k);
}

/* A counter's value in f: v[] and the slots' share of it. */
static inline uint64_t stat_value(const struct stats_file *f, enum stat_id id)
{
	uint64_t n = atomic_load_explicit(&f->v[id], memory_order_relaxed);

	if (id >= STAT_HOT_FIRST && id < STAT_HOT_FIRST + STAT_HOT)
		for (int i = 0; i < STAT_SLOTS; i++)
			n += atomic_load_explicit(&f->slot[i].v[id - STAT_HOT_FIRST],
						  memory_order_relaxed);
	return n;
}

/* The bucket of a ring size: 4 KiB is 0, each doubling one more. */
unsigned stat_ring_bucket(uint64_t size);

/* Adds to this process's counters; maps the file on first use. Never fails
 * visibly: without a runtime directory the counts are kept in memory only. */
void stat_add(enum stat_id id, uint64_t n);
/* Maps the file now rather than on first use. A listener's children inherit the
 * mapping: a prefork worker that drops privileges before its first connection
 * could not create a file in the run directory any more, and its counts would
 * stay invisible. */
void stat_open(void);
/* A forked child's thread owns no slot: its parent's thread keeps the one it had. */
void stat_atfork_child(void);
void stat_fallback(enum stat_side side, enum decline reason);
/* A connection attached on device dev (enum dev_kind), with the rings this end
 * writes and reads. */
void stat_accel(enum stat_side side, int dev, uint64_t tx_size, uint64_t rx_size);

#endif
