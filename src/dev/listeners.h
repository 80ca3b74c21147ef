/* The registry of listeners, in the region: what the runtime directory's is for
 * one kernel (registry.h), for every kernel attached.
 *
 * An entry names a listener's port, the addresses it accepts on and its
 * endpoint (the key of the slot link groups are opened to). Loopback addresses
 * reach only the kernel and network namespace the listener runs in, so an entry
 * says which (a boot id and a namespace inode); any other address is taken to
 * mean the same host wherever it is seen from: the kernels attached to one
 * region must not reuse each other's addresses.
 *
 * Per port, a count of entries (a client learns that nobody listens there
 * without reading the table) and a change counter bumped after every change of
 * an entry for the port, by which a client keeps what it read. An entry is
 * written under a sequence word (odd while written) and read only when the
 * word was even and the same before and after the copy. */
#ifndef USMC_LISTENERS_H
#define USMC_LISTENERS_H

#include <stdatomic.h>
#include <stdint.h>

#include "../core/addr.h"
#include "region.h"

#define LISTENERS_DEFAULT 512u
#define LISTENER_ADDRS 8

struct listener_addr {
	uint8_t family;     /* 4 or 6 */
	uint8_t prefix;     /* bits of ip that must match: 32 or 128 for one address */
	uint8_t pad[2];
	uint8_t ip[16];
};

struct listener_entry {
	_Atomic uint32_t seq;
	uint16_t port;
	uint8_t naddr;
	uint8_t pad;
	_Atomic uint64_t owner;      /* the endpoint's key; 0: free */
	uint8_t boot_id[16];         /* where its loopback addresses lead */
	uint64_t netns;
	struct listener_addr addr[LISTENER_ADDRS];
	uint8_t reserved[56];
};
_Static_assert(sizeof(struct listener_entry) == 256, "listener entry layout");

struct region_ports {
	_Atomic uint16_t count[65536];
	_Atomic uint32_t changes[65536];
};

/* A listener as a process describes it, and as a check of an entry's copy
 * leaves it. */
struct listener {
	uint64_t owner;
	unsigned port;
	int naddr;
	struct listener_addr addr[LISTENER_ADDRS];
	uint8_t boot_id[16];
	uint64_t netns;
};

/* Publishes l; returns the entry's index, or -1 when the table is full. */
int listeners_add(const struct region *r, const struct listener *l);
/* Removes owner's entries for port (all ports: port 0), and those of every
 * owner for which dead(arg, key) says so: a reclaim. */
void listeners_remove(const struct region *r, uint64_t owner, unsigned port);
void listeners_reclaim(const struct region *r, int (*dead)(void *, uint64_t), void *arg);

/* A consistent copy of entry idx, checked (listener_valid); -1 when it is free,
 * being written, or does not hold together. */
int listeners_read(const struct region *r, uint32_t idx, struct listener *out);
/* Whether a copy holds together: a port, at most LISTENER_ADDRS addresses of
 * known families with prefixes that fit, an owner naming a slot of r. */
int listener_valid(const struct region *r, const struct listener *l);
/* Whether l accepts connections to dst (with boot id and namespace of the client). */
int listener_accepts(const struct listener *l, const struct addr *dst, const uint8_t *boot_id,
		     uint64_t netns);

static inline struct region_ports *ports_of(const struct region *r)
{
	return (struct region_ports *)region_at(r, r->h.ports_off);
}

#endif
