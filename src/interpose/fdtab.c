#include "fdtab.h"

#include <errno.h>
#include <stdlib.h>

#include "../core/sys.h"
#include "epoll.h"

#define CHUNK (1 << FDTAB_CHUNK_BITS)

_Atomic(struct obj *) *_Atomic fdtab_chunks[FDTAB_NCHUNKS];

/* fd's slot, its chunk allocated on the way. */
static _Atomic(struct obj *) *slot_made(int fd)
{
	if (fd < 0 || fd >= CHUNK * FDTAB_NCHUNKS)
		return NULL;
	_Atomic(struct obj *) *_Atomic *chunk = &fdtab_chunks[fd >> FDTAB_CHUNK_BITS];
	_Atomic(struct obj *) *c = atomic_load_explicit(chunk, memory_order_acquire);
	if (!c) {
		/* Nothing is allocated inside a signal handler: the descriptor
		 * stays out of the table, its socket plain. */
		if (sys_in_signal())
			return NULL;
		c = calloc(CHUNK, sizeof(*c));
		if (!c)
			return NULL;
		_Atomic(struct obj *) *expect = NULL;
		if (!atomic_compare_exchange_strong(chunk, &expect, c)) {
			free(c);
			c = expect;
		}
	}
	return &c[fd & (CHUNK - 1)];
}

int fdtab_set(int fd, struct obj *o)
{
	_Atomic(struct obj *) *s = slot_made(fd);

	if (!s)
		return -ENOMEM;
	struct obj *old = atomic_exchange(s, o);
	if (old && !fdtab_tagged(old))
		obj_put(old);
	return 0;
}

int fdtab_set_fresh(int fd, unsigned tag)
{
	return fdtab_set(fd, (struct obj *)(uintptr_t)(tag | FRESH_TAG));
}

struct obj *fdtab_get_made(int fd)
{
	_Atomic(struct obj *) *slot = fdtab_slot(fd);
	struct obj *v = slot ? atomic_load(slot) : NULL;

	while (fdtab_tagged(v)) {
		/* Inside a signal handler, whose interrupted code may hold the
		 * socket pool's lock or malloc's, the socket leaves the table
		 * instead: plain for good, as if its peer were. */
		if (sys_in_signal()) {
			fdtab_unfresh(fd);
			return NULL;
		}
		unsigned tag = (unsigned)(uintptr_t)v;
		struct usock *s = usock_new(fresh_family(tag), (tag & FRESH_NONBLOCK) != 0);
		if (!s)
			return NULL;
		usock_get(s); /* the caller's, besides the table's */
		if (atomic_compare_exchange_strong(slot, &v, &s->o))
			return &s->o;
		/* Made, closed or retagged meanwhile: v is what the slot holds now. */
		usock_put(s);
		usock_put(s);
	}
	return fdtab_get(fd);
}

/* If fd holds a tag: puts (tag & keep) | set in its place (0 empties the slot)
 * and returns the tag it replaced; else 0. */
static unsigned tag_change(int fd, uintptr_t keep, uintptr_t set)
{
	_Atomic(struct obj *) *slot = fdtab_slot(fd);
	struct obj *v = slot ? atomic_load(slot) : NULL;

	while (fdtab_tagged(v))
		if (atomic_compare_exchange_weak(slot, &v, (struct obj *)(((uintptr_t)v & keep) | set)))
			return (unsigned)(uintptr_t)v;
	return 0;
}

unsigned fdtab_unfresh(int fd)
{
	return tag_change(fd, 0, 0);
}

void fdtab_refresh(int fd, unsigned tag)
{
	_Atomic(struct obj *) *slot = slot_made(fd);
	struct obj *none = NULL;

	if (slot)
		atomic_compare_exchange_strong(slot, &none, (struct obj *)(uintptr_t)tag);
}

int fdtab_fresh_nonblock(int fd, int on)
{
	return tag_change(fd, ~(uintptr_t)FRESH_NONBLOCK, on ? FRESH_NONBLOCK : 0) != 0;
}

int fdtab_alias(int fd, struct obj *o)
{
	atomic_fetch_add(&o->refs, 1);
	atomic_fetch_add(&o->fdrefs, 1);
	int r = fdtab_set(fd, o);
	if (r < 0) {
		atomic_fetch_sub(&o->fdrefs, 1);
		obj_put(o);
	}
	return r;
}

/* Releases waiting for a call outside any signal handler: one slot each, FREE, then
 * FILLING while a handler writes it, FULL, RUNNING while it is released. Handlers that
 * release more than this before the process makes one such call keep the rest: a bounded
 * leak, where releasing inside the handler could take a lock the interrupted code holds. */
#define LATER_MAX 1024
enum { LATER_FREE, LATER_FILLING, LATER_FULL, LATER_RUNNING };
static struct {
	_Atomic int state;
	struct obj *o;
	void (*release)(struct obj *, unsigned long);
	unsigned long arg;
} later[LATER_MAX];
static atomic_int nlater;

void fdtab_release_later(struct obj *o, void (*release)(struct obj *, unsigned long),
			 unsigned long arg)
{
	for (int i = 0; i < LATER_MAX; i++) {
		int free_ = LATER_FREE;
		if (!atomic_compare_exchange_strong(&later[i].state, &free_, LATER_FILLING))
			continue;
		later[i].o = o;
		later[i].release = release;
		later[i].arg = arg;
		atomic_store(&later[i].state, LATER_FULL);
		atomic_fetch_add(&nlater, 1);
		return;
	}
}

void fdtab_run_later(void)
{
	if (!atomic_load_explicit(&nlater, memory_order_relaxed) || sys_in_signal())
		return;
	for (int i = 0; i < LATER_MAX; i++) {
		int full = LATER_FULL;
		if (!atomic_compare_exchange_strong(&later[i].state, &full, LATER_RUNNING))
			continue;
		later[i].release(later[i].o, later[i].arg);
		atomic_fetch_sub(&nlater, 1);
		atomic_store(&later[i].state, LATER_FREE);
	}
}

size_t fdtab_range(unsigned first, unsigned last, int *out, size_t max)
{
	size_t n = 0;

	for (unsigned c = first / CHUNK; c < FDTAB_NCHUNKS && c <= last / CHUNK; c++) {
		_Atomic(struct obj *) *chunk = atomic_load(&fdtab_chunks[c]);
		for (unsigned i = 0; chunk && i < CHUNK; i++) {
			unsigned fd = c * CHUNK + i;
			if (fd >= first && fd <= last && atomic_load(&chunk[i])) {
				if (n < max)
					out[n] = (int)fd;
				n++;
			}
		}
	}
	return n;
}

void fdtab_foreach(void (*fn)(int fd, struct obj *o))
{
	for (int c = 0; c < FDTAB_NCHUNKS; c++) {
		_Atomic(struct obj *) *chunk = atomic_load(&fdtab_chunks[c]);
		for (int i = 0; chunk && i < CHUNK; i++) {
			struct obj *o = atomic_load(&chunk[i]);
			if (o && !fdtab_tagged(o))
				fn(c * CHUNK + i, o);
		}
	}
}

void obj_put(struct obj *o)
{
	if (o->kind == OBJ_SOCK)
		usock_put((struct usock *)o);
	else if (o->kind == OBJ_EPOLL)
		epoll_shadow_put(o);
}
