/* Doorbell ends a server keeps between connections of one link group, keyed by
 * the segment they served: when the client proposes that segment again with
 * CLC_F_BELL_KEPT, the server takes its end back instead of receiving a new one. */
#ifndef USMC_BELLCACHE_H
#define USMC_BELLCACHE_H

#include <stdint.h>


struct bell_slot {
	uint64_t key;
	int used;
	int fd;
	uint32_t unread;        /* rings it may hold (seg_loc.bell_unread) */
};

struct bellcache {
	struct bell_slot *tab;
	uint32_t cap, n;        /* cap is 0 or a power of two */
};

static inline uint64_t bellcache_key(uint32_t arena_id, uint64_t seg_off)
{
	return (uint64_t)arena_id << 32 | seg_off >> 12;
}

/* Closes a doorbell end (if *fd >= 0) and sets *fd to -1. Every end goes this
 * way, so that epoll first forgets its watch of it (epoll_bell_gone). */
void bell_close(int *fd);

/* Keeps fd, which may hold unread rings, for key, closing any kept before.
 * Returns -1 if out of memory (the caller still owns fd). */
int bellcache_put(struct bellcache *c, uint64_t key, int fd, uint32_t unread);
/* The fd kept for key, now the caller's, and its unread count if asked; -1 if
 * there is none. */
int bellcache_take(struct bellcache *c, uint64_t key, uint32_t *unread);
/* Closes whatever is kept for key. */
void bellcache_drop(struct bellcache *c, uint64_t key);
/* Closes everything and frees the table. */
void bellcache_clear(struct bellcache *c);

#endif
