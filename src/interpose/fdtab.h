/* Which descriptors usmc tracks. A descriptor that is not tracked costs one load
 * per call: plain sockets and fallen-back connections leave the table. */
#ifndef USMC_FDTAB_H
#define USMC_FDTAB_H

#include "../core/conn.h"

/* Returns the object with a reference held (release with obj_put), or NULL. */
struct obj *fdtab_get(int fd);
/* Installs obj at fd (the caller's reference moves into the table). */
int fdtab_set(int fd, struct obj *o);
/* fd is one more descriptor of o (dup, or one that came with o through exec or
 * SCM_RIGHTS): o gains a reference for it. */
int fdtab_alias(int fd, struct obj *o);
/* Removes and returns the table's reference, or NULL. Inside a signal handler it does not
 * wait for the table's lock, which the interrupted code may hold: the reference it returns
 * there must be released through fdtab_release_later(). */
struct obj *fdtab_take(int fd);
/* Inside a signal handler: release(o, arg) runs at the next fdtab_run_later() outside one,
 * once no reader can still be taking a reference to o. */
void fdtab_release_later(struct obj *o, void (*release)(struct obj *, unsigned long),
			 unsigned long arg);
/* Runs the releases handlers left, unless called inside a handler. Cheap when there is none. */
void fdtab_run_later(void);
void obj_put(struct obj *o);
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
