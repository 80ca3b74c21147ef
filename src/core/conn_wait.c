/* The wait that sending and receiving share: a blocking call spins while its
 * peer is busy on another core, then sleeps on a futex (in poll() until the TCP
 * handshake completes). Event loops spin the same way, through conn_busy_wait(). */
#include "conn.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>

#include "../dev/dev.h"
#include "config.h"
#include "conn_int.h"
#include "hooks.h"
#include "segment.h"
#include "stats.h"

/* How often a thread asleep on its futex looks at the TCP socket and the link
 * group's channel anyway: a peer killed outright rings nothing, but its FIN and
 * its channel's hang-up arrive, and are seen within this time. */
#define FUTEX_SLICE_NS 200000000ull

/* A descriptor readable when the link group's channel has a message or hung up,
 * or -1. */
static int ctl_fd(const struct lgr *g)
{
	return g && g->ctl >= 0 ? g->dev->ctl_pollfd(g->ctl) : -1;
}

/* The peer process's channel hung up: it died, unless its end went to other
 * processes, which its kernel socket then stays open for. */
static void channel_hung_up(struct usock *s)
{
	if (!((atomic_load(&s->rx.sh->prod_flags) | atomic_load(&s->tx.sh->cons_flags)) &
	      RING_F_HANDED))
		atomic_store(&s->peer_gone, 1);
}

/* Wakes a futex sleeper from a signal handler: the word moves, and a sleep that
 * has not begun yet finds it moved. */
static void futex_bump(void *word)
{
	atomic_fetch_add_explicit((_Atomic uint32_t *)word, 1, memory_order_release);
	futex(word, FUTEX_WAKE, INT_MAX, NULL);
}

/* A handler ran while the call waited: the call fails with EINTR, unless the
 * handler asked for restarts (SA_RESTART) and the socket has no timeout, as the
 * kernel restarts only those. A restart goes on waiting: the handler is
 * consumed, or every later sleep of the call would end at once. */
static int interrupted(int has_timeout)
{
	if (has_timeout || !signal_wait_restart())
		return -EINTR;
	signal_wait_begin();
	return 0;
}

/* The sleep of a blocking call on an attached connection: one futex_wait, no
 * descriptors. Returns like conn_wait(). */
static int futex_wait_one(struct usock *s, int fd, short events, uint64_t deadline, int has_timeout)
{
	int in = events & POLLIN;
	_Atomic uint32_t *how = in ? &s->rx.sh->cons_how : &s->tx.sh->prod_how;
	_Atomic uint32_t *kick = in ? &s->rx.sh->prod_kick : &s->tx.sh->cons_kick;
	_Atomic uint32_t *wait = in ? &s->rx.sh->cons_wait : &s->tx.sh->prod_wait;
	uint32_t k = atomic_load_explicit(kick, memory_order_acquire);
	uint64_t now = sys_now_ns(), slice = FUTEX_SLICE_NS;

	if (deadline && deadline - now < slice)
		slice = deadline > now ? deadline - now : 0;
	conn_arm_wait_begin(s);
	atomic_fetch_or_explicit(how, RING_WAKE_FUTEX, memory_order_relaxed);
	ring_arm(wait);
	if (shm_ready(s, &s->tx, &s->rx, events)) {
		conn_disarm(s, events);
		conn_arm_wait_end(s);
		return 0;
	}
	struct timespec ts = {(time_t)(slice / 1000000000ull), (long)(slice % 1000000000ull)};
	enum hold_dir d = in ? HOLD_RX : HOLD_TX;
	op_unlock(s, d);
	/* A handler that ran since the call's first wait interrupted it;
	 * one that runs from here on bumps the futex, which returns at once. */
	long r = signal_sleep_begin(futex_bump, kick) ? (errno = EINTR, -1)
		 : slice			     ? futex(kick, FUTEX_WAIT, k, &ts)
						     : (errno = ETIMEDOUT, -1);
	int e = errno;
	signal_sleep_end();
	if (r == 0 || e == EAGAIN) {
		if (signal_caught())
			e = EINTR, r = -1;
	}
	op_lock(s, d);
	atomic_fetch_and_explicit(how, ~RING_WAKE_FUTEX, memory_order_relaxed);
	conn_disarm(s, events);
	conn_arm_wait_end(s);
	if (r == 0 || e == EAGAIN)
		return 0;
	if (e == EINTR)
		return interrupted(has_timeout);
	/* A slice ran out: look for what rings no bell. */
	struct pollfd pf[2] = {{fd, (short)(in ? POLLIN | POLLRDHUP : 0), 0},
			       {ctl_fd(s->seg.lgr), 0, 0}};
	if (real.poll(pf, 2, 0) > 0) {
		if (pf[0].revents)
			atomic_store(&s->tcp_event, 1);
		if (pf[1].revents & (POLLHUP | POLLERR))
			channel_hung_up(s);
	}
	return deadline && sys_now_ns() >= deadline ? -ETIMEDOUT : 0;
}

/* Busy-polling before sleeping. A reader or writer whose peer answers within
 * USMC_BUSY_POLL_US, or keeps moving its cursor (draining or filling the ring on
 * another core), wins by spinning rather than sleeping and being woken two
 * system calls later. Spinning cannot win when the peer runs on our own core
 * (it would only delay it), so each side publishes the core it last ran on and
 * nobody spins against a peer on its own. */
#define SPIN_MAX_NS 50000ull
#define SPIN_LOOKS_PER_CLOCK 8u

/* Spinning pays only on a core of our own. Where more threads are runnable than
 * there are cores, a spinner burns the time another thread needed (the peer's,
 * maybe, or the application's own), and each of its yields hands the core away
 * for as long as that thread runs: there TCP, which sleeps and lets it run at
 * once, is faster. Every so often a spin that starts asks the kernel how many
 * threads are runnable (/proc/loadavg), and a spin whose clock jumps between two
 * looks by more than a time slice lost its core to another thread: either way,
 * no wait of the process spins for a while. The count is taken for a crowd only
 * when an ask finds one soon after another did: one ask finds a kernel worker or
 * a timer's thread runnable for a moment now and then, beside two spinners that
 * keep both cores, and every such false alarm would make each wait of the next
 * 20 ms sleep. A crowd that stays is found again by the first ask after spinning
 * was off for it.
 * (How long a yield took says nothing on a virtual machine, whose host takes the
 * core for a moment all the time.) */
#define SPIN_LOST_NS 1000000ull     /* a gap between two looks: another's slice */
#define SPIN_OFF_NS 20000000ull     /* no spinning for this long then */
#define SPIN_PROBE_NS 10000000ull   /* a spin asks for the runnable threads this often */

static _Atomic uint64_t spin_off_until, spin_probe_at;
/* A crowd seen less than this after another is taken for one that stays. */
#define SPIN_CROWD_AGAIN_NS (SPIN_OFF_NS + 3 * SPIN_PROBE_NS)

static _Atomic uint64_t spin_crowd_at; /* when an ask last found more threads than cores */

/* Spinning is off for a while: the core went elsewhere at now. */
static void core_lost(uint64_t now)
{
	atomic_store_explicit(&spin_off_until, now + SPIN_OFF_NS, memory_order_relaxed);
	stat_add(STAT_SPIN_CORE_LOST, 1);
}

/* Whether more threads are runnable on the machine than it has cores: the
 * fourth field of /proc/loadavg counts them, this one included. */
static int machine_busy(void)
{
	char buf[128];
	unsigned long running;
	ssize_t n = sys_read_file("/proc/loadavg", buf, sizeof(buf) - 1);

	if (n <= 0)
		return 0;
	buf[n] = 0;
	return sscanf(buf, "%*s %*s %*s %lu/", &running) == 1 && running > (unsigned long)cfg.ncpus;
}

/* Whether a spin may start at now. */
static int spin_allowed(uint64_t now)
{
	if (now < atomic_load_explicit(&spin_off_until, memory_order_relaxed))
		return 0;
	uint64_t at = atomic_load_explicit(&spin_probe_at, memory_order_relaxed);
	if (now < at || !atomic_compare_exchange_strong(&spin_probe_at, &at, now + SPIN_PROBE_NS))
		return 1;
	if (!machine_busy())
		return 1;
	uint64_t last = atomic_exchange_explicit(&spin_crowd_at, now, memory_order_relaxed);
	if (!last || now - last > SPIN_CROWD_AGAIN_NS)
		return 1;
	core_lost(now);
	return 0;
}

/* Whether the clock jumped by a slice between two looks (prev, now): spinning is
 * then off for a while. */
static int slice_lost(uint64_t prev, uint64_t now)
{
	if (now - prev < SPIN_LOST_NS)
		return 0;
	core_lost(now);
	return 1;
}

/* A device that polls (some peer cannot interrupt us: dev_polls()) wakes a
 * sleep no sooner than its next look, USMC_POLL_US after the activity that
 * preceded it: a spin shorter than that saves no core
 * (the wake-up costs as much) and loses the rest of the interval. By default such
 * waits spin that long; a USMC_BUSY_POLL_US that was set is kept as it is. */
uint64_t conn_spin_ns(int polls)
{
	uint32_t us = cfg.busy_poll_us;

	if (polls && !cfg.busy_poll_given && us < cfg.poll_us)
		us = cfg.poll_us;
	return (uint64_t)us * 1000ull;
}

/* How long the spin of a blocking call on s waits for a peer that does not move.
 * By default that is USMC_BUSY_POLL_US, and up to the longest spin while the last
 * wait that slept was woken within it (spin_learn()): the peer answers at once
 * as a rule, but now and then its core is taken for tens of microseconds (an
 * interrupt; on a virtual machine, the host), and a spin that gives up sooner
 * pays a sleep and a wake-up across cores, a hundred times the round trip.
 * A peer slower than that keeps the short spin, and no core burns for it. */
static uint64_t spin_idle_ns(struct usock *s)
{
	uint64_t idle = conn_spin_ns(dev_polls(s->dev));

	if (idle && idle < SPIN_MAX_NS && !cfg.busy_poll_given &&
	    atomic_load_explicit(&s->spin_long, memory_order_relaxed))
		idle = SPIN_MAX_NS;
	return idle;
}

/* A blocking wait that began spinning at began slept, and was woken now. */
static void spin_learn(struct usock *s, uint64_t began)
{
	atomic_store_explicit(&s->spin_long, sys_now_ns() - began < SPIN_MAX_NS,
			      memory_order_relaxed);
}

/* The spin of a blocking call, on a copy of its direction taken under the lock it
 * holds. The lock is let go for the spin: a non-blocking call or a readiness look
 * in another thread must neither wait for it nor take it for an operation under
 * way. What the copy shows ready is only a reason to look again, locked. *began
 * gets the time it began, or 0 when it did not. */
static int spin(struct usock *s, short events, uint64_t *began)
{
	int in = events == POLLIN;
	enum hold_dir d = in ? HOLD_RX : HOLD_TX;
	_Atomic uint64_t *cur = in ? &s->rx.sh->prod : &s->tx.sh->cons;
	_Atomic uint32_t *peer_cpu = in ? &s->rx.sh->prod_cpu : &s->tx.sh->cons_cpu;
	uint64_t idle = spin_idle_ns(s);
	/* A client waiting for its attach spins up to the limit: the server has
	 * its connection and attaches soon, and sleeping now would cost the answer
	 * a futex wake and a wake-up across cores. It does not know the server's
	 * core yet, so it yields between looks: a server on its own core then runs
	 * instead of waiting for the spin to end. */
	int pending = mode_of(s) == MODE_PENDING, yield = pending, closing = 0, cpu, r = 0;

	/* Sleeping waits (no budget) ask for no core either. */
	if (!idle || cfg.ncpus < 2 || (cpu = sched_getcpu()) < 0 ||
	    (!pending && (s->dev->flags & DEV_F_ONE_KERNEL) &&
	     atomic_load_explicit(peer_cpu, memory_order_relaxed) == (uint32_t)cpu))
		return 0;
	uint64_t start = sys_now_ns(), now = start, moved = start;
	uint64_t seen = atomic_load_explicit(cur, memory_order_relaxed);

	if (!spin_allowed(start))
		return 0;
	*began = start;
	uint64_t limit = idle > SPIN_MAX_NS ? idle : SPIN_MAX_NS;
	struct ring_end e = in ? s->rx : s->tx;

	op_unlock(s, d);
	for (unsigned looks = 1;; looks++) {
		/* events is one direction, so shm_ready() reads only e. */
		r = shm_ready(s, &e, &e, events) != 0;
		if (r)
			break;
		if (yield) {
			sched_yield();
		} else {
			__builtin_ia32_pause();
			/* The rest every few looks: reading the clock costs as
			 * much as a look, and a look less often sees the bytes
			 * later. */
			if (looks % SPIN_LOOKS_PER_CLOCK)
				continue;
		}
		if (pending &&
		    atomic_load_explicit(&s->seg.hdr->state, memory_order_acquire) != SEG_PENDING) {
			/* Attached: the server's answer is its next step, so the
			 * attach counts as the peer moving. The room a writer waits
			 * for grows only once the caller has seen the attach. */
			if ((r = !in))
				break;
			pending = 0;
			moved = sys_now_ns();
		}
		/* The peer is closing: its close, which follows at once, is near. */
		if (in && !closing)
			closing = (atomic_load_explicit(&s->rx.sh->prod_flags, memory_order_relaxed) &
				   RING_PF_CLOSING) != 0;
		uint64_t c = atomic_load_explicit(cur, memory_order_relaxed), prev = now;
		now = sys_now_ns();
		if (c != seen) {
			seen = c;
			moved = now;
		}
		if (slice_lost(prev, now) || now - start >= limit ||
		    (!pending && !closing && now - moved >= idle))
			break;
	}
	op_lock(s, d);
	return r;
}

int conn_busy_wait(int (*look)(void *, int deep), void *arg, int timeout_ms, int polls)
{
	uint64_t budget = conn_spin_ns(polls);

	if (!budget || timeout_ms == 0 || cfg.ncpus < 2)
		return 0;
	if (timeout_ms > 0 && budget > (uint64_t)timeout_ms * 1000000ull)
		budget = (uint64_t)timeout_ms * 1000000ull;
	uint64_t now = sys_now_ns(), end = now + budget, deep_at = now;
	int r;

	if (!spin_allowed(now))
		return 0;
	for (unsigned looks = 1;; looks++) {
		int deep = now >= deep_at;
		if ((r = look(arg, deep)))
			return r;
		if (deep) {
			/* Which peer will answer is not known here, so yield after
			 * the kernel's look: one on our own core then runs instead
			 * of waiting for our spin to end. */
			sched_yield();
			deep_at = sys_now_ns() + CONN_DEEP_LOOK_NS;
		} else {
			__builtin_ia32_pause();
			if (looks % SPIN_LOOKS_PER_CLOCK)
				continue;
		}
		uint64_t prev = now;
		if ((now = sys_now_ns()) >= end || slice_lost(prev, now))
			return 0;
	}
}

/* Sleeps until the doorbell rings, the TCP socket reports something, the link
 * group's channel speaks or hangs up, the device wants a look (its wake
 * descriptor), or the deadline passes. Returns 0 to re-check, -ETIMEDOUT or
 * -EINTR. */
int conn_wait(struct usock *s, int fd, short events, uint64_t deadline, int has_timeout)
{
	struct pollfd pf[4];
	struct lgr *g = s->seg.lgr;
	const struct dev_ops *dev = s->dev;
	int pending = mode_of(s) == MODE_PENDING;

	uint64_t dl = deadline, recheck = atomic_load_explicit(&s->recheck_ns, memory_order_relaxed);
	if (pending && (!dl || recheck < dl))
		dl = recheck;
	/* A handler that runs while we spin interrupts the call as it would
	 * have interrupted the sleep (the call's first wait began the watch). */
	if (dev->wake_soon)
		dev->wake_soon(sys_now_ns());
	uint64_t began = 0;
	if (s->connected && (events == POLLIN || events == POLLOUT) && spin(s, events, &began))
		return 0;
	if (signal_caught())
		return interrupted(has_timeout);
	if (s->connected && (events == POLLIN || events == POLLOUT) && (dev->flags & DEV_F_FUTEX)) {
		/* The attach wakes the futex like data does; what rings nothing (a
		 * decline, a plain peer) is looked for at the next recheck. */
		int r = futex_wait_one(s, fd, events, dl, has_timeout);
		if (r == 0 && began)
			spin_learn(s, began);
		return r == -ETIMEDOUT && dl != deadline ? 0 : r;
	}
	pf[0] = (struct pollfd){fd, (short)((events & POLLIN) || pending ? POLLIN | POLLRDHUP : 0), 0};
	if (!s->connected)
		pf[0].events |= POLLOUT;
	pf[1] = (struct pollfd){ctl_fd(g), (short)(pending ? POLLIN : 0), 0};
	pf[2] = (struct pollfd){s->bell, POLLIN, 0};
	pf[3] = (struct pollfd){dev->wake_fd ? dev->wake_fd() : -1, POLLIN, 0};
	conn_arm_wait_begin(s);
	conn_bell_wait_begin(s);
	if (s->connected)
		arm_bell(s, events);
	/* A handler that ran since the call began interrupts it now, as one
	 * that runs during the sleep will. */
	int caught = signal_caught();
	if (caught || shm_ready(s, &s->tx, &s->rx, events)) {
		conn_disarm(s, events);
		conn_bell_wait_end(s);
		conn_arm_wait_end(s);
		return caught ? interrupted(has_timeout) : 0;
	}
	enum hold_dir d = events & POLLIN ? HOLD_RX : HOLD_TX;
	/* A copy of the direction, taken under its lock, for the looks below. */
	struct ring_end copy = d == HOLD_RX ? s->rx : s->tx;
	int one_way = !pending && s->connected && (events == POLLIN || events == POLLOUT);
	op_unlock(s, d);
	int r, e, looked = 0;
	for (;;) {
		int ms = sys_ms_left(dl);
		struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
		r = signal_ppoll(pf, 4, ms < 0 ? NULL : &ts, NULL);
		e = errno;
		if (r != 1 || !pf[3].revents)
			break;
		/* Woken only for the device's look, which relays what rang to the
		 * descriptors we sleep on. The ring itself is looked at too (a
		 * peer in another kernel rings only when asked), on the copy: while
		 * it shows nothing, the sleep goes on without taking the direction's
		 * lock, which a readiness look in another thread would find held
		 * and count as ready. */
		dev->wake_tick();
		pf[3].revents = 0;
		looked = 1;
		if (!one_way || signal_caught() || shm_ready(s, &copy, &copy, events))
			break;
	}
	op_lock(s, d);
	conn_disarm(s, events);
	conn_bell_wait_end(s);
	conn_arm_wait_end(s);
	if (r < 0) {
		return e == EINTR ? interrupted(has_timeout) : -e;
	}
	if (r == 0)
		return deadline && sys_now_ns() >= deadline ? -ETIMEDOUT : 0;
	if (pf[3].revents) {
		dev->wake_tick();
		looked = 1;
	}
	/* Woken to look, not for this call: a handler that ran since the sleep
	 * interrupts the call as if it had come during it. */
	if (looked && signal_caught())
		return interrupted(has_timeout);
	if (pf[2].revents)
		conn_bell_clear(s, NULL);
	if (pf[0].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))
		atomic_store(&s->tcp_event, 1);
	if (!s->connected && (pf[0].revents & POLLOUT))
		check_connected(s, fd);
	if (pf[1].revents) {
		if (pending)
			lgr_client_poll(g);
		if (pf[1].revents & (POLLHUP | POLLERR))
			channel_hung_up(s);
	}
	return 0;
}
