/* The registry of listeners in the region (listeners.h), as the ivshmem device
 * publishes into it and looks up in it. A client keeps what it read of a port
 * while the port's change counter stands still, as with the runtime directory's
 * registry; a lookup that finds nothing for a port nobody registered costs one
 * load. */
#include "ivs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listeners.h"

static void path_of(uint64_t key, char *path, unsigned len)
{
	snprintf(path, len, "%" PRIx64, key);
}

int ivs_reg_add(const struct sockaddr *bound, int v6only, const char *ctl_name)
{
	struct addr a[ADDR_LOCAL_MAX];
	uint8_t prefix[ADDR_LOCAL_MAX];
	struct listener l0 = {0}, *l = &l0;
	int n = addr_local_list(bound, v6only, a, prefix, ADDR_LOCAL_MAX), e = -1;

	(void)ctl_name;
	if (!n)
		return -1;
	l->port = addr_port(bound);
	/* Loopback leads only to our kernel's namespace; the rest, as many as an
	 * entry holds. */
	memcpy(l->boot_id, ivs.me.boot_id, sizeof(l->boot_id));
	for (int i = 0; i < n && l->naddr < LISTENER_ADDRS; i++) {
		struct listener_addr *x = &l->addr[l->naddr++];
		x->family = a[i].family == AF_INET ? 4 : 6;
		x->prefix = prefix[i];
		memcpy(x->ip, a[i].ip, sizeof(x->ip));
	}
	pthread_mutex_lock(&ivs.lock);
	l->netns = ivs.netns;
	if (ivs_ready() == 0 && (l->owner = ivs_self()) && listeners_add(&ivs.r, l) >= 0)
		e = 0;
	pthread_mutex_unlock(&ivs.lock);
	return e;
}

void ivs_reg_remove(const struct sockaddr *bound, const char *ctl_name)
{
	unsigned port = addr_port(bound);

	(void)ctl_name;
	pthread_mutex_lock(&ivs.lock);
	if (ivs.attached && ivs.key)
		listeners_remove(&ivs.r, ivs.key, port);
	pthread_mutex_unlock(&ivs.lock);
}

/* What this process last read of a port. */
struct cached {
	int valid;
	unsigned port;
	uint32_t changes;
	int n;                      /* listeners on the port */
	struct listener l[4];
};
#define NCACHED 8
static struct cached cache[NCACHED];

/* The port's listeners as they are now. Under ivs.lock. */
static struct cached *current(unsigned port)
{
	struct region_ports *ports = ports_of(&ivs.r);
	uint32_t changes = atomic_load_explicit(&ports->changes[port], memory_order_acquire);
	struct cached *c = &cache[port % NCACHED];

	if (c->valid && c->port == port && c->changes == changes)
		return c;
	*c = (struct cached){1, port, changes, 0, {{0}}};
	for (uint32_t i = 0; i < ivs.r.h.nlisteners && c->n < 4; i++) {
		struct listener l;
		if (listeners_read(&ivs.r, i, &l) == 0 && l.port == port)
			c->l[c->n++] = l;
	}
	return c;
}

int ivs_reg_lookup(const struct sockaddr *dst, char *path, unsigned len, enum decline *why)
{
	struct addr d;
	uint64_t owner = 0;
	unsigned port = addr_port(dst);
	int found = 0;

	*why = DECL_PEER_NO_USMC;
	pthread_mutex_lock(&ivs.lock);
	if (ivs_ready() < 0 || !atomic_load_explicit(&ports_of(&ivs.r)->count[port],
						     memory_order_relaxed)) {
		pthread_mutex_unlock(&ivs.lock);
		return -1;
	}
	addr_from_sockaddr(&d, dst);
	addr_reached(&d);
	struct cached *c = current(port);
	for (int i = 0; i < c->n; i++) {
		const struct listener *l = &c->l[i];
		if (!listener_accepts(l, &d, ivs.me.boot_id, ivs.netns) || l->owner == owner)
			continue;
		/* A dead listener's entry goes with its slot's reclaim; until then
		 * nobody proposes to it. */
		if (!ivs_alive(l->owner))
			continue;
		found++;
		owner = l->owner;
	}
	pthread_mutex_unlock(&ivs.lock);
	/* Two processes in two kernels on one address and port: the kernels are
	 * not one host, and which the connection reaches only the network knows. */
	if (found > 1) {
		*why = DECL_AMBIGUOUS;
		return -1;
	}
	if (!found)
		return -1;
	path_of(owner, path, len);
	return 0;
}

int ivs_reg_still(const struct sockaddr *dst, const char *path)
{
	char now[32];
	enum decline why;

	return ivs_reg_lookup(dst, now, sizeof(now), &why) == 0 && !strcmp(now, path);
}

void ivs_reg_forget(const struct sockaddr *dst, const char *path)
{
	uint64_t key = strtoull(path, NULL, 16);

	(void)dst;
	/* Taken back at the next look (ivs_keep); lookups pass it by meanwhile. */
	pthread_mutex_lock(&ivs.lock);
	if (ivs.attached && slot_key_valid(&ivs.r, key) && !ivs_alive(key))
		slot_declare_dead(&ivs.r, key);
	pthread_mutex_unlock(&ivs.lock);
}
