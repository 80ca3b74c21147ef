/* One direction of a connection: a single-producer/single-consumer byte ring
 * living in shared memory and owned by the receiver.
 *
 * Cursors are 64-bit and monotonic, so "used = prod - cons" never wraps and a
 * stale or forged cursor is detectable: a consumer accepts a producer cursor only
 * if cons <= prod <= cons + size, a producer accepts a consumer cursor only if
 * prod - size <= cons <= prod and it did not move backwards.
 *
 * Each side writes only its own cache lines (the producer's or the consumer's),
 * so the peer can never make us write into state we trust: our own cursors are
 * kept privately in struct ring_end and merely published. Each side's cursor
 * has a line to itself, apart from its wait word and flags: the cursor moves at
 * every call, while the peer reads the wait word at every call too, and would
 * otherwise fetch the line back each time. */
#ifndef USMC_RING_H
#define USMC_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define RING_CACHELINE 64

/* Flags the producer publishes in its line. */
#define RING_PF_SHUT_WR 0x1u   /* no more bytes will follow (shutdown or close) */
#define RING_PF_FIN     0x2u   /* ...and the TCP socket ends with FIN, not RST */
/* The producer's close sent RST (SO_LINGER {1, 0}, or bytes it left unread),
 * after any FIN its shutdown sent before. */
#define RING_PF_RST     0x8u
/* The producer is closing its socket: SHUT_WR follows once the kernel has sent
 * its FIN or RST. Only a hint for a reader's spin, which it keeps going. */
#define RING_PF_CLOSING 0x4u
/* Flags the consumer publishes in its line. */
#define RING_CF_CLOSED  0x1u   /* the consumer closed the socket: nobody will read */
/* Either side, in its own line: this end went to other processes (fork, exec),
 * so its link group's channel no longer speaks for it: the channel hanging up
 * does not mean the end is gone. */
#define RING_F_HANDED   0x80u

/* How a waiter wants to be woken (its "how" word): a thread blocked in a call on
 * this socket sleeps on a futex, poll and epoll sleep on a doorbell descriptor. */
#define RING_WAKE_FUTEX 0x1u
#define RING_WAKE_BELL  0x2u

/* Shared control block of one direction. A "wait" word is a generation counter:
 * odd means "I am about to sleep, wake me once"; the other side wakes at most
 * once per odd value it sees. A "kick" word is the futex the other side sleeps
 * on: the waker bumps its own before waking, so a wake-up that lands before the
 * sleeper gets to futex_wait() is not lost. */
struct ring_shared {
	_Alignas(RING_CACHELINE) _Atomic uint64_t prod;
	/* Where the producer last rewound: finding the ring empty at this cursor,
	 * it went on at the ring's start (the next multiple of its size), and the
	 * bytes between carry nothing. A consumer at this cursor stands where one
	 * at the ring's start would. */
	_Atomic uint64_t prod_skip;
	/* Urgent data (MSG_OOB), as SMC's urg_curs: the cursor just past the
	 * latest urgent byte, 0 before any, and where the run of adjacent urgent
	 * bytes it ends began (one-byte urgent sends back to back). Both are
	 * stored before the prod that publishes the byte; every read looks at
	 * them, so they share prod's line. */
	_Atomic uint64_t prod_urg;
	_Atomic uint64_t prod_urg_run;
	_Alignas(RING_CACHELINE) _Atomic uint32_t prod_wait;   /* producer waits for space */
	_Atomic uint32_t prod_flags;
	_Atomic uint32_t prod_how;    /* RING_WAKE_* for the producer's wait */
	_Atomic uint32_t prod_kick;   /* the consumer sleeps on it for data */
	_Atomic uint32_t prod_cpu;    /* core the producer last ran on (spinning policy) */
	/* Rings this side (the producer of this ring) sent into the other side's
	 * doorbell, for its wake-up or ours alike: an epoll waiter empties its
	 * doorbell only once this ran well ahead of what it last emptied. */
	_Atomic uint32_t prod_bells;
	_Alignas(RING_CACHELINE) _Atomic uint64_t cons;
	_Alignas(RING_CACHELINE) _Atomic uint32_t cons_wait;   /* consumer waits for data */
	_Atomic uint32_t cons_flags;
	_Atomic uint32_t cons_how;    /* RING_WAKE_* for the consumer's wait */
	_Atomic uint32_t cons_kick;   /* the producer sleeps on it for space */
	_Atomic uint32_t cons_cpu;    /* core the consumer last ran on */
	/* The consumer's receive buffer, SO_RCVBUF as getsockopt() reports it,
	 * once its program set one (0: the kernel's default): bytes of the ring
	 * past this many from its cursor count as not yet sent. */
	_Atomic uint32_t cons_window;
	/* Who the consumer's socket owner (F_SETOWN) is, for the producer to
	 * send SIGURG when urgent data goes out: the pid of the consumer's
	 * process, minus it for that process's group, RING_SIGURG_UNNAMED for an
	 * owner it cannot name so, 0 for none. */
	_Atomic int32_t cons_sigurg;
};
#define RING_SIGURG_UNNAMED INT32_MIN

/* Our private view of one direction: validated copies only. */
struct ring_end {
	struct ring_shared *sh;
	unsigned char *data;
	uint64_t size;          /* power of two */
	/* Producer: bytes it may have outstanding (<= size), as ring_limit() set
	 * it; cap is the same as of its last look at the consumer, or what was
	 * outstanding then if more (the limit shrank), so that ring_room() never
	 * has to compare. */
	uint64_t limit, cap;
	uint64_t pos;           /* our own cursor: prod if we produce, cons if we consume */
	uint64_t peer;          /* last validated peer cursor */
	uint32_t last_rung;     /* peer wait generation we already rang for */
	uint64_t rewind_at;     /* producer: cursor from which it looks whether to rewind */
	/* Consumer: the urgent cursor (prod_urg) taken last, 0 before any; its
	 * byte is live while it is ahead of pos, and was read with MSG_OOB once
	 * urg_read is set. */
	uint64_t urg;
	int urg_read;
};

enum ring_err { RING_OK = 0, RING_CORRUPT = -1 };

void ring_end_init(struct ring_end *r, struct ring_shared *sh, unsigned char *data,
		   uint64_t size);

/* Consumer side. ring_avail() reads and validates the producer cursor. */
int ring_avail(struct ring_end *r, uint64_t *avail);
/* Copy up to len bytes starting skip bytes after our cursor, without consuming;
 * unless crc is NULL, the copy also sums them into the CRC32C register *crc, in
 * the same pass (direct data placement with a data digest, include/usmc/ddp.h). */
size_t ring_peek_sum(const struct ring_end *r, uint64_t skip, const struct iovec *iov, int iovcnt,
		     size_t iov_skip, size_t len, uint32_t *crc);
static inline size_t ring_peek(const struct ring_end *r, uint64_t skip, const struct iovec *iov,
			       int iovcnt, size_t iov_skip, size_t len)
{
	return ring_peek_sum(r, skip, iov, iovcnt, iov_skip, len, NULL);
}
void ring_consume(struct ring_end *r, uint64_t n);

/* Consumer side, urgent data. ring_urg_news() reads the producer's urgent cursor
 * (after ring_avail()): 1 with a newer one that points into what ring_avail()
 * made visible (*urg, and *run where its run of adjacent urgent bytes began),
 * 0 with none yet, RING_CORRUPT for one that moved backwards or points further
 * than a ring past our cursor. ring_urg_take() takes it: the
 * count of bytes at our cursor that its arrival drops when urgent bytes are not
 * read inline (TCP's tcp_check_urg(): an older urgent byte the reader stands
 * at, and each one after it in the run), which the caller consumes or not. */
int ring_urg_news(const struct ring_end *r, uint64_t *urg, uint64_t *run);
uint64_t ring_urg_take(struct ring_end *r, uint64_t urg, uint64_t run);
/* The urgent byte is live: a read has not passed it yet. */
static inline int ring_urg_live(const struct ring_end *r)
{
	return r->urg > r->pos;
}

/* Producer side. ring_space() reads and validates the consumer cursor. */
int ring_space(struct ring_end *r, uint64_t *space);
/* What ring_space() said last, less what we produced since: never more than there
 * is, and known without touching the consumer's line. */
static inline uint64_t ring_room(const struct ring_end *r)
{
	return r->cap - (r->pos - r->peer);
}
/* Sets the limit. One below what is outstanding leaves no room until the
 * consumer has read below it; the bytes stay. */
void ring_limit(struct ring_end *r, uint64_t limit);
/* The first cursor at or after cursor where the ring starts over (size: a power
 * of two): where a producer that rewinds goes on. */
static inline uint64_t ring_round_up(uint64_t cursor, uint64_t size)
{
	return (cursor + size - 1) & ~(size - 1);
}
/* Copy len bytes from iov (after skipping iov_skip bytes) after our cursor, which
 * moves past them; ring_publish() makes them visible. A stream of small messages
 * stays in the ring's first pages, warm in the caches, rather than walking all
 * of it: past RING_REWIND_AT, a producer that finds the ring empty rewinds to
 * its start (prod_skip). */
#define RING_REWIND_AT (8u << 10)
/* Unless crc is NULL, the bytes are summed into the CRC32C register *crc as
 * they are copied in (a data digest computed over exactly what the peer will
 * read, include/usmc/ddp.h). */
void ring_write_sum(struct ring_end *r, const struct iovec *iov, int iovcnt, size_t iov_skip,
		    size_t len, uint32_t *crc);
static inline void ring_write(struct ring_end *r, const struct iovec *iov, int iovcnt,
			      size_t iov_skip, size_t len)
{
	ring_write_sum(r, iov, iovcnt, iov_skip, len, NULL);
}
/* The byte before our cursor is urgent (prod_urg): between ring_write() and
 * ring_publish(), so that the consumer sees the mark with the byte. */
void ring_mark_urgent(struct ring_end *r);
static inline void ring_publish(struct ring_end *r)
{
	atomic_store_explicit(&r->sh->prod, r->pos, memory_order_release);
}

/* Wait protocol. ring_arm() starts a new odd generation in our wait word and issues
 * the full fence that pairs with the other side's ring_should_ring(); the caller
 * then re-checks its condition before sleeping. */
void ring_arm(_Atomic uint32_t *wait);
void ring_disarm(_Atomic uint32_t *wait);
/* Called after publishing: full fence, then 1 if the peer's word shows a waiter we
 * have not rung for yet. */
int ring_should_ring(_Atomic uint32_t *peer_wait, uint32_t *last_rung);

#endif
