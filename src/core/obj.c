#include "obj.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
/* A pooled object's body is out of bounds until it is handed out again: a use
 * after free is still caught, everywhere but in the head. */
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* A pooled object: its head, then the link in its pool's free list, then what stays
 * poisoned under AddressSanitizer (the link stays readable to its leak checker). */
struct pooled {
	struct obj o;
	struct pooled *next;
	char body[];
};

/* The locks are held across fork() (obj_atfork_prepare), as the C library holds its
 * allocator's: a child must not inherit a list that another thread was changing. */
static struct pool {
	pthread_mutex_t lock;
	struct pooled *free;
} pools[OBJ_KINDS] = {[0 ... OBJ_KINDS - 1] = {PTHREAD_MUTEX_INITIALIZER, NULL}};

/* Sizes by kind, for poisoning: learnt at the first allocation. */
static _Atomic size_t sizes[OBJ_KINDS];

void *obj_alloc(enum obj_kind kind, size_t size)
{
	struct pool *p = &pools[kind];
	struct pooled *b;

	pthread_mutex_lock(&p->lock);
	if ((b = p->free)) {
		UNPOISON(b->body, size - sizeof(*b));
		p->free = b->next;
	}
	pthread_mutex_unlock(&p->lock);
	if (!b) {
		if (size < sizeof(*b) || !(b = malloc(size)))
			return NULL;
		atomic_store_explicit(&sizes[kind], size, memory_order_relaxed);
		b->o.kind = kind;
		atomic_init(&b->o.refs, 0);
	}
	/* The head stays: a reader that still holds an old pointer to this object may
	 * be trying for a reference. */
	memset((char *)b + sizeof(b->o), 0, size - sizeof(b->o));
	atomic_store(&b->o.fdrefs, 1);
	atomic_store(&b->o.refs, 1);
	return b;
}

void obj_free(struct obj *o)
{
	struct pooled *b = (struct pooled *)o;
	struct pool *p = &pools[o->kind];

	atomic_store(&o->refs, 0); /* also for one that never had its reference taken */
	pthread_mutex_lock(&p->lock);
	b->next = p->free;
	p->free = b;
	POISON(b->body, atomic_load_explicit(&sizes[o->kind], memory_order_relaxed) - sizeof(*b));
	pthread_mutex_unlock(&p->lock);
}

struct obj *obj_pin(_Atomic(struct obj *) *slot, void (*put)(struct obj *))
{
	for (;;) {
		struct obj *o = atomic_load_explicit(slot, memory_order_acquire);
		if (!o || ((uintptr_t)o & 1))
			return NULL;
		if (obj_tryget(o)) {
			if (atomic_load(slot) == o)
				return o;
			put(o);
		}
	}
}

void obj_atfork_prepare(void)
{
	for (int k = 0; k < OBJ_KINDS; k++)
		pthread_mutex_lock(&pools[k].lock);
}

void obj_atfork_release(void)
{
	for (int k = 0; k < OBJ_KINDS; k++)
		pthread_mutex_unlock(&pools[k].lock);
}
