/* Which descriptors usmc tracks. A descriptor that is not tracked costs two loads
 * per call: plain sockets and fallen-back connections leave the table. No call
 * takes a lock here: a lookup pins its object with one compare-and-swap (obj.h),
 * so a signal handler's lookup or removal never waits for the code it interrupted. */
#ifndef USMC_FDTAB_H
#define USMC_FDTAB_H

#include <stdint.h>
#include <sys/socket.h>

#include "../core/conn.h"

/* The table: chunks of slots, allocated as descriptors reach them. Only the inline
 * lookups below read it outside fdtab.c. */
#define FDTAB_CHUNK_BITS 10
#define FDTAB_NCHUNKS 1024 /* descriptors below 1 048 576 */
extern _Atomic(struct obj *) *_Atomic fdtab_chunks[FDTAB_NCHUNKS];

/* fd's slot if it holds an object or a fresh socket's tag now, else NULL. */
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

/* A TCP socket of which nothing has been asked yet but what the kernel answers
 * alone (socket() made it; no connect, listen, dup, epoll_ctl or recorded option
 * since) holds a tag instead of an object: what a socket's state would start
 * from. A connect() to a port nobody accelerates then costs a registry lookup
 * and no state at all; a call that needs the state makes it from the tag
 * (fdtab_get_made). Every other lookup sees no object, as for a plain socket. */
#define FRESH_TAG 1u      /* odd: no object (obj_pin) */
#define FRESH_NONBLOCK 2u /* O_NONBLOCK */
#define FRESH_INET6 4u    /* AF_INET6, else AF_INET */

static inline int fdtab_tagged(const struct obj *v)
{
	return ((uintptr_t)v & FRESH_TAG) != 0;
}

static inline int fresh_family(unsigned tag)
{
	return tag & FRESH_INET6 ? AF_INET6 : AF_INET;
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
	struct obj *o = s ? atomic_exchange(s, NULL) : NULL;

	return fdtab_tagged(o) ? NULL : o;
}
/* fd's tag if it is fresh, else 0. */
static inline unsigned fdtab_fresh(int fd)
{
	_Atomic(struct obj *) *s = fdtab_slot(fd);
	struct obj *v = s ? atomic_load_explicit(s, memory_order_relaxed) : NULL;

	return fdtab_tagged(v) ? (unsigned)(uintptr_t)v : 0;
}
/* fd is a fresh TCP socket (socket() tags it; see FRESH_TAG). */
int fdtab_set_fresh(int fd, unsigned tag);
/* Like fdtab_get(), but a fresh socket's state is made first. NULL only for a
 * descriptor usmc does not follow, when memory ran out, or inside a signal
 * handler, where a fresh socket leaves the table instead (it stays plain). */
struct obj *fdtab_get_made(int fd);
/* If fd is fresh: its tag, which leaves the slot (the socket stays plain), else 0. */
unsigned fdtab_unfresh(int fd);
/* Puts back the tag fdtab_unfresh() took, unless the slot was used since. */
void fdtab_refresh(int fd, unsigned tag);
/* Records O_NONBLOCK in fd's tag; 0 if fd holds none (it may hold an object). */
int fdtab_fresh_nonblock(int fd, int on);
/* Inside a signal handler: release(o, arg) runs at the next fdtab_run_later() outside one. */
void fdtab_release_later(struct obj *o, void (*release)(struct obj *, unsigned long),
			 unsigned long arg);
/* Runs the releases handlers left, unless called inside a handler. Cheap when there is none. */
void fdtab_run_later(void);
/* The tracked descriptors from first to last, fresh ones included (so that close()
 * clears their tags), at most max of them into out, lowest first; returns how many
 * there are in all. */
size_t fdtab_range(unsigned first, unsigned last, int *out, size_t max);
/* Calls fn for every descriptor that holds an object; for fork handlers only (no locking). */
void fdtab_foreach(void (*fn)(int fd, struct obj *o));

/* Defines the wrapper name(params), whose body follows the macro and runs only for
 * a descriptor in the table: any other goes to the kernel by a tail call, before
 * the body's frame is built (two loads and a jump instead of some forty
 * instructions, several times per request of an event loop with plain
 * connections). fd is the parameter looked up; args passes params on. */
#define FDTAB_WRAP(ret, name, fd, params, args)                                     \
	static __attribute__((noinline)) ret name##_tracked params;                 \
	ret name params                                                             \
	{                                                                           \
		return fdtab_slot(fd) ? name##_tracked args : real.name args;       \
	}                                                                           \
	static ret name##_tracked params

static inline struct usock *sock_of(struct obj *o)
{
	return o && o->kind == OBJ_SOCK ? (struct usock *)o : NULL;
}

/* The socket fd names, referenced, if usmc carries it through shared memory
 * (attached or pending), else NULL. */
static inline struct usock *fdtab_accel(int fd)
{
	struct obj *o = fdtab_get(fd);
	struct usock *s = sock_of(o);

	if (s && conn_accel(s))
		return s;
	if (o)
		obj_put(o);
	return NULL;
}

#endif
