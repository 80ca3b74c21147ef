/* Channels: the control channel of one link group, in the region.
 *
 * A client opens a channel to a listener's endpoint (a slot): it takes a free
 * entry of the channel table, allocates the channel's rings from the heap (they
 * are its memory), and bumps the endpoint's channel count. A process holding
 * the endpoint (the listening process and the children it forked) looks through
 * the table when the count moved and takes the channel by writing its own key,
 * once.
 *
 * Each direction has a message ring (single producer, single consumer, fixed
 * slots carrying one control message each, clc.h) and a doorbell queue: the
 * segments of the connections whose waiter the other side woke, for that
 * side's next look (conn_wake.c rings the peer; without interrupts nothing
 * else could tell it which connection). A full queue sets its overflow flag,
 * and the consumer then looks at every connection of the channel.
 *
 * Cursors are 64-bit and only grow: a consumer accepts a producer cursor only
 * if it lies within a ring of its own, and a ring that breaks that breaks the
 * channel, which then counts as hung up. The ring sizes are constants, never
 * read from the region. */
#ifndef USMC_CHAN_H
#define USMC_CHAN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "region.h"

#define CHANS_DEFAULT 1024u

enum chan_state { CHAN_FREE = 0, CHAN_OPEN = 1, CHAN_CLIENT_GONE = 2 };

/* The server of a channel it let go of (or whose slot was reclaimed): no slot's
 * key, whose low byte is never 0. Not 0, which would make the channel look
 * untaken: a client that exited without closing leaves it open, and the
 * endpoint would take it again at its next scan, read its old proposals anew
 * and hold a link group, and with it the client's memory, for good. */
#define CHAN_LET_GO (~(uint64_t)0xff)

struct chan_entry {
	_Atomic uint64_t word;     /* generation << 8 | enum chan_state */
	_Atomic uint64_t client;   /* key of the slot that opened it, and owns its rings */
	_Atomic uint64_t server;   /* key of the slot that took it; 0 before, CHAN_LET_GO after */
	uint64_t endpoint;         /* key of the endpoint it was opened to */
	uint64_t mem_off;          /* its rings in the heap (CHAN_MEM_SIZE bytes) */
	/* The processes that opened and took it, for a peer on their kernel to
	 * see them exit (slots.h). */
	_Atomic int32_t pid[2];
	uint8_t reserved[80];
};
_Static_assert(sizeof(struct chan_entry) == 128, "channel entry layout");

/* Directions: to the server (proposals, withdrawals) and back (declines). */
enum chan_dir { CHAN_UP = 0, CHAN_DOWN = 1 };

#define CHAN_MSG_SIZE 128u
#define CHAN_MSG_MAX (CHAN_MSG_SIZE - 8)
/* A client may open a thousand connections at once before the server accepts
 * any; the server answers few. */
#define CHAN_UP_SLOTS 1024u
#define CHAN_DOWN_SLOTS 256u
#define CHAN_BELLS 1024u

struct chan_cursor {
	_Alignas(64) _Atomic uint64_t v;
};

struct chan_msg {
	uint32_t len;
	uint32_t pad;
	uint8_t msg[CHAN_MSG_MAX];
};

/* The rings: one cache line per cursor, then the slots and the queues. */
struct chan_mem {
	struct chan_cursor msg_head[2], msg_tail[2];
	struct chan_cursor bell_head[2], bell_tail[2];
	struct chan_cursor bell_overflow[2];
	struct chan_msg up[CHAN_UP_SLOTS];
	struct chan_msg down[CHAN_DOWN_SLOTS];
	_Atomic uint32_t bells[2][CHAN_BELLS];
};
#define CHAN_MEM_SIZE ((sizeof(struct chan_mem) + REGION_PAGE - 1) & ~(size_t)(REGION_PAGE - 1))

static inline struct chan_entry *chan_at(const struct region *r, uint32_t idx)
{
	return (struct chan_entry *)region_at(r, r->h.chans_off) + idx;
}

/* Takes a free entry for a channel of client's to endpoint, with mem_off (zeroed
 * rings of the client's). Returns its index, or -1 when the table is full.
 * *word gets the entry's word, which names this channel from now on. */
int chan_open(const struct region *r, uint64_t client, uint64_t endpoint, uint64_t mem_off,
	      uint64_t *word);

/* One end's private cursors: it sends in one direction and receives, messages
 * and doorbells, in the other. */
struct chan_end {
	struct chan_mem *m;
	uint64_t tx_pos;      /* the tail of the ring we send on */
	uint64_t rx_pos;      /* the head of the ring we receive on */
	uint64_t bell_pos;    /* the head of the queue we are rung on */
};

/* Messages. chan_send: 0, -EAGAIN when full, -EPROTO when the consumer's cursor
 * broke. chan_recv: the length, -EAGAIN when empty, -EPROTO when the producer's
 * cursor or a slot's length broke. */
int chan_send(struct chan_end *e, enum chan_dir d, const void *msg, size_t len);
ssize_t chan_recv(struct chan_end *e, enum chan_dir d, void *msg, size_t len);
/* Whether a message waits (no copy), for a look at many channels. */
int chan_pending(const struct chan_end *e, enum chan_dir d);

/* Doorbells: a ring names the page of the connection's segment in the region.
 * chan_bell_push never fails: a full queue overflows. chan_bell_pop calls
 * rang(arg, page) for each queued, or rang(arg, 0) once after an overflow (every
 * connection may have rung); returns how many it took. chan_bell_push returns
 * whether the queue was empty: the consumer, if it sleeps, wants an interrupt
 * (ivs_doorbell.c); otherwise it will look anyway. chan_bell_pending, after a
 * pop: whether rings came that the pop did not take, and whose producers saw
 * the queue not empty, so rang nobody. */
int chan_bell_push(struct chan_mem *m, enum chan_dir d, uint32_t page);
int chan_bell_pop(struct chan_end *e, enum chan_dir d, void (*rang)(void *, uint32_t), void *arg);
int chan_bell_pending(const struct chan_end *e, enum chan_dir d);

#endif
