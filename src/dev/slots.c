#include "slots.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/sys.h"
#include "chan.h"
#include "heap.h"
#include "listeners.h"

const char *const slot_mapping_names[SLOT_MAPPINGS] = {"unknown", "file", "sysfs", "vfio"};

int slot_key_valid(const struct region *r, uint64_t key)
{
	return key && (key & 0xff) && (key & 0xff) <= r->h.nslots && slot_gen_of_key(key);
}

/* The boot id's 36 characters as 16 bytes; zeros when it cannot be read. */
static void boot_id(uint8_t out[16])
{
	char s[64];
	int n = 0;

	memset(out, 0, 16);
	if (sys_read_file("/proc/sys/kernel/random/boot_id", s, sizeof(s)) < 32)
		return;
	for (const char *p = s; *p && n < 32; p++) {
		int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
		if (v < 0)
			continue;
		out[n / 2] |= (uint8_t)(n % 2 ? v : v << 4);
		n++;
	}
}

void slot_self_init(struct slot_self *me)
{
	struct stat st;
	char host[24] = "", comm[24] = "";

	boot_id(me->boot_id);
	me->pidns = stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
	me->pid = getpid();
	gethostname(host, sizeof(host) - 1);
	ssize_t n = sys_read_file("/proc/self/comm", comm, sizeof(comm));
	if (n > 0 && comm[n - 1] == '\n')
		comm[n - 1] = 0;
	snprintf(me->name, sizeof(me->name), "%s:%s[%d]", host, comm, (int)me->pid);
}

uint64_t slot_claim(const struct region *r, const struct slot_self *me)
{
	for (uint32_t i = 0; i < r->h.nslots; i++) {
		struct region_slot *s = slot_at(r, i);
		uint64_t w = atomic_load(&s->word);
		if ((w & 0xff) != SLOT_FREE)
			continue;
		uint64_t gen = (w >> 8) + 1;
		if (!atomic_compare_exchange_strong(&s->word, &w, gen << 8 | SLOT_LIVE))
			continue;
		/* Described before anyone has a reason to look: the key is not
		 * handed out yet. */
		atomic_store(&s->heartbeat, 0);
		atomic_store(&s->chan_seq, 0);
		atomic_store(&s->doorbell, 0);
		atomic_store(&s->conns, 0);
		memcpy(s->boot_id, me->boot_id, sizeof(s->boot_id));
		s->pidns = me->pidns;
		for (int k = 0; k < SLOT_PIDS; k++)
			atomic_store(&s->pids[k], k ? 0 : me->pid);
		memcpy(s->name, me->name, sizeof(s->name));
		s->mapping = me->mapping;
		s->mapping_cached = me->mapping_cached;
		return slot_key(i, gen);
	}
	return 0;
}

static int holds(const struct region *r, uint64_t key)
{
	return slot_key_valid(r, key) &&
	       atomic_load_explicit(&slot_at(r, slot_of_key(key))->word, memory_order_acquire) ==
		       (slot_gen_of_key(key) << 8 | SLOT_LIVE);
}

int slot_renew(const struct region *r, uint64_t key)
{
	if (!holds(r, key))
		return -1;
	atomic_fetch_add_explicit(&slot_at(r, slot_of_key(key))->heartbeat, 1, memory_order_relaxed);
	return 0;
}

void slot_add_pid(const struct region *r, uint64_t key, pid_t pid)
{
	if (!holds(r, key))
		return;
	struct region_slot *s = slot_at(r, slot_of_key(key));
	for (int k = 0; k < SLOT_PIDS; k++) {
		int32_t v = atomic_load(&s->pids[k]);
		if (v == pid)
			return;
		/* A place of a process that exited is as good as a free one. */
		if ((!v || (kill(v, 0) < 0 && errno == ESRCH)) &&
		    atomic_compare_exchange_strong(&s->pids[k], &v, pid))
			return;
	}
	/* Full: the same-kernel judgement cannot be made for this slot any more. */
	atomic_store(&s->pids[0], -1);
}

void slot_release(const struct region *r, uint64_t key)
{
	uint64_t w = slot_gen_of_key(key) << 8 | SLOT_LIVE;

	if (slot_key_valid(r, key))
		atomic_compare_exchange_strong(&slot_at(r, slot_of_key(key))->word, &w,
					       slot_gen_of_key(key) << 8 | SLOT_DEAD);
}

/* A slot on our own kernel (boot id and pid namespace) whose processes have all
 * exited: no lease to wait for. */
static int gone_here(struct region_slot *s, const struct slot_self *me)
{
	static const uint8_t none[16];
	int any = 0;

	if (memcmp(s->boot_id, me->boot_id, sizeof(none)) || !memcmp(me->boot_id, none, sizeof(none)) ||
	    s->pidns != me->pidns)
		return 0;
	for (int k = 0; k < SLOT_PIDS; k++) {
		int32_t v = atomic_load(&s->pids[k]);
		if (v < 0 || (v > 0 && !sys_pid_gone(v)))
			return 0;
		any |= v > 0;
	}
	return any;
}

int slot_alive(const struct region *r, uint64_t key, struct slot_seen *seen, uint64_t now,
	       const struct slot_self *me)
{
	if (!holds(r, key))
		return 0;
	struct region_slot *s = slot_at(r, slot_of_key(key));
	uint64_t hb = atomic_load_explicit(&s->heartbeat, memory_order_relaxed);
	if (seen->key != key || seen->heartbeat != hb) {
		*seen = (struct slot_seen){key, hb, now, now};
		return 1;
	}
	if (now - seen->since_ns > (uint64_t)r->h.lease_ms * 1000000ull)
		return 0;
	/* Asking the kernel reads a file of /proc per process: at every look (a
	 * thousand a second while idle) that would be most of an idle process's
	 * cost. An exit is seen this much later at most. */
	if (now - seen->asked_ns < SLOT_EXIT_ASK_NS)
		return 1;
	seen->asked_ns = now;
	return !gone_here(s, me);
}

int slot_declare_dead(const struct region *r, uint64_t key)
{
	uint64_t w = slot_gen_of_key(key) << 8 | SLOT_LIVE;

	return slot_key_valid(r, key) &&
	       atomic_compare_exchange_strong(&slot_at(r, slot_of_key(key))->word, &w,
					      slot_gen_of_key(key) << 8 | SLOT_DEAD);
}

struct reclaim {
	uint64_t key;
	int (*alive)(void *, uint64_t);
	void *arg;
};

static int owned_by_dead(void *arg, uint64_t owner)
{
	return owner == ((struct reclaim *)arg)->key;
}

int slot_reclaim(const struct region *r, uint32_t idx, int (*alive)(void *, uint64_t), void *arg)
{
	struct region_slot *s = slot_at(r, idx);
	uint64_t w = atomic_load(&s->word);

	if ((w & 0xff) != SLOT_DEAD)
		return (w & 0xff) == SLOT_FREE;
	uint64_t key = slot_key(idx, w >> 8);
	struct reclaim rc = {key, alive, arg};

	listeners_reclaim(r, owned_by_dead, &rc);
	/* Its channels' rings are its memory: while a live server still holds one
	 * (its connections are not all closed yet), the server may write there,
	 * and nothing of the dead slot's is freed. Channels it served are let go. */
	for (uint32_t i = 0; i < r->h.nchans; i++) {
		struct chan_entry *c = chan_at(r, i);
		uint64_t cw = atomic_load(&c->word), server = atomic_load(&c->server);
		if ((cw & 0xff) == CHAN_FREE)
			continue;
		if (server == key)
			atomic_compare_exchange_strong(&c->server, &server, CHAN_LET_GO);
		if (atomic_load(&c->client) == key && server && server != key && alive(arg, server))
			return 0;
	}
	for (uint32_t i = 0; i < r->h.nchans; i++) {
		struct chan_entry *c = chan_at(r, i);
		uint64_t cw = atomic_load(&c->word);
		if ((cw & 0xff) != CHAN_FREE && atomic_load(&c->client) == key)
			atomic_compare_exchange_strong(&c->word, &cw, (cw & ~0xffull) | CHAN_FREE);
	}
	heap_free_owner(r, key);
	return atomic_compare_exchange_strong(&s->word, &w, (w & ~0xffull) | SLOT_FREE);
}
