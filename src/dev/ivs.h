/* The ivshmem device's state in one process: the region it attached, the slot
 * it holds there, its channel handles, where the peers' rings go, and the
 * polling that stands in for interrupts. Private to src/dev/ivs_*.c and
 * ivshmem.c. */
#ifndef USMC_IVS_H
#define USMC_IVS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../core/decline.h"

#include "chan.h"
#include "region.h"
#include "regionfile.h"
#include "slots.h"

struct arena;
struct seg_loc;

/* A channel handle: what ctl_* calls name by number. Handles are never reused
 * in a process (a connection a forked child or an exec'd program holds may still
 * ring through one whose link group is gone); a closed one stays, ringable,
 * as long as its channel is the same (the entry's word). */
struct ivs_chan {
	uint32_t idx;            /* in the channel table */
	uint64_t word;           /* the entry's word when we opened or took it */
	int server;              /* we are its server end */
	/* The other end's key (0: a client's, not taken yet); read without
	 * ivs.lock by who rings it. */
	_Atomic uint64_t peer;
	uint64_t self;           /* our end's key */
	struct chan_end end;     /* our cursors */
	pthread_mutex_t lock;    /* senders and receivers in several threads */
	/* Ours to read and free: opened or taken by this process, not inherited
	 * across fork nor adopted after exec. */
	int drained;
	int closed;              /* ctl_close() came */
	int shared;              /* a connection of it went to another process */
	int taken;               /* client: a server took it */
	int dead;                /* unusable: broken, freed under us, or its peer died */
	int freed;               /* its entry is another channel's now, or nonsense */
	int lost;                /* its peer is gone for good (its slot died): its
				  * connections were told (ivs_bells_lose) */
	void *tag;               /* srv_watch() */
	int watched;
	uint64_t exit_asked_ns;  /* when we last asked whether its peer exited */
	/* client: our arenas whose memory waits for the server to let go */
	uint64_t deferred_off[64];
	uint64_t deferred_len[64];
	int ndeferred;
};

struct ivs {
	pthread_mutex_t lock;        /* everything below */
	int tried;                   /* attach attempted (once, unless the region changed) */
	int attached;
	struct region_map map;
	struct region r;
	struct slot_self me;
	uint64_t key;                /* our slot, 0 until needed */
	uint64_t netns;              /* our network namespace (loopback entries) */
	struct slot_seen seen[REGION_SLOTS_MAX];
	uint64_t heap_hint;
	struct ivs_chan **chans;     /* by handle */
	int nchans, capchans;
	uint32_t endpoint_seq;       /* our endpoint's channel count as last scanned */
	uint32_t scan_from;          /* srv_accept: where the scan of the table goes on */
	int scanning;
	uint64_t vouched_ns, reclaimed_ns;
};

extern struct ivs ivs;

/* Attaching. ivs_ready() attaches on first use and returns 0 when the region is
 * there (say why once, otherwise); ivs_self() our key, claimed on first use (0
 * when the table is full). Both under ivs.lock. */
int ivs_ready(void);
uint64_t ivs_self(void);
/* Whether key lives, as we judge it now. Under ivs.lock. */
int ivs_alive(uint64_t key);
/* Renewals, judgements and reclaims due now (the tick). Under ivs.lock. */
void ivs_keep(uint64_t now);
/* Starts the thread that calls ivs_keep() every quarter lease, so that the
 * lease lives while the program sleeps elsewhere than in the library: once per
 * program (ivs_keep(), once a peer of another kernel shares the region); a
 * forked child counts on its parent's. Under ivs.lock. */
void ivs_keeper_start(void);
/* The region was formatted again, or our slot was declared dead while we did not
 * run: every connection on it is lost, and so are our listeners there (a new
 * listen() publishes anew, under the slot we take then). */
void ivs_lost(void);

/* Channel handles (ivs_chan.c). Under ivs.lock but ivs_chan_get(). */
struct ivs_chan *ivs_chan_get(int h);
int ivs_chan_count(void);
/* A client's channel to endpoint: a handle, or -errno. */
int ivs_chan_open(uint64_t endpoint);
/* The next channel opened to our endpoint, taken: a handle, or -1. */
int ivs_chan_take(void);
void ivs_chan_close(struct ivs_chan *c);
/* A client's arena of c that the server may still write to: freed once it let go. */
void ivs_chan_defer(struct ivs_chan *c, uint64_t off, uint64_t len);
/* A handle for a channel we do not drain: an adopted connection rings through it. */
int ivs_chan_adopt(uint32_t idx, uint64_t word, int server);
/* Whether c hung up: its far end let go, exited (our kernel) or died; marks it
 * dead when it cannot be used any more. Under ivs.lock. */
int ivs_chan_hung_up(struct ivs_chan *c);
/* Frees what client channels wait to free once their servers let go. */
void ivs_chan_sweep(void);
/* Every handle: lost (ivs_lost). */
void ivs_chan_lose_all(void);
void ivs_chan_atfork_child(void);

/* Doorbell routes (ivs_bells.c): which bell a peer's ring for a segment wakes. */
void ivs_bells_route(const struct seg_loc *loc, int fd, _Atomic int *lost);
void ivs_bells_unroute(const struct seg_loc *loc, int fd);
/* Relays what the peers rang on our channels, looks at the connections we do
 * not drain the channels of, and tells those whose peer is gone. Returns how
 * many bells it rang; *polled says whether something can only be seen by
 * looking again (rings queued but not written yet, connections looked at by
 * their stamps). Under ivs.lock. */
int ivs_bells_relay(int *polled);
/* The peer of channel handle h is gone: its connections are lost. */
void ivs_bells_lose(int h);
/* In a forked child, after ivs_chan_atfork_child(): every route is looked at by
 * its stamp. */
void ivs_bells_atfork_child(void);
/* The page of a segment's header in the region, which names it in a ring. */
uint32_t ivs_seg_page(const struct seg_loc *loc);

/* The polling that stands in for interrupts (poller.c). */
int poller_fd(void);
/* The same once this process uses the region (a channel, an endpoint, a
 * connection adopted), else -1: a process that does not sleeps as before. */
int poller_fd_if_used(void);
/* Something happened: the next look comes soon. */
void poller_soon(uint64_t began);
/* Whether some peer cannot interrupt us: our sleeps end at the next look. */
int poller_polls(void);
/* Something was done through the device: a look, if one is overdue (never
 * waiting for ivs.lock). */
void poller_busy(void);
/* The tick: whoever finds poller_fd() readable. */
void poller_tick(void);
void poller_atfork_child(void);
/* fd leaves what sleeps watch (it is about to be closed). Under ivs.lock. */
void poller_forget(int fd);

/* Interrupts, where an ivshmem server hands them out (ivs_doorbell.c).
 * USMC_DEVICE=ivshmem:unix:SOCKET names the server's socket (region_server). */
/* Joins the server at path: the region's descriptor, or -1 with why. */
int ivs_doorbell_connect(const char *path, char *why, size_t len);
/* Writes our peer ID into our slot (just claimed). Under ivs.lock. */
void ivs_doorbell_publish(void);
/* Interrupts the slot key names, if it takes interrupts from us. */
void ivs_doorbell_ring(uint64_t key);
/* What a sleep watches for interrupts: our vector and the server's socket.
 * Returns whether this process hears interrupts at all. */
int ivs_doorbell_fds(int fds[2]);
/* Takes what those said; returns whether a peer rang or left. */
int ivs_doorbell_heard(void);
/* Whether every live peer of the region rings us: our sleeps need not poll.
 * Under ivs.lock. */
int ivs_doorbell_covers(void);
void ivs_doorbell_atfork_child(void);
/* In a guest: interrupts through the ivshmem device bound to vfio-pci
 * (ivs_vfio.c), our peer ID self, irq its vector 0's eventfd (-1: none). */
void ivs_doorbell_guest(int64_t self, int irq);
/* The region through vfio-pci: 0 with m mapped and interrupts set up where the
 * device has them, 1 when spec does not name a device bound to vfio-pci, -1
 * with why. */
int ivs_vfio_open(const char *spec, struct region_map *m, char *why, size_t len);
/* Rings peer's vector 0 through the device's doorbell register. */
void ivs_vfio_ring(uint32_t peer);

/* The registry of listeners in the region (ivs_registry.c). */
int ivs_reg_add(const struct sockaddr *bound, int v6only, const char *ctl_name);
void ivs_reg_remove(const struct sockaddr *bound, const char *ctl_name);
int ivs_reg_lookup(const struct sockaddr *dst, char *path, unsigned len, enum decline *why);
int ivs_reg_still(const struct sockaddr *dst, const char *path);
void ivs_reg_forget(const struct sockaddr *dst, const char *path);

#endif
