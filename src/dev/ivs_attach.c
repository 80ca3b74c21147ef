/* The ivshmem device attaches to its region on first use, takes a slot there
 * when it first needs one, keeps it alive, judges the others, and takes back
 * what dead peers held. */
#include "ivs.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../core/config.h"
#include "../core/sys.h"
#include "heap.h"

struct ivs ivs = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The region USMC_DEVICE names: from an ivshmem server, or a file or device. */
static int region_map(char *why, size_t len)
{
	const char *server = region_server(cfg.region);

	ivs.map = (struct region_map){.fd = -1};
	if (!server) {
		int e = ivs_vfio_open(cfg.region, &ivs.map, why, len);
		return e <= 0 ? e : region_map_open(&ivs.map, cfg.region, 0, why, len);
	}
	int fd = ivs_doorbell_connect(server, why, len);
	return fd < 0 ? -1 : region_map_fd(&ivs.map, fd, cfg.region, 0, why, len);
}

int ivs_ready(void)
{
	char why[1024];
	struct stat st;

	if (ivs.attached || ivs.tried)
		return ivs.attached ? 0 : -1;
	ivs.tried = 1;
	if (region_map(why, sizeof(why)) < 0 ||
	    region_open(&ivs.r, &ivs.map, REGION_LEASE_DEFAULT_MS, why, sizeof(why)) < 0) {
		region_map_close(&ivs.map);
		fprintf(stderr, "usmc: ivshmem: %s; the region is not used\n", why);
		return -1;
	}
	slot_self_init(&ivs.me);
	ivs.me.mapping = ivs.map.vfio ? SLOT_MAP_VFIO : *ivs.map.pci ? SLOT_MAP_SYSFS : SLOT_MAP_FILE;
	ivs.me.mapping_cached = (uint8_t)ivs.map.cached;
	ivs.netns = stat("/proc/self/ns/net", &st) == 0 ? (uint64_t)st.st_ino : 0;
	ivs.attached = 1;
	return 0;
}

uint64_t ivs_self(void)
{
	if (!ivs.key && ivs.attached) {
		ivs.key = slot_claim(&ivs.r, &ivs.me);
		ivs_doorbell_publish();
	}
	return ivs.key;
}

int ivs_alive(uint64_t key)
{
	if (!slot_key_valid(&ivs.r, key))
		return 0;
	if (key == ivs.key)
		return 1;
	return slot_alive(&ivs.r, key, &ivs.seen[slot_of_key(key)], sys_now_ns(), &ivs.me);
}

static int alive_cb(void *arg, uint64_t key)
{
	(void)arg;
	return ivs_alive(key);
}

/* Whether the slot's processes run on our kernel, in our pid namespace. */
static int of_our_kernel(const struct region_slot *s)
{
	return !memcmp(s->boot_id, ivs.me.boot_id, sizeof(s->boot_id)) && s->pidns == ivs.me.pidns;
}

/* Whether a process of the slot still runs, for a slot of our kernel and pid
 * namespace: we vouch for it, and it lives on while it sleeps elsewhere than in
 * the library (in read() of a terminal, waitpid()...). */
static int runs_here(const struct region_slot *s)
{
	if (!of_our_kernel(s))
		return 0;
	for (int k = 0; k < SLOT_PIDS; k++) {
		int32_t pid = atomic_load(&((struct region_slot *)s)->pids[k]);
		if (pid > 0 && !sys_pid_gone(pid))
			return 1;
	}
	return 0;
}

void ivs_keep(uint64_t now)
{
	uint64_t lease = (uint64_t)ivs.r.h.lease_ms * 1000000ull;

	if (!ivs.attached)
		return;
	if (region_changed(&ivs.r) || (ivs.key && slot_renew(&ivs.r, ivs.key) < 0)) {
		ivs_lost();
		return;
	}
	if (now - ivs.vouched_ns > lease / 4) {
		int foreign = 0;
		ivs.vouched_ns = now;
		for (uint32_t i = 0; i < ivs.r.h.nslots; i++) {
			struct region_slot *s = slot_at(&ivs.r, i);
			uint64_t w = atomic_load(&s->word);
			if ((w & 0xff) != SLOT_LIVE || slot_key(i, w >> 8) == ivs.key)
				continue;
			if (runs_here(s))
				slot_renew(&ivs.r, slot_key(i, w >> 8));
			foreign |= !of_our_kernel(s);
		}
		/* Peers of our kernel vouch for us as we do for them; one of
		 * another judges us by our lease alone. */
		if (foreign && ivs.key)
			ivs_keeper_start();
	}
	/* Judging every slot now and then: the first to find one dead takes back
	 * what it held, whoever its peers were. */
	if (now - ivs.reclaimed_ns > lease / 2) {
		ivs.reclaimed_ns = now;
		for (uint32_t i = 0; i < ivs.r.h.nslots; i++) {
			uint64_t w = atomic_load(&slot_at(&ivs.r, i)->word);
			uint64_t key = slot_key(i, w >> 8);
			if ((w & 0xff) == SLOT_LIVE && !ivs_alive(key))
				slot_declare_dead(&ivs.r, key);
			if ((w & 0xff) != SLOT_FREE)
				slot_reclaim(&ivs.r, i, alive_cb, NULL);
		}
	}
	ivs_chan_sweep();
}

/* The lease's keeper: a thread that renews it (and vouches, judges, takes
 * back: ivs_keep) every quarter of a lease, whatever the program does. A program
 * may sleep for minutes where the library never runs (reading its terminal, in
 * nanosleep, computing), and its connections must live on as TCP's do: only a
 * machine or process that is gone or frozen lets its lease run out. Our sleeps'
 * looks renew it too, but they happen only while a thread waits in the library.
 * The thread takes no signals, so the program's handlers run where they did. */
static void *keeper(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&ivs.lock);
		uint64_t quarter_ms = ivs.attached ? ivs.r.h.lease_ms / 4 : 1000;
		ivs_keep(sys_now_ns());
		pthread_mutex_unlock(&ivs.lock);
		if (quarter_ms < 10)
			quarter_ms = 10;
		struct timespec ts = {(time_t)(quarter_ms / 1000), (long)(quarter_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* A keeper runs for our slot: ours, or our parent's, whose slot a forked child
 * shares, so the child starts none. It could not safely: a child of a process
 * with threads may call only what is async-signal-safe, which pthread_create()
 * is not (and ThreadSanitizer kills the child that tries). A child whose parent
 * exited renews the slot from its own waits (a program it execs starts a
 * keeper of its own). The keeper starts once a peer of another kernel
 * (or pid namespace) shares the region: a process that talks only to peers of
 * its own kernel stays single-threaded. */
static int keeper_runs;

void ivs_keeper_start(void)
{
	pthread_attr_t a;
	pthread_t t;
	sigset_t all, old;

	if (keeper_runs)
		return;
	keeper_runs = 1;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 64 << 10);
	if (pthread_create(&t, &a, keeper, NULL) == 0)
		pthread_setname_np(t, "usmc-lease");
	else
		fprintf(stderr, "usmc: ivshmem: no thread to keep the lease: connections of a "
				"program that sleeps outside the library may end\n");
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void ivs_lost(void)
{
	char why[1024];

	ivs_chan_lose_all();
	memset(ivs.seen, 0, sizeof(ivs.seen));
	ivs.key = 0;
	ivs.endpoint_seq = 0;
	/* Formatted again: its layout may be another. */
	if (region_changed(&ivs.r) &&
	    region_open(&ivs.r, &ivs.map, REGION_LEASE_DEFAULT_MS, why, sizeof(why)) < 0) {
		fprintf(stderr, "usmc: ivshmem: %s; the region is not used any more\n", why);
		ivs.attached = 0;
	}
}
