/* The socket table: what usmc made of each TCP socket of a process, published
 * for `usmc ss` in <rundir>/socks/<pid>-<random> (a procfile).
 *
 *   struct socktab_hdr, then nslots struct socktab_slot, one per descriptor
 *   number: a socket's state is written where its descriptor is, so a slot needs
 *   no freeing, and close() clears it. The reader learns the socket's inode from
 *   /proc/PID/fd/N, which costs the process nothing on its connection path, and
 *   skips a slot whose descriptor is no TCP socket any more (closed in a way the
 *   library did not see, such as close_range()).
 *
 * The process writes a slot at each state change (connect, accept, listen,
 * attach, fallback, close) under the slot's sequence word, odd while it writes;
 * a reader copies the slot and keeps the copy only if the word was even and
 * unchanged around it. Ring cursors are not copied here: a reader wanting them
 * maps the connection's segment through the arena descriptor the slot names
 * (a local device's: a region's arenas have none).
 *
 * A forked child publishes its sockets from their next state change on; those
 * it inherited stay listed under the parent for as long as the parent holds
 * them. An exec'd program publishes the connections it takes over.
 *
 * Processes sharing a runtime directory may each have a pid namespace of their
 * own (containers): a table names its process by its pid there and by that
 * namespace, and the reader looks the process up in its own /proc. */
#ifndef USMC_SOCKTAB_H
#define USMC_SOCKTAB_H

#include <stdatomic.h>
#include <stdint.h>

#include "decline.h"

#define SOCKTAB_MAGIC 0x4b4154534355534dull
#define SOCKTAB_VERSION 4u
/* Descriptors beyond this are not published (the file is sparse: only slots
 * written take memory). */
#define SOCKTAB_MAX_SLOTS (1u << 20)

enum socktab_state {
	SOCKTAB_FREE,
	SOCKTAB_LISTEN,   /* registered listener */
	SOCKTAB_PENDING,  /* client proposed, the server has not attached */
	SOCKTAB_SHM,      /* both ends attached: bytes go through shared memory */
	SOCKTAB_TCP,      /* fell back to plain TCP, for the reason in decline */
	SOCKTAB_STATES
};

struct socktab_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t slot_size;
	uint32_t nslots;
	int32_t pid;              /* in its own pid namespace, */
	_Atomic uint32_t used;    /* no slot at or above this was ever written */
	uint32_t pidns;           /* which is this one (the inode of /proc/self/ns/pid) */
	uint32_t reserved[8];
};

struct socktab_slot {
	_Atomic uint32_t seq;
	uint8_t state;            /* enum socktab_state */
	uint8_t server;           /* the accepting end (listeners: 0) */
	uint8_t decline;          /* enum decline, for SOCKTAB_TCP */
	uint8_t device;           /* enum dev_kind, for SOCKTAB_PENDING and SOCKTAB_SHM */
	uint64_t conn_id;         /* within its link group */
	uint32_t ring_size[2];    /* this end's: [0] it writes, [1] it reads */
	int32_t arena_fd;         /* the process's descriptor of the segment's arena, or -1 */
	uint32_t reserved1;
	uint64_t seg_off;         /* of the segment in the arena */
	uint64_t reserved2[3];
};

_Static_assert(sizeof(struct socktab_hdr) == 64, "header layout");
_Static_assert(sizeof(struct socktab_slot) == 64, "slot layout");

struct usock;

/* The socket behind fd changed state: publishes what s is now. */
void socktab_note(int fd, const struct usock *s);
/* ...to plain TCP, for this reason (server: the accepted end). */
void socktab_fell_back(int fd, int server, enum decline why);
/* fd is being closed. */
void socktab_closed(int fd);
/* After fork(), in the child: the table mapped is the parent's. now: make the
 * child's own table at once, while it may still create files in the run
 * directory (a prefork worker drops its privileges before its first socket). */
void socktab_atfork_child(int now);

#endif
