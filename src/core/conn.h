/* The state usmc keeps for one TCP socket, and the operations that move its bytes
 * through shared memory once both ends agreed to. */
#ifndef USMC_CONN_H
#define USMC_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include "decline.h"
#include "export.h"
#include "holders.h"
#include "lgr.h"
#include "obj.h"
#include "ring.h"

enum conn_mode {
	MODE_NEW,      /* TCP socket, not connected yet: everything goes to the kernel */
	MODE_LISTEN,   /* accelerated listener (registered) */
	MODE_PLAIN,    /* decided: plain TCP, usmc steps aside */
	MODE_PENDING,  /* client proposed; bytes go to the ring, server not attached yet */
	MODE_SHM,      /* both ends attached: every byte goes through the rings */
};

struct epreg;

struct epoll_early;

/* An extension of the connection's protocol (ERM, src/erm): its state hangs
 * off the socket (usock.ext, NULL until the extension is used), and the core
 * reaches it only through this table, which the extension sets before it makes
 * its first state. */
struct conn_ext_ops {
	/* Events of its own for poll and epoll (POLLERR: completions are
	 * pending), read without locks. */
	short (*revents)(struct usock *s);
	/* A value that changes whenever revents() may have (conn_stamp()). */
	uint64_t (*stamp)(struct usock *s);
	/* The connection's shared memory is about to go, or its end to another
	 * program (exec): the state lets go of what it shares with the peer and
	 * stays, dead, until release(). Called again, it does nothing. */
	void (*teardown)(struct usock *s);
	/* The socket is freed: so is the state, which leaves s->ext NULL. */
	void (*release)(struct usock *s);
	/* In a forked child: the state is the parent's; the child forgets it. */
	void (*forget)(struct usock *s);
};
extern const struct conn_ext_ops *conn_ext;

/* A peer's FIN or hang-up that came without its close flag: not looked into yet;
 * its process died with bytes of ours unread, and we reset the connection as
 * TCP's RST would have; or a FIN like any other. */
enum { PEER_END_UNJUDGED, PEER_END_RESET, PEER_END_FIN };

struct usock {
	struct obj o;
	_Atomic int mode;
	pthread_mutex_t lock;       /* mode changes, pending resolution, registrations */
	/* One consumer, one producer at a time; never held across a sleep. */
	pthread_mutex_t rx_lock;
	pthread_mutex_t tx_lock;
	struct holders *hold;       /* after fork: the end's state, shared by its holders */
	int hold_fd;                /* its memfd */
	int family;
	int smc;                    /* created with IPPROTO_SMC (a listener: its connections too) */
	int server;                 /* accepted side */
	int nonblock;               /* O_NONBLOCK of the open file, as last set */
	_Atomic int connected;      /* the TCP handshake completed (polls in other threads may see it) */
	/* Read without the locks by every thread polling or waiting on the socket. */
	_Atomic int shut_rd, shut_wr;
	int abortive;               /* SO_LINGER {1, 0}: close sends RST */
	int closing_fin;            /* closed: the kernel ends the socket with FIN */
	_Atomic int tcp_event;      /* FIN, RST or error seen on the TCP socket */
	_Atomic int tcp_sent;       /* a write went to the TCP socket */
	_Atomic int peer_gone;      /* the peer will never read again */
	/* The last blocking wait that slept was over within the longest spin:
	 * the next spin may go that long (conn_wait.c). */
	_Atomic int spin_long;
	/* The device found the peer gone for good, without a word on TCP (a
	 * virtual machine killed or frozen past its lease): the connection ends
	 * with ECONNRESET unless its stream ended already. */
	_Atomic int peer_lost;
	/* How the peer's end without its close flag was judged: PEER_END_* */
	_Atomic int peer_end;
	_Atomic int declined;       /* client: a decline arrived, DECL_* + 1 */
	uint64_t deadline_ns;       /* client: give up waiting for the attach */
	/* client: look at TCP and the registry again; a blocked call's wait reads
	 * it without the lock a check moves it under */
	_Atomic uint64_t recheck_ns;
	struct sockaddr_storage dst; /* client: where it connected */
	uint64_t conn_id;
	/* The device of its segment, once it has had one: kept when the segment
	 * goes, for a wake-up racing with the teardown. */
	const struct dev_ops *dev;
	struct seg_loc seg;
	struct ring_end tx, rx;
	/* Our end of the doorbell for poll and epoll (blocking calls sleep on
	 * futexes): a socket pair, so the one descriptor both sleeps (the peer's
	 * rings arrive on it) and rings the peer (what we send arrives on theirs). */
	int bell;
	/* The peer's prod_bells when we last emptied it (epoll sets of several
	 * threads may look at once: a lost update only empties it early). */
	_Atomic uint32_t bells_drained;
	/* Threads asleep on the doorbell in poll (poll, select, a blocking call
	 * that waits for more than one thing), plus BELL_EMPTYING while one
	 * thread empties it: conn_bell_wait_begin(). */
	_Atomic uint32_t bell_users;
	struct timeval rcvtimeo, sndtimeo;
	int sndbuf, rcvbuf;         /* sizes the application asked for, 0 = default */
	/* SO_SNDBUF and SO_RCVBUF as getsockopt() reports them once set, else 0;
	 * and the peer's receive buffer as the producer last took it (ring.h,
	 * cons_window). */
	int sndbuf_eff, rcvbuf_eff;
	uint32_t peer_window;
	/* client: its producer's limit is still the window of a pending
	 * connection; the writer widens it once it sees the attach */
	int tx_pending_limit;
	/* client: a non-blocking write found the pending connection's window
	 * full; the attach then counts as room growing (tx_grown, in the stamp),
	 * as an edge-triggered wait for room must hear of it */
	_Atomic int tx_window_hit;
	_Atomic uint32_t tx_grown;
	/* SO_RCVLOWAT as getsockopt() reports it (0 until set: 1), and
	 * TCP_NOTSENT_LOWAT (0: none). */
	int rcvlowat, notsent_lowat;
	int oobinline;              /* SO_OOBINLINE */
	/* The socket's owner (F_SETOWN) as the peer's sender is told (ring.h,
	 * cons_sigurg), published once the rings exist. */
	int32_t sigurg;
	/* listener */
	struct sockaddr_storage bound;
	int registered;
	int forked;                 /* listener: inherited across fork() */
	_Atomic int accepting;      /* listener: pid that claimed it, 0 before */
	_Atomic uint64_t reclaim_ns; /* listener on an ambiguous port: when to claim again */
	_Atomic uint64_t netns_cookie; /* listener: its namespace's cookie, 0 until known */
	/* listener: the port's proposal count as last seen (high half) and when it was
	 * first seen so, in milliseconds (low half): worth_asking() */
	_Atomic uint64_t proposals_seen;
	int accept_ep;              /* listener: what a blocking accept() waits in (accept.h) */
	struct epreg *regs;         /* epoll registrations naming this socket */
	/* Blocking calls and poll() calls asleep on the arm they made: until they
	 * wake, no epoll wait may take the arm back (conn_unarm). */
	_Atomic int arm_waits;
	/* Registrations made while it was an unconnected socket (the application's
	 * instances hold them for real): connect() moves them to shadows. */
	struct epoll_early *early;
	/* Whether early holds any, read without the lock: a connect() that finds none
	 * has nothing to move, and a registration made meanwhile sees the mode settled
	 * and moves itself (seq_cst on both sides). */
	_Atomic int has_early;
	/* In lgr->pending while its proposal is unresolved (pprev NULL outside):
	 * a connection leaves it in O(1), however many others are connecting. */
	struct usock *pending_next, **pending_pprev;
	/* An extension's state (conn_ext_ops), set once under lock. */
	void *_Atomic ext;
};

struct usock *usock_new(int family, int nonblock);
void usock_get(struct usock *s);
void usock_put(struct usock *s);     /* frees at zero */

/* connect()/accept() hooks: decide and set up acceleration. */
int conn_connect(struct usock *s, int fd, const struct sockaddr *addr, socklen_t len);
/* A socket with no state yet (fresh, see the descriptor table) about to connect:
 * 1 if it stays plain, as the policy or the registry says (why: which), so that
 * it needs none; then conn_fresh_fell_back() once connected. */
int conn_fresh_stays_plain(int family, int fd, const struct sockaddr *addr, socklen_t len,
			   enum decline *why);
void conn_fresh_fell_back(int fd, enum decline why);
void conn_accepted(struct usock *l, struct usock *s, int fd, const struct sockaddr *peer);
int conn_listen(struct usock *s, int fd, int backlog);
/* The last descriptor of a registered listener in this process was closed (ino: its
 * socket inode). */
void conn_listener_closed(struct usock *s, unsigned long ino);
/* Before fork(): the child will hold every descriptor we hold. */
void conn_atfork_prepare(struct usock *s, int fd);
/* In the child after fork(). */
void conn_atfork_child(struct usock *s);
/* Before a second process may hold the connection (fork, exec, a descriptor
 * passed on) or its FIN leaves: a client whose attach is pending waits a moment
 * for it, else falls back. Whether the attach came and what went into the ring
 * unread are this process's knowledge alone, so two holders that each settled
 * it their own way would split the stream between the ring and TCP. */
void conn_settle(struct usock *s, int fd);
/* One more process will hold this end (fork, a descriptor passed on): its state
 * moves to the holders' page. -1 if it cannot. conn_unshare() takes it back when
 * the other process never came. */
int conn_share(struct usock *s);
void conn_unshare(struct usock *s);

/* Fills x for an attached connection (the descriptor copies are the caller's);
 * -1 when it cannot be handed over. */
int conn_export(struct usock *s, int fd, struct conn_export *x);
/* Closes the descriptor copies (exec() failed). */
void conn_export_close(struct conn_export *x);
/* The connection x describes, taking over its descriptors (closed on failure);
 * NULL if x does not hold together. */
struct usock *conn_import(const struct conn_export *x);

/* Data. Each returns what the corresponding system call would (-1 and errno). */
ssize_t conn_send(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags);
/* conn_send() of what is not urgent, which also sums what goes into the ring
 * into the CRC32C register *crc, as it copies it; bytes that go to the kernel
 * (a connection that fell back) are not: ddp.c looks at the mode first. */
ssize_t conn_send_sum(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags,
		      uint32_t *crc);
/* The rest of a piece conn_send() sent short, sent on as the kernel's splice
 * sends what a short send left of a pipe (sendfile()): without waiting for
 * room, and to TCP once the connection writes there, whose error this send
 * then takes while the call's count hides it. Returns what went out, 0 for
 * nothing. */
ssize_t conn_send_more(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags);
ssize_t conn_recv(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags);
/* conn_recv() that is no peek, summing as it copies out of the ring. */
ssize_t conn_recv_sum(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags,
		      uint32_t *crc);
/* recv(MSG_OOB); msg_flags (may be NULL) gets what recvmsg() reports. */
ssize_t conn_recv_urg(struct usock *s, int fd, const struct iovec *iov, int iovcnt, int flags,
		      int *msg_flags);
/* SIOCATMARK. */
int conn_atmark(struct usock *s, int fd, int *out);
/* setsockopt() of one of these succeeded with v. */
enum conn_limit { CONN_SNDBUF, CONN_RCVBUF, CONN_RCVLOWAT, CONN_NOTSENT_LOWAT };
void conn_set_limit(struct usock *s, int fd, enum conn_limit which, int v);
/* F_SETOWN_EX (type: F_OWNER_*; id 0 for none), or its equivalents, succeeded. */
void conn_set_owner(struct usock *s, int type, pid_t id);
int conn_shutdown(struct usock *s, int fd, int how);
/* The last descriptor of a connection (not a listener: conn_listener_closed()) is
 * being closed. Returns 1 when conn_close_finish() must follow once the kernel
 * closed it. */
int conn_close(struct usock *s, int fd);
void conn_close_finish(struct usock *s);
int conn_fionread(struct usock *s, int fd, int *out);
/* SIOCOUTQ (TIOCOUTQ) and SIOCOUTQNSD. */
int conn_outq(struct usock *s, int fd, int *out);

/* Readiness. conn_poll_prepare() says which events to ask the kernel for on the TCP
 * socket (it never carries data, so only FIN/RST/errors matter) and conn_revents()
 * merges those with the rings. conn_arm() asks the peer to ring our doorbell for
 * the given directions; it returns nonzero if the condition already holds. */
short conn_poll_prepare(struct usock *s, short events);
short conn_revents(struct usock *s, int fd, short events, short tcp_revents);
int conn_arm(struct usock *s, int fd, short events);
void conn_disarm(struct usock *s, short events);
/* A poll() relies on its arms from conn_arm() until it wakes: it says so around
 * its sleep. */
void conn_arm_wait_begin(struct usock *s);
void conn_arm_wait_end(struct usock *s);
/* An epoll wait that armed a socket's input to sleep, back awake, takes the arm
 * back when nothing else relies on it: no blocking call or poll() asleep on the
 * socket, no other process holding it, and no other arm since (gen, read by
 * conn_arm_gen() after arming). Until the wait sleeps again, the peer then
 * rings nothing for the socket; the wait looks at its stamp instead. Returns
 * whether it did. */
uint32_t conn_arm_gen(struct usock *s);
int conn_unarm(struct usock *s, uint32_t gen);
/* What has happened on a connection so far, as far as readiness for events can
 * tell: the peer's cursors for the directions asked for, and how the stream
 * ended (CONN_END_*). Any such event makes it change; it never changes back.
 * Its flags' other changes (a close's steps) are no event: the close is its FIN
 * or RST. */
#define CONN_END_FIN  1u /* the peer's FIN: its flag, or its edge on the TCP socket */
#define CONN_END_RST  2u /* its RST */
#define CONN_END_GONE 4u /* it vanished, or the connection was aborted */
struct conn_stamp {
	uint64_t rx_prod, tx_cons;
	uint64_t ext;   /* conn_ext_ops.stamp() */
	uint32_t ends;
};
void conn_stamp(struct usock *s, short events, struct conn_stamp *st);
static inline int conn_stamp_same(const struct conn_stamp *a, const struct conn_stamp *b)
{
	return a->rx_prod == b->rx_prod && a->tx_cons == b->tx_cons && a->ext == b->ext &&
	       a->ends == b->ends;
}
/* An event loop (poll, select, epoll) about to sleep spins first, as a blocking
 * call does, before it asks its peers to ring: look(arg, 0) looks at its
 * accelerated sockets in shared memory, look(arg, 1) besides makes a wait that
 * returns at once (the application's own descriptors, the doorbells rung), a
 * system call: the first look, then one every CONN_DEEP_LOOK_NS. It is called
 * until it returns nonzero or conn_spin_ns(polls) passes, bounded by the caller's
 * timeout (ms, -1 for none). Returns look()'s last result; 0 means sleep. On a
 * single core, or with busy-polling off, it never calls look(). */
int conn_busy_wait(int (*look)(void *, int deep), void *arg, int timeout_ms, int polls);
/* How long a wait spins: USMC_BUSY_POLL_US, or by default, where a device in the
 * wait polls (polls: dev_polls()), at least USMC_POLL_US. */
uint64_t conn_spin_ns(int polls);
#define CONN_DEEP_LOOK_NS 2000ull
/* What a look returns for news it found in shared memory, where the kernel's
 * wait, which returns a count, has nothing to say. */
#define CONN_LOOK_NEWS (-2)
/* Client in MODE_PENDING: resolve it now if the server answered or gave up. */
void conn_pending_check(struct usock *s, int fd);
/* The connection lets go of its doorbell end (closed or kept by the caller). */
void conn_bell_release(struct usock *s);
/* Empties our doorbell (it holds what it was rung with), passing the
 * wake-up on to every epoll set but except. */
void conn_bell_clear(struct usock *s, const void *except);
/* A thread is about to sleep on the doorbell in poll, level-triggered: until
 * conn_bell_wait_end(), nobody empties it (a ring emptied under the sleeper
 * before it looked again would be lost to it; the sleeper empties it once
 * awake). One being emptied is waited for. */
void conn_bell_wait_begin(struct usock *s);
void conn_bell_wait_end(struct usock *s);
/* For epoll, which watches doorbells edge-triggered and so needs them emptied
 * only before they fill up: our doorbell rang; it is emptied (as above) once
 * the peer has rung it BELL_DRAIN_AT times since the last time. */
void conn_bell_rang(struct usock *s, const void *except);
/* For the event loops: a doorbell rang or the TCP socket reported something. */
void conn_note_tcp_event(struct usock *s);

/* How often a client waiting for the attach looks again at what rings no bell:
 * the TCP socket (a plain peer answering) and the registry (the listener became
 * ambiguous). Waits on pending sockets sleep no longer than this. */
#define CONN_PENDING_RECHECK_MS 10

static inline int conn_pending(struct usock *s)
{
	return atomic_load_explicit(&s->mode, memory_order_acquire) == MODE_PENDING;
}

/* A registered listener: accept() goes through the library, and siblings
 * accepting on the same socket may ask this process for proposals. */
static inline int conn_listening(struct usock *s)
{
	return s->registered && atomic_load_explicit(&s->mode, memory_order_acquire) == MODE_LISTEN;
}

/* Both ends attached: every byte goes through the rings. */
static inline int conn_attached(struct usock *s)
{
	return atomic_load_explicit(&s->mode, memory_order_acquire) == MODE_SHM;
}

static inline int conn_accel(struct usock *s)
{
	int m = atomic_load_explicit(&s->mode, memory_order_acquire);
	return m == MODE_SHM || m == MODE_PENDING;
}

/* The TCP socket reported a FIN, an RST or an error (conn_note_tcp_event()). */
static inline int conn_tcp_news(struct usock *s)
{
	return atomic_load_explicit(&s->tcp_event, memory_order_relaxed);
}

/* What an extension (conn_ext_ops) may ask of its connection (conn_ext.c). */
/* Waits for a client's pending attach to resolve (at most until its handshake
 * deadline), and says whether the connection is attached: every byte through
 * shared memory, this process its only holder, neither end handed to another
 * process, and a channel of ours to the peer's process. */
int conn_ext_usable(struct usock *s, int fd);
/* The writer's hold: what is done under it is ordered after the bytes written
 * before and before those written after, for the peer as for us. */
void conn_ext_lock(struct usock *s);
void conn_ext_unlock(struct usock *s);
/* Under the writer's hold: wake the peer as new bytes would. */
void conn_ext_notify(struct usock *s);
/* Something new for this process's own waiters (completions of its commands):
 * wake its epoll sets that watch the socket. A thread asleep in poll() on it
 * hears of it at its next wake-up. */
void conn_ext_wake_local(struct usock *s);
/* The peer closed its socket, or its process ended (probe: look at its
 * channel now, a system call), and nothing it holds of ours will be read or
 * written by it any more. */
int conn_ext_peer_ended(struct usock *s, int probe);

/* The TCP socket's own poll state, without a system call while nothing happened
 * on it (it carries no data, so only FIN, RST and errors can change it). seen: the
 * events a watch of the TCP socket gathered from its edges (0 without one); once
 * they include the FIN, only an error costs a system call. */
short conn_tcp_state(struct usock *s, int fd, short seen);
#endif
