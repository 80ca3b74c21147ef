#include "socktab.h"

#include "../dev/dev.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conn.h"
#include "procfile.h"
#include "sys.h"

static struct socktab_hdr *_Atomic table;
static _Atomic int tried;
static int lock_fd = -1;
static size_t table_bytes;
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

/* One slot per descriptor the process may ever have: programs raise their soft
 * limit up to the hard one, often after their first socket. */
static uint32_t slots_wanted(void)
{
	struct rlimit rl;
	rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_max : 1024;

	if (n == RLIM_INFINITY || n > SOCKTAB_MAX_SLOTS)
		n = SOCKTAB_MAX_SLOTS;
	return n < 1024 ? 1024 : (uint32_t)n;
}

static struct socktab_hdr *table_get(void)
{
	struct socktab_hdr *t = atomic_load_explicit(&table, memory_order_acquire);

	if (t || tried)
		return t;
	pthread_mutex_lock(&map_lock);
	t = atomic_load(&table);
	if (!t && !tried) {
		struct stat st;
		uint32_t n = slots_wanted();
		size_t bytes = sizeof(*t) + (size_t)n * sizeof(struct socktab_slot);
		t = procfile_create("socks", bytes, &lock_fd);
		if (t) {
			table_bytes = bytes;
			t->slot_size = sizeof(struct socktab_slot);
			t->nslots = n;
			t->pid = (int32_t)getpid();
			/* Read here, not inherited: a child forked after unshare(CLONE_NEWPID)
			 * lives in another namespace than its parent. */
			if (stat("/proc/self/ns/pid", &st) == 0)
				t->pidns = (uint32_t)st.st_ino;
			t->version = SOCKTAB_VERSION;
			atomic_store(&t->magic, SOCKTAB_MAGIC);
		}
		tried = 1;
		atomic_store_explicit(&table, t, memory_order_release);
	}
	pthread_mutex_unlock(&map_lock);
	return t;
}

static struct socktab_slot *slot_of(struct socktab_hdr *t, int fd)
{
	return (struct socktab_slot *)(t + 1) + fd;
}

static void slot_write(struct socktab_hdr *t, int fd, const struct socktab_slot *v)
{
	struct socktab_slot *sl = slot_of(t, fd);
	uint32_t q = atomic_load_explicit(&sl->seq, memory_order_relaxed);

	/* Two threads may change one socket's state at once (an attach seen by one
	 * while another closes): writers take turns, each briefly. */
	for (;;) {
		if (q & 1)
			q = atomic_load_explicit(&sl->seq, memory_order_relaxed);
		else if (atomic_compare_exchange_weak_explicit(&sl->seq, &q, q + 1,
							       memory_order_acquire,
							       memory_order_relaxed))
			break;
	}
	atomic_thread_fence(memory_order_release);
	memcpy((char *)sl + sizeof(sl->seq), (const char *)v + sizeof(v->seq),
	       sizeof(*sl) - sizeof(sl->seq));
	atomic_store_explicit(&sl->seq, q + 2, memory_order_release);
	uint32_t used = atomic_load_explicit(&t->used, memory_order_relaxed);
	while (used <= (uint32_t)fd &&
	       !atomic_compare_exchange_weak(&t->used, &used, (uint32_t)fd + 1))
		;
}

static enum socktab_state state_of(int mode)
{
	switch (mode) {
	case MODE_LISTEN: return SOCKTAB_LISTEN;
	case MODE_PENDING: return SOCKTAB_PENDING;
	case MODE_SHM: return SOCKTAB_SHM;
	case MODE_PLAIN: return SOCKTAB_TCP;
	default: return SOCKTAB_FREE;
	}
}

static void publish_slot(int fd, const struct socktab_slot *v)
{
	struct socktab_hdr *t = table_get();

	if (t && fd >= 0 && (uint32_t)fd < t->nslots)
		slot_write(t, fd, v);
}

void socktab_note(int fd, const struct usock *s)
{
	struct socktab_slot v = {.arena_fd = -1};

	v.state = (uint8_t)state_of(atomic_load(&s->mode));
	v.server = (uint8_t)(s->server != 0);
	if (v.state == SOCKTAB_TCP)
		v.decline = DECL_INTERNAL;
	if (s->seg.hdr && (v.state == SOCKTAB_PENDING || v.state == SOCKTAB_SHM)) {
		v.conn_id = s->conn_id;
		v.ring_size[0] = (uint32_t)s->seg.ring_size[s->server ? 1 : 0];
		v.ring_size[1] = (uint32_t)s->seg.ring_size[s->server ? 0 : 1];
		v.arena_fd = s->seg.arena ? s->seg.arena->fd : -1;
		v.seg_off = s->seg.off;
		v.device = (uint8_t)s->dev->kind;
	}
	publish_slot(fd, &v);
}

void socktab_fell_back(int fd, int server, enum decline why)
{
	struct socktab_slot v = {.arena_fd = -1, .state = SOCKTAB_TCP,
				 .server = (uint8_t)(server != 0), .decline = (uint8_t)why};

	publish_slot(fd, &v);
}

void socktab_closed(int fd)
{
	struct socktab_hdr *t = atomic_load_explicit(&table, memory_order_acquire);
	struct socktab_slot v = {.arena_fd = -1};

	if (t && fd >= 0 && (uint32_t)fd < atomic_load(&t->used))
		slot_write(t, fd, &v);
}

void socktab_atfork_child(int now)
{
	struct socktab_hdr *t = atomic_load(&table);

	/* The child starts its own table at its first state change, unless asked
	 * for it now. Publishing what it inherited here would cost every fork
	 * (most are followed by an exec) a file and a system call per socket. */
	if (t)
		munmap(t, table_bytes);
	if (lock_fd >= 0)
		real.close(lock_fd);
	lock_fd = -1;
	tried = 0;
	atomic_store(&table, NULL);
	/* Another thread of the parent may have held it at fork(). */
	pthread_mutex_init(&map_lock, NULL);
	if (now)
		table_get();
}
