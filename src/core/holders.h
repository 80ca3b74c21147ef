/* Processes holding one end of a connection after fork(): both may read and
 * write it, so what each end keeps privately (its cursors, the wake-up
 * generation it last rang for) moves into a small page that only they map
 * (anonymous and shared, inherited by the child), never into the segment where
 * the peer could reach it. A process takes a direction's lock, loads the state,
 * works, stores it back and unlocks; it never sleeps holding the lock. Until the
 * first fork a connection has no such page and pays nothing. */
#ifndef USMC_HOLDERS_H
#define USMC_HOLDERS_H

#include "ring.h"

struct holders;

enum hold_dir { HOLD_TX, HOLD_RX };

/* A page for an end now held by one process, seeded with its state; NULL when
 * out of memory. It lives in a memfd (*fd, the caller's to close), so that
 * exec() can hand it over. */
struct holders *holders_new(const struct ring_end *tx, const struct ring_end *rx, int *fd);
/* The page mapped again from its memfd after exec(); NULL if fd is not one. */
struct holders *holders_adopt(int fd);
void holders_add(struct holders *h);
/* One holder lets go; returns how many remain. The caller then unmaps. */
unsigned holders_drop(struct holders *h);
void holders_unmap(struct holders *h);

void holders_lock(struct holders *h, enum hold_dir d, struct ring_end *e);
/* A consistent copy of the direction's state, for a look that changes nothing. */
void holders_peek(struct holders *h, enum hold_dir d, struct ring_end *e);
void holders_unlock(struct holders *h, enum hold_dir d, const struct ring_end *e);

#endif
