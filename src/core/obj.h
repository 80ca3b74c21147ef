/* What the descriptor table points at: sockets and epoll sets. Their memory is
 * type-stable: a freed object goes back to a pool of its kind, never to the C
 * library, so its reference count stays a reference count for the life of the
 * process. A thread that loaded a pointer from the table just before another
 * thread's close() released the object can still try for a reference
 * (obj_tryget), fail and look again: the table's readers take no lock. The
 * memory held is the most objects of each kind that were ever alive at once. */
#ifndef USMC_OBJ_H
#define USMC_OBJ_H

#include <stdatomic.h>
#include <stddef.h>

enum obj_kind { OBJ_SOCK = 1, OBJ_EPOLL, OBJ_KINDS };

/* Common head of every such object. */
struct obj {
	enum obj_kind kind;         /* set once: the pool reuses it for the same kind */
	_Atomic int refs;           /* the fd table's reference + calls in progress */
	_Atomic int fdrefs;         /* descriptors naming it (dup) */
};

/* A zeroed object of size bytes (every object of a kind has the same size) with
 * one reference and one descriptor, or NULL. */
void *obj_alloc(enum obj_kind kind, size_t size);
/* Back to its pool, once its last reference is gone. */
void obj_free(struct obj *o);
/* Takes a reference unless the last one is gone already (the object is being
 * freed, or sits in its pool). */
static inline int obj_tryget(struct obj *o)
{
	int r = atomic_load_explicit(&o->refs, memory_order_relaxed);

	do {
		if (r <= 0)
			return 0;
	} while (!atomic_compare_exchange_weak(&o->refs, &r, r + 1));
	return 1;
}

/* A reference to the object *slot points at, or NULL. A reference taken to an
 * object that left the slot meanwhile (the pool may have handed it out again) is
 * dropped with put and the slot read again. An odd value in a slot is a tag its
 * owner gives meaning to (fdtab.h), not an object: NULL for it too. */
struct obj *obj_pin(_Atomic(struct obj *) *slot, void (*put)(struct obj *));

/* fork() must not find a pool's lock held by another thread: prepare takes them, and
 * release lets them go in the parent and, held by the thread that forked, the child. */
void obj_atfork_prepare(void);
void obj_atfork_release(void);

#endif
