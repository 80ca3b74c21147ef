/* A device moves bytes between two endpoints through memory both can map.
 *
 * Connection logic (conn*.c, lgr.c) sees a device only through this table and
 * the handles it deals in: arenas (struct arena, lgr.h), doorbells (a descriptor
 * this end sleeps on), control channels and server endpoints (handles the device
 * numbers), the listener registry (a path naming an endpoint). What differs
 * between devices stays here: how memory is made and found, how a peer is woken,
 * how messages travel, how a proposal is bound to its TCP connection, how a
 * peer's death is seen, how a blocked call sleeps.
 *
 * A link group and a connection keep a pointer to their device; calls on the
 * data path go through it only to wake a peer, which a system call costs anyway. */
#ifndef USMC_DEV_H
#define USMC_DEV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "../core/decline.h"

struct addr;
struct arena;
struct seg_hdr;
struct seg_loc;

/* What usmc ss and usmc stats name a device by. */
enum dev_kind { DEV_LO, DEV_IVSHMEM, DEV_KINDS };

/* Control messages carry descriptors: the client's TCP socket (the binding
 * proof), the server's doorbell end and the arena. Without, a proposal names the
 * arena and the peer makes its own doorbell. */
#define DEV_F_PASSES_FDS 0x1u
/* A call blocked on an attached connection sleeps on a futex in the segment,
 * which the peer wakes; without, it sleeps on its doorbell and the device's
 * wake descriptor (dev_ops.wake_fd). */
#define DEV_F_FUTEX 0x2u
/* The binding comes after the proposal: the client publishes its socket's
 * names once its connect() has begun (bind_publish), so an acceptor that finds
 * no proposal for a connection waits a moment for one naming its address. */
#define DEV_F_BIND_LATE 0x4u
/* Both ends run on our kernel: the core a peer publishes in its ring line
 * (prod_cpu, cons_cpu) is one of ours. Across kernels the numbers name cores of
 * other machines, and say nothing of whether the peer competes for ours. */
#define DEV_F_ONE_KERNEL 0x8u

/* The endpoint a process's link groups come to, and what watches their channels;
 * each device uses the fields its way. */
struct dev_srv {
	int lfd;           /* the endpoint, -1 while closed */
	int ep;            /* lo: an epoll instance over lfd and the channels */
	char name[64];     /* what the registry names the endpoint by */
	/* The process that opened it: a forked child that inherited it may
	 * close its copy, but the name stays its maker's while it lives, whose
	 * later listeners the registry sends their clients to. */
	pid_t maker;
};

struct dev_ops {
	const char *name;
	enum dev_kind kind;
	unsigned flags;
	/* How long a look that found the peer's FIN without its close flag waits
	 * for its channel to hang up before taking it for a FIN (conn_close.c). */
	int death_wait_ms;

	/* Arenas: memory from which connection segments are carved, at least size
	 * bytes. The creator gets a->base, a->size, a->fd (a descriptor exec() and
	 * siblings can be handed, or -1) and, for a device that names arenas
	 * itself, a->id. The other side maps what a proposal named (a->fd or
	 * a->id, a->size); a->ctl is the channel it is announced on, or came with.
	 * arena_ident() fills a->ident, by which an arena adopted twice is told to
	 * be one. release() undoes whichever was done. */
	int (*arena_create)(struct arena *a, uint64_t size);
	int (*arena_map)(struct arena *a);
	int (*arena_ident)(struct arena *a);
	void (*arena_release)(struct arena *a);

	/* Doorbells, for poll and epoll (and blocked calls, without DEV_F_FUTEX):
	 * fds[0] is the end this side sleeps on and rings through; fds[1] the
	 * peer's end, which travels with the proposal, or -1 when the peer makes
	 * its own. Ringing never blocks, whatever the peer does. Whoever keeps an
	 * end moves it out of the application's range (sys_fd_high). */
	int (*doorbell_create)(int fds[2]);
	void (*doorbell_ring)(const struct seg_loc *loc, int fd);
	void (*doorbell_clear)(int fd);
	/* For a device whose peer cannot write our doorbell itself: the end fd
	 * serves loc's connection (routed) or no more (unrouted), and when the
	 * device finds the peer gone for good (its lease ran out) it sets *lost
	 * and rings fd. NULL when the peer rings the descriptor. */
	void (*bell_route)(const struct seg_loc *loc, int fd, _Atomic int *lost);
	void (*bell_unroute)(const struct seg_loc *loc, int fd);

	/* The connection of loc will be held by another process too (fork, exec,
	 * a descriptor passed on): its memory must outlive this process's hold.
	 * NULL when the kernel keeps it alive. */
	void (*seg_shared)(const struct seg_loc *loc);

	/* Control channels: reliable, message-oriented, saying when the peer is
	 * gone. A handle is the device's; ctl_pollfd() is a descriptor that is
	 * readable when a message waits or the peer hung up, or -1. */
	int (*ctl_connect)(const char *path);
	ssize_t (*ctl_send)(int ctl, const void *msg, size_t len, const int *fds, int nfds);
	/* Returns the message length, 0 on hang-up, -errno (-EAGAIN when empty);
	 * *nfds in: room in fds, out: descriptors received (all CLOEXEC). */
	ssize_t (*ctl_recv)(int ctl, void *msg, size_t len, int *fds, int *nfds);
	/* Whether the peer's end hangs up within ms (its process ended). */
	int (*ctl_hangs_up)(int ctl, int ms);
	int (*ctl_pollfd)(int ctl);
	/* A connection handed to another program names its channel by link, from
	 * which ctl_adopt() makes a handle it can ring the peer through (NULL:
	 * the device needs none). */
	void (*ctl_export)(int ctl, uint64_t link[2]);
	int (*ctl_adopt)(const uint64_t link[2]);
	/* The process at the other end, as our pid namespace numbers it, and its
	 * user (-1 where the device cannot tell); -1 when the process cannot be
	 * told (SIGURG and ERM's direct copies go only where the channel vouches). */
	int (*ctl_peer_cred)(int ctl, struct ucred *cr);
	void (*ctl_close)(int ctl);

	/* A server's endpoint: opened once per process (its forked children
	 * inherit it), closed with its last listener. srv_events() fills tags
	 * with what srv_watch() was given for each channel that has a message or
	 * hung up, and a NULL tag when new channels wait for srv_accept(). */
	int (*srv_open)(struct dev_srv *ds);
	void (*srv_close)(struct dev_srv *ds);
	int (*srv_accept)(struct dev_srv *ds);
	int (*srv_watch)(struct dev_srv *ds, int ctl, void *tag);
	void (*srv_unwatch)(struct dev_srv *ds, int ctl);
	int (*srv_events)(struct dev_srv *ds, void **tags, int max);
	/* In a forked child: ds is the parent's; the child watches its own. */
	void (*srv_atfork_child)(struct dev_srv *ds);

	/* The binding proof: the 4-tuple of a proposal's client socket, from the
	 * descriptors that came with it (CLC_FD_*) or from its segment's header.
	 * Returns 0, or -1 while it is not known yet (the client's connect() has
	 * not completed). */
	int (*bind_names)(const int *fds, const struct seg_hdr *h, struct addr *local,
			  struct addr *peer);
	/* DEV_F_BIND_LATE: the client names its destination in the segment (tcpfd
	 * -1, before proposing), then its own socket's names (after connect()). */
	void (*bind_publish)(struct seg_hdr *h, int tcpfd, const struct sockaddr *dst);

	/* The registry of listeners: a listener publishes its addresses under the
	 * name of its endpoint; a client looks up where to propose (path). */
	int (*reg_add)(const struct sockaddr *bound, int v6only, const char *ctl_name);
	void (*reg_remove)(const struct sockaddr *bound, const char *ctl_name);
	/* 0 and path on success, else -1 and *why (DECL_PEER_NO_USMC: none known). */
	int (*reg_lookup)(const struct sockaddr *dst, char *path, unsigned len, enum decline *why);
	/* Whether the entry that sent a client to path is still what it was. */
	int (*reg_still)(const struct sockaddr *dst, const char *path);
	/* The listener behind path could not be reached: drop its entry if it is dead. */
	void (*reg_forget)(const struct sockaddr *dst, const char *path);

	/* Waiting, for a device without DEV_F_FUTEX: a descriptor every sleep in
	 * the library adds to what it waits for, readable when the device must
	 * look (its polling interval ran out, an interrupt came); whoever finds it
	 * so calls wake_tick(). wake_soon(): a waiter that began waiting at began
	 * (sys_now_ns(), before any spin) is about to sleep after something
	 * happened: the next look comes early. NULL for a device whose
	 * peer wakes us itself. */
	int (*wake_fd)(void);
	void (*wake_tick)(void);
	void (*wake_soon)(uint64_t began);
	/* Whether a sleep now ends no sooner than the device's next look (a peer
	 * cannot interrupt us): a wait then spins as long as a look's interval
	 * (conn_spin_ns). NULL: never. */
	int (*wake_polls)(void);
	/* In a forked child, before the link groups forget the parent's. */
	void (*atfork_child)(void);
};

extern const struct dev_ops dev_lo;
extern const struct dev_ops dev_ivshmem;

/* The local device's Unix seqpacket sockets, which siblings accepting on one
 * listener also use to hand each other proposals (handoff.c) whatever device
 * carries their connections. A path starting with '@' is abstract. */
int lo_ctl_listen(const char *path);
int lo_ctl_accept(int lfd);

/* The devices this process uses, in order of preference: a client proposes on
 * the first whose registry names a listener for its destination; a listener
 * publishes in every one. */
extern const struct dev_ops *const *dev_list;
extern int dev_count;
/* Takes the list from the settings (config_load()). */
void dev_configure(void);
static inline int dev_polls(const struct dev_ops *d)
{
	return d && d->wake_polls && d->wake_polls();
}

/* Whether a device this process uses wakes nobody by itself (dev_ops.wake_fd). */
int dev_wakes_none(void);
/* The device of that kind if this process uses it, else NULL. */
const struct dev_ops *dev_of_kind(int kind);

#endif
