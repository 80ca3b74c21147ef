/* Doorbells a server keeps between connections of one link group, keyed by the
 * segment they served: when the client proposes that segment again with
 * CLC_F_BELLS_KEPT, the server takes them back instead of receiving new ones. */
#ifndef USMC_BELLCACHE_H
#define USMC_BELLCACHE_H

#include <stdint.h>

#include "clc.h"

struct bell_slot {
	uint64_t key;
	int used;
	int fds[CLC_NBELLS];
};

struct bellcache {
	struct bell_slot *tab;
	uint32_t cap, n;        /* cap is 0 or a power of two */
};

static inline uint64_t bellcache_key(uint32_t arena_id, uint64_t seg_off)
{
	return (uint64_t)arena_id << 32 | seg_off >> 12;
}

/* Keeps fds for key, closing any kept before. Returns -1 if out of memory (the
 * caller still owns fds). */
int bellcache_put(struct bellcache *c, uint64_t key, const int fds[CLC_NBELLS]);
/* Moves the fds kept for key into fds; -1 if there are none. */
int bellcache_take(struct bellcache *c, uint64_t key, int fds[CLC_NBELLS]);
/* Closes whatever is kept for key. */
void bellcache_drop(struct bellcache *c, uint64_t key);
/* Closes everything and frees the table. */
void bellcache_clear(struct bellcache *c);

#endif
