#include "stats.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "sys.h"

static struct stats_file fallback_counts;
static struct stats_file *_Atomic mapped;
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const names[STAT_FALLBACK_REASON] = {
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
};

const char *stat_name(enum stat_id id)
{
	return id < STAT_FALLBACK_REASON ? names[id] : NULL;
}

static struct stats_file *stats_map(void)
{
	char path[4096];
	uint32_t rnd = 0;
	struct stats_file *f = &fallback_counts;

	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
		rnd = (uint32_t)sys_now_ns();
	if (snprintf(path, sizeof(path), "%s/stats", cfg.rundir) >= (int)sizeof(path) ||
	    config_rundir_ready() < 0)
		return f;
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/stats/%d-%08x", cfg.rundir, (int)getpid(), rnd);
	int fd = real.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return f;
	if (ftruncate(fd, sizeof(struct stats_file)) == 0) {
		void *p = mmap(NULL, sizeof(struct stats_file), PROT_READ | PROT_WRITE, MAP_SHARED,
			       fd, 0);
		if (p != MAP_FAILED) {
			f = p;
			f->nstats = STAT_MAX;
			f->version = STATS_VERSION;
			atomic_store(&f->magic, STATS_MAGIC);
		}
	}
	real.close(fd);
	return f;
}

void stat_add(enum stat_id id, uint64_t n)
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
	atomic_fetch_add_explicit(&f->v[id], n, memory_order_relaxed);
}

void stat_fallback(enum decline reason)
{
	stat_add(STAT_CONN_FALLBACK, 1);
	stat_add((enum stat_id)(STAT_FALLBACK_REASON + reason), 1);
}
