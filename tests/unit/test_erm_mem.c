/* link: src/erm/mem.c src/core/memfd.c src/core/sys.c -ldl */
/* Memory from usmc_erm_alloc() and the registration cache over it: a region is found in the
 * allocation that holds all of it, never in one it runs past; an allocation registered cannot
 * be freed; memory freed and allocated again at the same address is a new allocation (a new
 * id and memfd), never the old one the peer may still hold; and lookups among many
 * allocations find the right one. */
#include "check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../src/erm/erm.h"

static void test_find(void)
{
	unsigned char *p = usmc_erm_alloc(10000);
	struct erm_alloc *a;

	CHECK(p != NULL);
	CHECK(((uintptr_t)p & 4095) == 0);
	a = erm_alloc_find(p, 1);
	CHECK(a && a->base == p && a->size == 12288);
	erm_alloc_put(a);
	a = erm_alloc_find(p + 100, 12288 - 100);
	CHECK(a != NULL);
	erm_alloc_put(a);
	CHECK(erm_alloc_find(p + 100, 12288 - 99) == NULL);
	CHECK(erm_alloc_find(p - 1, 2) == NULL);
	CHECK(erm_alloc_find(p + 12288, 1) == NULL);
	CHECK(erm_alloc_find(p, UINT64_MAX) == NULL);
	CHECK_EQ(usmc_erm_free(p), 0);
	CHECK(erm_alloc_find(p, 1) == NULL);
}

static void test_busy(void)
{
	unsigned char *p = usmc_erm_alloc(4096);
	struct erm_alloc *a = erm_alloc_find(p, 4096);

	CHECK(a != NULL);
	errno = 0;
	CHECK(usmc_erm_free(p) == -1 && errno == EBUSY);
	erm_alloc_put(a);
	CHECK_EQ(usmc_erm_free(p), 0);
	errno = 0;
	CHECK(usmc_erm_free(p) == -1 && errno == EINVAL);
}

/* Freed, then allocated at the same address: a new allocation with a new memfd. */
static void test_same_address(void)
{
	int same = 0;

	for (int i = 0; i < 20; i++) {
		unsigned char *p = usmc_erm_alloc(65536);
		struct erm_alloc *a = erm_alloc_find(p, 1);
		uint64_t id = a->id;
		struct stat st1, st2;
		CHECK(fstat(a->fd, &st1) == 0);
		erm_alloc_put(a);
		CHECK_EQ(usmc_erm_free(p), 0);
		unsigned char *q = usmc_erm_alloc(65536);
		struct erm_alloc *b = erm_alloc_find(q, 1);
		CHECK(b && b->id > id && fstat(b->fd, &st2) == 0 && st1.st_ino != st2.st_ino);
		same += q == p;
		erm_alloc_put(b);
		CHECK_EQ(usmc_erm_free(q), 0);
	}
	printf("    allocated again at the same address %d times of 20\n", same);
}

static void test_many(void)
{
	enum { N = 300 };
	unsigned char *p[N];

	for (int i = 0; i < N; i++)
		p[i] = usmc_erm_alloc((size_t)(i % 7 + 1) * 4096);
	for (int round = 0; round < 3; round++)
		for (int i = round; i < N; i += 3) {
			size_t size = (size_t)(i % 7 + 1) * 4096;
			struct erm_alloc *a = erm_alloc_find(p[i] + size / 2, size / 2);
			if (!CHECK(a && a->base == p[i]))
				continue;
			erm_alloc_put(a);
		}
	for (int i = 0; i < N; i += 2)
		CHECK_EQ(usmc_erm_free(p[i]), 0);
	for (int i = 1; i < N; i += 2) {
		struct erm_alloc *a = erm_alloc_find(p[i], 4096);
		if (CHECK(a && a->base == p[i]))
			erm_alloc_put(a);
		CHECK(erm_alloc_find(p[i - 1], 1) == NULL);
		CHECK_EQ(usmc_erm_free(p[i]), 0);
	}
}

static void test_bad_sizes(void)
{
	errno = 0;
	CHECK(usmc_erm_alloc(0) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(usmc_erm_alloc(SIZE_MAX) == NULL && errno == EINVAL);
	CHECK_EQ(usmc_erm_free(NULL), 0);
}

int main(void)
{
	RUN(test_find);
	RUN(test_busy);
	RUN(test_same_address);
	RUN(test_many);
	RUN(test_bad_sizes);
	return check_report();
}
