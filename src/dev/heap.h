/* The region's heap: granules of REGION_PAGE bytes for connection segments and
 * channel rings, each owned by the key of the slot that allocated it.
 *
 * A granule's descriptor is its owner's key, 0 when free. Allocation claims
 * each granule of a run by compare-and-swap, and gives back what it claimed when
 * another allocator got there first: no lock, so a peer that dies in the middle
 * of an allocation leaves granules owned by a dead key, which the reclaim of its
 * slot frees with the rest. An owner frees a run it knows the size of; nothing
 * in the region says how long a run is. */
#ifndef USMC_HEAP_H
#define USMC_HEAP_H

#include <stdint.h>

#include "region.h"

/* A heap smaller than this is no heap: 1 MiB. */
#define HEAP_MIN_GRANULES 256u

/* bytes (rounded up to granules) for owner; returns the run's offset in the
 * region, or 0 when no run that long is free. *hint is where the caller's next
 * search starts (per process: two allocating at once rarely collide). */
uint64_t heap_alloc(const struct region *r, uint64_t owner, uint64_t bytes, uint64_t *hint);
/* Frees the run [off, off + bytes) of owner's; granules that are not (a
 * reclaim freed them, and someone took them since) stay as they are. */
void heap_free(const struct region *r, uint64_t owner, uint64_t off, uint64_t bytes);
/* Frees every granule owner holds; returns how many. */
uint64_t heap_free_owner(const struct region *r, uint64_t owner);
/* Whether [off, off + bytes) lies in the heap, on granules, all owner's: what a
 * proposal names must be memory its sender owns. */
int heap_owned(const struct region *r, uint64_t owner, uint64_t off, uint64_t bytes);
/* Granules in use in all (*used), and per slot number (by_slot, nslots entries,
 * may be NULL). */
void heap_usage(const struct region *r, uint64_t *used, uint64_t *by_slot);

#endif
