/* link: src/core/obj.c */
/* threads */
/* The objects the descriptor table points at: pooled by kind, handed out zeroed,
 * and pinned from a slot without a lock while other threads replace and free
 * what the slot holds. */
#include "obj.h"
#include "check.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

struct thing {
	struct obj o;
	uint64_t id;          /* set before it is published, never changed while it is */
	uint64_t copy[8];     /* each a copy of id */
};

static void put(struct obj *o)
{
	if (atomic_fetch_sub(&o->refs, 1) == 1)
		obj_free(o);
}

static void test_reuse_is_zeroed(void)
{
	struct thing *t = obj_alloc(OBJ_SOCK, sizeof(*t));
	CHECK(t != NULL);
	CHECK_EQ(t->o.kind, OBJ_SOCK);
	CHECK_EQ(atomic_load(&t->o.refs), 1);
	CHECK_EQ(atomic_load(&t->o.fdrefs), 1);
	CHECK_EQ(t->id, 0);
	t->id = 7;
	memset(t->copy, 0xab, sizeof(t->copy));
	atomic_store(&t->o.fdrefs, 3);
	put(&t->o);

	struct thing *u = obj_alloc(OBJ_SOCK, sizeof(*u));
	CHECK(u == t); /* the pool's, not the C library's */
	CHECK_EQ(u->o.kind, OBJ_SOCK);
	CHECK_EQ(atomic_load(&u->o.refs), 1);
	CHECK_EQ(atomic_load(&u->o.fdrefs), 1);
	CHECK_EQ(u->id, 0);
	CHECK_EQ(u->copy[7], 0);
	put(&u->o);
}

static void test_kinds_apart(void)
{
	struct thing *t = obj_alloc(OBJ_SOCK, sizeof(*t));
	put(&t->o);
	struct thing *e = obj_alloc(OBJ_EPOLL, sizeof(*e));
	CHECK(e != t);
	CHECK_EQ(e->o.kind, OBJ_EPOLL);
	put(&e->o);
}

static void test_tryget_after_last(void)
{
	struct thing *t = obj_alloc(OBJ_SOCK, sizeof(*t));
	CHECK(obj_tryget(&t->o));
	CHECK_EQ(atomic_load(&t->o.refs), 2);
	put(&t->o);
	put(&t->o);
	CHECK(!obj_tryget(&t->o)); /* in the pool: no reference to be had */
	CHECK_EQ(atomic_load(&t->o.refs), 0);
}

static void test_pin_empty_moved_tagged(void)
{
	_Atomic(struct obj *) slot = NULL;
	CHECK(obj_pin(&slot, put) == NULL);

	struct thing *t = obj_alloc(OBJ_SOCK, sizeof(*t));
	atomic_store(&slot, &t->o);
	struct obj *o = obj_pin(&slot, put);
	CHECK(o == &t->o);
	CHECK_EQ(atomic_load(&t->o.refs), 2);
	put(o);
	put(atomic_exchange(&slot, NULL));
	CHECK(obj_pin(&slot, put) == NULL);
	/* A tag (an odd value: a fresh socket's, in the descriptor table) is no object. */
	atomic_store(&slot, (struct obj *)(uintptr_t)5);
	CHECK(obj_pin(&slot, put) == NULL);
}

/* One thread keeps replacing the slot's object and dropping the old one, as close() and
 * socket() do; the others pin it and check that what they hold is whole and theirs until
 * they let go. A pin that returned an object the pool had handed out again would read it
 * while the writer rewrites it: seldom torn on two cores, but a race ThreadSanitizer
 * reports every time (this program also runs under it). */
#define PINNERS 3
#define ROUNDS 200000

static _Atomic(struct obj *) shared_slot;
static atomic_int writer_done;
static atomic_int torn;
static atomic_long pins;

static void *pinner(void *arg)
{
	(void)arg;
	while (!atomic_load(&writer_done)) {
		struct obj *o = obj_pin(&shared_slot, put);
		if (!o)
			continue;
		struct thing *t = (struct thing *)o;
		uint64_t id = t->id;
		for (int k = 0; k < 8; k++)
			if (t->copy[k] != id || id == 0)
				atomic_fetch_add(&torn, 1);
		if (atomic_load(&o->refs) < 1)
			atomic_fetch_add(&torn, 1); /* ours at least */
		atomic_fetch_add(&pins, 1);
		put(o);
	}
	return NULL;
}

static void test_pin_against_frees(void)
{
	pthread_t th[PINNERS];

	for (int i = 0; i < PINNERS; i++)
		pthread_create(&th[i], NULL, pinner, NULL);
	for (uint64_t id = 1; id <= ROUNDS; id++) {
		struct thing *t = obj_alloc(OBJ_SOCK, sizeof(*t));
		if (!t)
			break;
		t->id = id;
		for (int k = 0; k < 8; k++)
			t->copy[k] = id;
		struct obj *old = atomic_exchange(&shared_slot, &t->o);
		if (old)
			put(old);
	}
	atomic_store(&writer_done, 1);
	for (int i = 0; i < PINNERS; i++)
		pthread_join(th[i], NULL);
	struct obj *last = atomic_exchange(&shared_slot, NULL);
	if (last)
		put(last);
	CHECK_EQ(atomic_load(&torn), 0);
	CHECK(atomic_load(&pins) > 0);
}

int main(void)
{
	RUN(test_reuse_is_zeroed);
	RUN(test_kinds_apart);
	RUN(test_tryget_after_last);
	RUN(test_pin_empty_moved_tagged);
	RUN(test_pin_against_frees);
	return check_report();
}
