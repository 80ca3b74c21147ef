#include "stats.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "clc.h"
#include "ddp.h"
#include "procfile.h"
#include "sys.h"

_Static_assert(CLC_RING_MAX / CLC_RING_MIN == 1u << (STAT_RING_BUCKETS - 1),
	       "one histogram bucket per ring size");

static struct stats_file fallback_counts;
static struct stats_file *_Atomic mapped;
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const names[STAT_SIDE] = {
	[STAT_CONN_ACCEL] = "conn_accelerated",
	[STAT_CONN_FALLBACK] = "conn_fallback",
	[STAT_CONN_ABORT] = "conn_aborted",
	[STAT_HANDSHAKE_ERR] = "handshake_errors",
	[STAT_BYTES_SENT] = "bytes_sent_shm",
	[STAT_BYTES_RECV] = "bytes_recv_shm",
	[STAT_SEND_CALLS] = "send_calls_shm",
	[STAT_RECV_CALLS] = "recv_calls_shm",
	[STAT_RING_FULL] = "ring_full",
	[STAT_DOORBELLS] = "doorbells",
	[STAT_HANDOFFS] = "handoffs",
	[STAT_HANDOFF_LINKS] = "handoff_links",
	[STAT_HANDOFF_ASKS] = "handoff_asks",
	[STAT_BELL_PAIRS] = "doorbell_pairs",
	[STAT_ARENA_MAPS] = "arena_maps",
	[STAT_PEEK_CALLS] = "peek_calls",
	[STAT_OOB_CALLS] = "urgent_calls",
	[STAT_SENDFILE_CALLS] = "sendfile_calls",
	[STAT_SPLICE_CALLS] = "splice_calls",
	[STAT_SIGURG_SENT] = "sigurg_sent",
	[STAT_SIGURG_UNVERIFIED] = "sigurg_unverified",
	[STAT_SIGURG_DENIED] = "sigurg_denied",
	[STAT_SPIN_CORE_LOST] = "spin_core_lost",
	[STAT_ERM_COMMANDS] = "erm_commands",
	[STAT_ERM_BYTES] = "erm_bytes",
	[STAT_ERM_FAILED] = "erm_failed",
	[STAT_DDP + DDP_SK_ADD] = DDP_STAT_PREFIX "sk_add",
	[STAT_DDP + DDP_SK_ADD_FAIL] = DDP_STAT_PREFIX "sk_add_fail",
	[STAT_DDP + DDP_SK_DEL] = DDP_STAT_PREFIX "sk_del",
	[STAT_DDP + DDP_SETUP] = DDP_STAT_PREFIX "setup",
	[STAT_DDP + DDP_SETUP_FAIL] = DDP_STAT_PREFIX "setup_fail",
	[STAT_DDP + DDP_TEARDOWN] = DDP_STAT_PREFIX "teardown",
	[STAT_DDP + DDP_DROP] = DDP_STAT_PREFIX "drop",
	[STAT_DDP + DDP_RESYNC] = DDP_STAT_PREFIX "resync",
	[STAT_DDP + DDP_PACKETS] = DDP_STAT_PREFIX "packets",
	[STAT_DDP + DDP_BYTES] = DDP_STAT_PREFIX "bytes",
};

const char *stat_name(enum stat_id id)
{
	return id < STAT_SIDE ? names[id] : NULL;
}

unsigned stat_ring_bucket(uint64_t size)
{
	unsigned b = 0;

	while (b + 1 < STAT_RING_BUCKETS && ((uint64_t)CLC_RING_MIN << b) < size)
		b++;
	return b;
}

static struct stats_file *stats_map(void)
{
	int lock_fd;
	struct stats_file *f = procfile_create("stats", sizeof(struct stats_file), &lock_fd);

	if (!f)
		return &fallback_counts;
	/* The lock's descriptor stays open for as long as the process lives. */
	f->nstats = STAT_MAX;
	f->version = STATS_VERSION;
	atomic_store(&f->magic, STATS_MAGIC);
	return f;
}

static struct stats_file *stats_file(void)
{
	struct stats_file *f = atomic_load_explicit(&mapped, memory_order_acquire);

	if (!f) {
		pthread_mutex_lock(&map_lock);
		f = atomic_load(&mapped);
		if (!f) {
			f = stats_map();
			atomic_store_explicit(&mapped, f, memory_order_release);
		}
		pthread_mutex_unlock(&map_lock);
	}
	return f;
}

void stat_open(void)
{
	stats_file();
}

static void count(struct stats_file *f, enum stat_id id, uint64_t n)
{
	atomic_fetch_add_explicit(&f->v[id], n, memory_order_relaxed);
}

/* The slot this thread adds to; none_left once every slot was found taken. */
static __thread struct stat_slot *my_slot __attribute__((tls_model("initial-exec")));
static __thread int none_left __attribute__((tls_model("initial-exec")));
static pthread_key_t slot_key;
static pthread_once_t slot_key_once = PTHREAD_ONCE_INIT;

/* A thread that ends leaves its slot, and the counts in it, to the next. */
static void slot_leave(void *p)
{
	struct stat_slot *s = p;

	atomic_store_explicit(&s->owner, 0, memory_order_release);
}

static void slot_key_make(void)
{
	if (pthread_key_create(&slot_key, slot_leave) != 0)
		slot_key = (pthread_key_t)-1;
}

/* How often a thread that finds every slot taken looks for owners that are gone:
 * a look costs a system call per slot, and a server that runs a thread per
 * connection starts threads all the time. */
#define SLOT_RECLAIM_NS 100000000ull

static _Atomic uint64_t reclaim_at;

/* Whether thread tid is gone: its id names no task (a zombie's slot waits for
 * its reaping). */
static int tid_gone(int32_t tid)
{
	return kill(tid, 0) < 0 && errno == ESRCH;
}

/* A slot for thread me: a free one, or with gone set one whose owner is gone. */
static struct stat_slot *slot_take(struct stats_file *f, int32_t me, int gone)
{
	for (int i = 0; i < STAT_SLOTS; i++) {
		struct stat_slot *s = &f->slot[i];
		int32_t o = atomic_load_explicit(&s->owner, memory_order_relaxed);
		if ((gone ? o == 0 || !tid_gone(o) : o != 0) ||
		    !atomic_compare_exchange_strong(&s->owner, &o, me))
			continue;
		pthread_setspecific(slot_key, s);
		return s;
	}
	return NULL;
}

/* A free slot, or one whose owner is gone without leaving it (a forked child
 * that exited, which runs no thread destructor), or NULL. */
static struct stat_slot *slot_claim(struct stats_file *f)
{
	int32_t me = (int32_t)gettid();
	struct stat_slot *s;

	pthread_once(&slot_key_once, slot_key_make);
	if (f == &fallback_counts || slot_key == (pthread_key_t)-1)
		return NULL;
	if ((s = slot_take(f, me, 0)))
		return s;
	uint64_t now = sys_now_ns(), at = atomic_load(&reclaim_at);
	if (now < at || !atomic_compare_exchange_strong(&reclaim_at, &at, now + SLOT_RECLAIM_NS))
		return NULL;
	return slot_take(f, me, 1);
}

void stat_add(enum stat_id id, uint64_t n)
{
	struct stats_file *f = stats_file();
	unsigned k = (unsigned)id - STAT_HOT_FIRST;

	if (k < STAT_HOT && (my_slot || (!none_left && (my_slot = slot_claim(f)) != NULL))) {
		/* Ours alone: a plain add (a handler that counts in between may lose its count). */
		atomic_store_explicit(&my_slot->v[k],
				      atomic_load_explicit(&my_slot->v[k], memory_order_relaxed) + n,
				      memory_order_relaxed);
		return;
	}
	none_left |= k < STAT_HOT;
	count(f, id, n);
}

void stat_atfork_child(void)
{
	/* Nor does the child's thread, ending, leave the parent's slot. */
	if (my_slot)
		pthread_setspecific(slot_key, NULL);
	my_slot = NULL;
	none_left = 0;
}

void stat_fallback(enum stat_side side, enum decline reason)
{
	struct stats_file *f = stats_file();

	count(f, STAT_CONN_FALLBACK, 1);
	count(f, (enum stat_id)(STAT_FALLBACK_REASON + reason), 1);
	count(f, stat_side_id(side, SIDE_FALLBACK), 1);
	count(f, stat_side_id(side, (enum side_stat)(SIDE_REASON + reason)), 1);
}

const char *const stat_device_names[STAT_DEVICES] = {"lo", "ivshmem"};

void stat_accel(enum stat_side side, int dev, uint64_t tx_size, uint64_t rx_size)
{
	struct stats_file *f = stats_file();

	count(f, STAT_CONN_ACCEL, 1);
	count(f, (enum stat_id)(STAT_DEV_ACCEL + dev), 1);
	count(f, stat_side_id(side, SIDE_ACCEL), 1);
	count(f, stat_side_id(side, (enum side_stat)(SIDE_RING_TX + stat_ring_bucket(tx_size))), 1);
	count(f, stat_side_id(side, (enum side_stat)(SIDE_RING_RX + stat_ring_bucket(rx_size))), 1);
}
