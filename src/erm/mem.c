/* Memory from usmc_erm_alloc(), and the registration cache over it.
 *
 * Each allocation is a sealed memfd of its own, mapped shared: a peer given
 * it maps exactly what the application allocated, nothing beside it, and
 * writes into it with one memcpy(). Registration finds the allocation holding
 * a region in a table sorted by address (a binary search, no system call), and
 * what a connection sent of an allocation is known by its id, never reused:
 * memory freed and allocated again at the same address is a new allocation,
 * with a new memfd the peer has not seen. The library sees every allocation
 * and every free of such memory, so the cache cannot go stale; the
 * application's own memory is registered by address alone (mr.c). */
#include "erm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../core/sys.h"
#include "../core/memfd.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct erm_alloc **table; /* sorted by base */
static size_t n, cap;
static uint64_t next_id;

/* The first entry whose allocation ends past addr. Called with lock held. */
static size_t search(const unsigned char *addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (table[mid]->base + table[mid]->size <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void *usmc_erm_alloc(size_t len)
{
	uint64_t size = ((uint64_t)len + 4095) & ~4095ull;
	struct erm_alloc *a;

	if (!len || size < len || size > ERM_REGION_MAX) {
		errno = EINVAL;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	int fd = a ? memfd_sealed("usmc-erm", size) : -ENOMEM;
	if (fd < 0) {
		free(a);
		errno = -fd;
		return NULL;
	}
	a->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (a->base == MAP_FAILED) {
		int e = errno;
		real.close(fd);
		free(a);
		errno = e;
		return NULL;
	}
	a->size = size;
	a->fd = sys_fd_high(fd);
	pthread_mutex_lock(&lock);
	struct erm_alloc **t = n < cap ? table : realloc(table, (cap ? 2 * cap : 16) * sizeof(*t));
	if (!t) {
		pthread_mutex_unlock(&lock);
		munmap(a->base, size);
		real.close(a->fd);
		free(a);
		errno = ENOMEM;
		return NULL;
	}
	if (t != table) {
		table = t;
		cap = cap ? 2 * cap : 16;
	}
	a->id = ++next_id;
	size_t i = search(a->base);
	memmove(&table[i + 1], &table[i], (n - i) * sizeof(*table));
	table[i] = a;
	n++;
	pthread_mutex_unlock(&lock);
	return a->base;
}

int usmc_erm_free(void *addr)
{
	struct erm_alloc *a = NULL;
	int e = 0;

	if (!addr)
		return 0;
	pthread_mutex_lock(&lock);
	size_t i = search(addr);
	if (i < n && table[i]->base == addr) {
		a = table[i];
		if (a->refs) {
			e = EBUSY;
			a = NULL;
		} else {
			memmove(&table[i], &table[i + 1], (n - i - 1) * sizeof(*table));
			n--;
		}
	} else {
		e = EINVAL;
	}
	pthread_mutex_unlock(&lock);
	if (e) {
		errno = e;
		return -1;
	}
	munmap(a->base, a->size);
	real.close(a->fd);
	free(a);
	return 0;
}

struct erm_alloc *erm_alloc_find(const void *addr, uint64_t len)
{
	const unsigned char *p = addr;
	struct erm_alloc *a = NULL;

	pthread_mutex_lock(&lock);
	size_t i = search(p);
	if (i < n && p >= table[i]->base &&
	    erm_within((uint64_t)(p - table[i]->base), len, table[i]->size)) {
		a = table[i];
		a->refs++;
	}
	pthread_mutex_unlock(&lock);
	return a;
}

void erm_alloc_put(struct erm_alloc *a)
{
	pthread_mutex_lock(&lock);
	a->refs--;
	pthread_mutex_unlock(&lock);
}

/* fork() must not find the table's lock held by another thread: the child's
 * copy of a connection's state lets go of its references (erm.c). */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&lock);
}

static void atfork_release(void)
{
	pthread_mutex_unlock(&lock);
}

void erm_mem_init(void)
{
	pthread_atfork(atfork_prepare, atfork_release, atfork_release);
}
