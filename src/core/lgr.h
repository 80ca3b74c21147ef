/* Link groups: everything two processes share once, so that each further
 * connection between them costs one control message.
 *
 * A client-side link group is keyed by the listener's control socket; it owns the
 * control channel and the arenas (memfds) from which the client carves connection
 * segments. The server side holds the accepted end of that channel and the arenas
 * as mapped from the descriptors that arrived with proposals. */
#ifndef USMC_LGR_H
#define USMC_LGR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "addr.h"
#include "bellcache.h"
#include "clc.h"
#include "segment.h"

struct usock;
struct dev_ops;

struct arena {
	const struct dev_ops *dev;
	uint32_t id;
	int fd;                 /* lo: its memfd, kept so that exec() can hand it over */
	int ctl;                /* the channel it is announced on or came with (the device's) */
	int mine;               /* client: made here, to carve */
	int unsent;             /* client: the proposal announcing it has yet to go */
	int refs;               /* adopted: connections using it */
	uint64_t idle_since;    /* adopted, none using it: since when (sys_now_ns) */
	/* adopted: what tells it from others without a system call per arena at
	 * every adoption (dev_ops.arena_ident) */
	uint64_t ident[2];
	unsigned char *base;
	uint64_t size;
	uint64_t bump;          /* client: first never-used byte */
	struct arena *next;
};

/* A segment handed back by its client, reusable or waiting for the server, with
 * the client's doorbell end when both ends kept theirs (else -1). */
struct seg_ref {
	struct arena *arena;
	uint64_t off, size;
	int bell;
	uint32_t bell_unread;
	struct seg_ref *next;
};

enum lgr_role { LGR_CLIENT, LGR_SERVER };

/* A memfd the peer sent for its end of a connection (CLC_EXT_FD), kept until
 * that connection asks for it or goes. */
struct lgr_ext_fd {
	uint64_t conn_id;
	uint32_t index;
	int fd;
	uint64_t size;
	struct lgr_ext_fd *next;
};

struct lgr {
	const struct dev_ops *dev;
	enum lgr_role role;
	int ctl;                /* the device's handle of the control channel */
	char peer[256];         /* client: the registry's path of the listener's endpoint */
	pthread_mutex_t lock;
	int refs;               /* connections using it + 1 while it is usable */
	int dead;               /* the channel hung up or broke */
	uint32_t next_arena_id;
	uint64_t next_conn_id;      /* client: last id given; server: last id accepted */
	struct arena *arenas;
	struct seg_ref *free, *zombies;  /* client: reusable / waiting for the server */
	struct usock *pending;           /* client: proposed, not yet resolved */
	_Atomic uint64_t looked_ns;      /* client: when a pending connection last read the channel */
	struct bellcache kept;           /* server: doorbell ends of released segments */
	struct lgr_ext_fd *ext_in;       /* memfds the peer sent, under lock */
	unsigned n_ext_in;
	struct lgr *next;
};

/* A segment a connection uses, located in its link group. */
struct seg_loc {
	struct lgr *lgr;
	struct arena *arena;
	uint64_t off, size;
	uint64_t ring_size[2];
	struct seg_hdr *hdr;
	/* At most how many rings the connection's doorbell end still holds from
	 * the segment's earlier connections (SEG_BELL_UNKNOWN: nobody counted). */
	uint32_t bell_unread;
	/* Handed over by a sibling that keeps the doorbell end too (CLC_F_BELL_HELD). */
	int bell_held;
};
#define SEG_BELL_UNKNOWN UINT32_MAX

/* Client: find or open the link group to a listener's endpoint on dev; returns
 * it referenced. */
struct lgr *lgr_client_get(const struct dev_ops *dev, const char *path);
/* Client: carve a segment, initialise it PENDING, and send the proposal for it
 * (to connect to dst) with what the device passes: our TCP socket and, unless
 * the segment's is kept, the server's end of a new doorbell. bell gets our end
 * (we sleep on it and ring through it). Returns 0 or -errno. */
int lgr_propose(struct lgr *g, struct usock *s, int tcpfd, const struct sockaddr *dst,
		const uint64_t ring_size[2], struct seg_loc *loc, int *bell);
void lgr_withdraw(struct lgr *g, uint64_t conn_id);
/* Client: read what the server sent (declines) and note a hang-up. */
void lgr_client_poll(struct lgr *g);
/* Client: lgr_client_poll() unless the group's channel was read within the last
 * LGR_LOOK_NS: its pending connections share the channel, and one read delivers
 * the declines of all. */
#define LGR_LOOK_NS 1000000ull
void lgr_client_look(struct lgr *g, uint64_t now);
/* Client: the connection's proposal is resolved; declines and a hang-up of
 * the link group no longer concern it. */
void lgr_unpend(struct usock *s);
/* Drops a connection's hold on its segment without releasing it: another
 * process still holds the connection's end. */
void lgr_seg_forget(struct seg_loc *loc);
/* After exec(): map an arena of dev handed over by the previous program (taking
 * over fd), or find the one already mapped; link names its channel
 * (dev_ops.ctl_export). NULL on failure. */
struct arena *lgr_arena_adopt(const struct dev_ops *dev, int fd, uint32_t id, uint64_t size,
			      const uint64_t link[2]);

/* Both: give a connection's segment (s->seg) back and drop the connection's
 * reference (a connection adopted after exec() has no link group: lgr is NULL).
 * bell, the connection's doorbell end, is taken over (kept for the segment's
 * next connection with bell_unread, or closed); -1 when the connection did not
 * end cleanly. */
void lgr_seg_release(struct usock *s, enum lgr_role role, int bell);
void lgr_put(struct lgr *g);
/* Both: a connection's peer vanished without closing. If the peer process's channel
 * hung up, the link group stops being offered to new connections and goes, arenas
 * and all, with the last connection's reference. */
void lgr_peer_vanished(struct lgr *g);
/* The peer process the channel vouches for: the one that connected it, or
 * listened for it (SO_PEERCRED), as our pid namespace numbers it (0 when it is
 * out of sight, or g is NULL: a connection a sibling handed over, one adopted
 * after exec). cred, unless NULL, gets its credentials. */
pid_t lgr_peer_pid(struct lgr *g);
int lgr_peer_cred(struct lgr *g, struct ucred *cred);
/* Extensions of a connection (ERM) share memory beyond its segment: each side
 * sends the memfds the other maps on the channel, numbered by the sender within
 * the connection. lgr_ext_send() sends fd (it stays the caller's) of size
 * bytes; returns 0 or -errno. lgr_ext_take() returns the descriptor the peer
 * sent as index for the connection (the caller's now, size in *size), reading
 * the channel if it has not come in yet; -1 if the peer sent none. A message
 * the peer sent before it published something naming it is in the channel by
 * then. lgr_ext_drop() closes what came for a connection that ends. */
int lgr_ext_send(struct lgr *g, uint64_t conn_id, uint32_t index, int fd, uint64_t size);
int lgr_ext_take(struct lgr *g, uint64_t conn_id, uint32_t index, uint64_t *size);
void lgr_ext_drop(struct lgr *g, uint64_t conn_id);
/* Whether the peer's end of the channel hangs up within ms (its process ended). */
int lgr_hangs_up(struct lgr *g, int ms);

/* Server: start accepting link groups at this process's endpoint on each device
 * (a listener opens them, its last close closes them). Returns 0 when one at
 * least is open. */
int lgr_server_start(void);
/* The endpoint's name on dev, "" when it is not open. */
const char *lgr_server_name(const struct dev_ops *dev);
/* Whether this process has an accelerated listener. */
int lgr_server_listening(void);
/* Server: a connection accept() returned, as proposals name it. */
struct lgr_accepted {
	int fd;
	struct addr local, peer;
	_Atomic uint64_t *netns_cookie; /* the listener's network namespace cookie, 0 until known */
};
/* Fills c for fd, accepted from peer on the listener bound to bound: local is the
 * listener's own address, unless it takes any (one getsockname then, for every
 * look that follows). Returns 0, or -1 if the socket's name cannot be had. */
int lgr_accepted_init(struct lgr_accepted *c, int fd, const struct sockaddr *peer,
		      const struct sockaddr_storage *bound, _Atomic uint64_t *netns_cookie);
/* The network namespace cookie of c's listener, 0 if the kernel cannot tell. */
uint64_t lgr_accepted_netns(const struct lgr_accepted *c);
/* Server: find the proposal for an accepted connection. Returns 1 and fills
 * loc/bell/conn_id on a match (the caller attaches), 0 if the client did not
 * propose, and -reason if a proposal matched but cannot be used (it was declined). */
int lgr_server_match(const struct lgr_accepted *c, struct seg_loc *loc, int *bell,
		     uint64_t *conn_id);
/* g NULL (a connection handed off by a sibling): nothing to say it on. */
void lgr_server_decline(struct lgr *g, uint64_t conn_id, uint32_t code);
/* Server, for a sibling that accepted a connection proposed to us, from peer on
 * local, on a listener in the network namespace netns_cookie names. If the
 * proposal whose client socket mirrors that is here, send() gets it, ready to
 * travel (arena included: its descriptor, or for a device that names arenas
 * itself, dev its kind and link the device's name of its channel), with its nfds
 * descriptors in CLC_HFD_* order, which stay ours; once sent it is the
 * sibling's. Returns 1 if it went. */
struct lgr_gift {
	struct clc_proposal p;
	uint32_t dev;
	uint64_t link[2];
	int fds[CLC_HFD_MAX];
	int nfds;
};
int lgr_server_give(const struct addr *local, const struct addr *peer, uint64_t netns_cookie,
		    int (*send)(void *ctx, const struct lgr_gift *gift), void *ctx);
/* Server: the proposal a sibling handed off for the connection we accepted (see
 * lgr_server_match), with its descriptors, which are taken over. The sibling
 * checked the binding; this maps the arena and returns 1, filling loc (without
 * a link group) and bell, or 0. */
int lgr_server_adopt(const struct clc_handoff *h, int *fds, struct seg_loc *loc, int *bell);
/* Server, now and then (a device's look, dev_ops.wake_tick): takes in what the
 * channels hold, so that the link groups of clients gone are let go of even
 * while no connection comes (their memory is freed once we do). */
void lgr_server_look(void);
/* Server, at an accept whose connection can have no proposal (registry_unsettled()):
 * takes in what the channels hold, as a match would (hang-ups, withdrawals,
 * malformed messages), with one look at them all. */
void lgr_server_take_news(void);
/* Server: a listener went away; with none left, drop unresolved proposals. */
void lgr_server_listener_gone(void);

/* After fork(), in the child: forget link groups the parent owns. */
void lgr_atfork_child(void);

#endif
