#include "listeners.h"

#include <string.h>
#include <sys/socket.h>

#include "slots.h"

static struct listener_entry *entry_at(const struct region *r, uint32_t idx)
{
	return (struct listener_entry *)region_at(r, r->h.listeners_off) + idx;
}

static void port_changed(const struct region *r, unsigned port, int delta)
{
	struct region_ports *p = ports_of(r);

	if (delta > 0) {
		atomic_fetch_add(&p->count[port], 1);
	} else if (delta < 0) {
		uint16_t c = atomic_load(&p->count[port]);
		while (c && !atomic_compare_exchange_weak(&p->count[port], &c, (uint16_t)(c - 1)))
			;
	}
	atomic_fetch_add_explicit(&p->changes[port], 1, memory_order_release);
}

int listeners_add(const struct region *r, const struct listener *l)
{
	for (uint32_t i = 0; i < r->h.nlisteners; i++) {
		struct listener_entry *e = entry_at(r, i);
		uint64_t none = 0;
		if (atomic_load_explicit(&e->owner, memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&e->owner, &none, l->owner))
			continue;
		atomic_fetch_add(&e->seq, 1);
		e->port = (uint16_t)l->port;
		e->naddr = (uint8_t)l->naddr;
		memcpy(e->boot_id, l->boot_id, sizeof(e->boot_id));
		e->netns = l->netns;
		memset(e->addr, 0, sizeof(e->addr));
		memcpy(e->addr, l->addr, (size_t)l->naddr * sizeof(l->addr[0]));
		atomic_fetch_add_explicit(&e->seq, 1, memory_order_release);
		port_changed(r, l->port, 1);
		return (int)i;
	}
	return -1;
}

/* Frees entry e of owner's, for port. */
static void entry_free(const struct region *r, struct listener_entry *e, uint64_t owner,
		       unsigned port)
{
	atomic_fetch_add(&e->seq, 1);
	e->port = 0;
	e->naddr = 0;
	atomic_fetch_add_explicit(&e->seq, 1, memory_order_release);
	if (atomic_compare_exchange_strong(&e->owner, &owner, 0))
		port_changed(r, port, -1);
}

void listeners_remove(const struct region *r, uint64_t owner, unsigned port)
{
	for (uint32_t i = 0; i < r->h.nlisteners; i++) {
		struct listener_entry *e = entry_at(r, i);
		if (atomic_load_explicit(&e->owner, memory_order_relaxed) != owner)
			continue;
		unsigned p = e->port;
		if (!port || p == port)
			entry_free(r, e, owner, p);
	}
}

void listeners_reclaim(const struct region *r, int (*dead)(void *, uint64_t), void *arg)
{
	for (uint32_t i = 0; i < r->h.nlisteners; i++) {
		struct listener_entry *e = entry_at(r, i);
		uint64_t o = atomic_load_explicit(&e->owner, memory_order_relaxed);
		if (o && dead(arg, o))
			entry_free(r, e, o, e->port);
	}
}

int listener_valid(const struct region *r, const struct listener *l)
{
	if (!l->port || l->naddr < 1 || l->naddr > LISTENER_ADDRS || !slot_key_valid(r, l->owner))
		return 0;
	for (int i = 0; i < l->naddr; i++) {
		const struct listener_addr *a = &l->addr[i];
		if ((a->family != 4 && a->family != 6) || a->prefix > (a->family == 4 ? 32 : 128) ||
		    a->pad[0] || a->pad[1])
			return 0;
	}
	return 1;
}

int listeners_read(const struct region *r, uint32_t idx, struct listener *out)
{
	struct listener_entry *e = entry_at(r, idx);
	uint32_t s0 = atomic_load_explicit(&e->seq, memory_order_acquire);

	out->owner = atomic_load_explicit(&e->owner, memory_order_relaxed);
	if ((s0 & 1) || !out->owner)
		return -1;
	out->port = e->port;
	out->naddr = e->naddr;
	memcpy(out->boot_id, e->boot_id, sizeof(out->boot_id));
	out->netns = e->netns;
	memcpy(out->addr, e->addr, sizeof(out->addr));
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&e->seq, memory_order_relaxed) != s0 ||
	    atomic_load_explicit(&e->owner, memory_order_relaxed) != out->owner)
		return -1;
	return listener_valid(r, out) ? 0 : -1;
}

/* The first bits of a and b agree. */
static int prefix_match(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned bytes = bits / 8, rest = bits % 8;

	if (memcmp(a, b, bytes))
		return 0;
	return !rest || !((a[bytes] ^ b[bytes]) & (0xff00u >> rest));
}

int listener_accepts(const struct listener *l, const struct addr *dst, const uint8_t *boot_id,
		     uint64_t netns)
{
	int fam = dst->family == AF_INET ? 4 : 6;

	/* Loopback never leaves its kernel's namespace. */
	if (addr_is_loopback(dst) &&
	    (memcmp(l->boot_id, boot_id, sizeof(l->boot_id)) || l->netns != netns))
		return 0;
	for (int i = 0; i < l->naddr; i++)
		if (l->addr[i].family == fam && prefix_match(l->addr[i].ip, dst->ip, l->addr[i].prefix))
			return 1;
	return 0;
}
