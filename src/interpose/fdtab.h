/* Which descriptors usmc tracks. A descriptor that is not tracked costs two loads
 * per call: plain sockets and fallen-back connections leave the table. No call
 * takes a lock here: a lookup pins its object with one compare-and-swap (obj.h),
 * so a signal handler's lookup or removal never waits for the code it interrupted. */
#ifndef USMC_FDTAB_H
#define USMC_FDTAB_H

#include "../core/conn.h"

/* The table: chunks of slots, allocated as descriptors reach them. Only the inline
 * lookups below read it outside fdtab.c. */
#define FDTAB_CHUNK_BITS 10
#define FDTAB_NCHUNKS 1024 /* descriptors below 1 048 576 */
extern _Atomic(struct obj *) *_Atomic fdtab_chunks[FDTAB_NCHUNKS];

/* fd's slot if it holds an object now, else NULL. */
static inline _Atomic(struct obj *) *fdtab_slot(int fd)
{
	if ((unsigned)fd >= FDTAB_NCHUNKS << FDTAB_CHUNK_BITS)
		return NULL;
	_Atomic(struct obj *) *c = atomic_load_explicit(&fdtab_chunks[fd >> FDTAB_CHUNK_BITS],
							memory_order_acquire);
	if (!c)
		return NULL;
	c += fd & ((1 << FDTAB_CHUNK_BITS) - 1);
	return atomic_load_explicit(c, memory_order_relaxed) ? c : NULL;
}

/* Drops a reference: the last frees the object (a socket's closes its connection). */
void obj_put(struct obj *o);

/* Returns the object with a reference held (release with obj_put), or NULL. */
static inline struct obj *fdtab_get(int fd)
{
	_Atomic(struct obj *) *s = fdtab_slot(fd);

	return s ? obj_pin(s, obj_put) : NULL;
}

/* Installs obj at fd (the caller's reference moves into the table). */
int fdtab_set(int fd, struct obj *o);
/* fd is one more descriptor of o (dup, or one that came with o through exec or
 * SCM_RIGHTS): o gains a reference for it. */
int fdtab_alias(int fd, struct obj *o);
/* Removes and returns the table's reference, or NULL. Inside a signal handler, the
 * reference it returns must be released through fdtab_release_later(): a release may
 * close a connection, which takes locks the interrupted code may hold. */
static inline struct obj *fdtab_take(int fd)
{
	_Atomic(struct obj *) *s = fdtab_slot(fd);

	return s ? atomic_exchange(s, NULL) : NULL;
}
/* Inside a signal handler: release(o, arg) runs at the next fdtab_run_later() outside one. */
void fdtab_release_later(struct obj *o, void (*release)(struct obj *, unsigned long),
			 unsigned long arg);
/* Runs the releases handlers left, unless called inside a handler. Cheap when there is none. */
void fdtab_run_later(void);
/* The tracked descriptors from first to last, at most max of them into out,
 * lowest first; returns how many there are in all. */
size_t fdtab_range(unsigned first, unsigned last, int *out, size_t max);
/* Calls fn for every tracked descriptor; for fork handlers only (no locking). */
void fdtab_foreach(void (*fn)(int fd, struct obj *o));

static inline struct usock *sock_of(struct obj *o)
{
	return o && o->kind == OBJ_SOCK ? (struct usock *)o : NULL;
}

#endif
