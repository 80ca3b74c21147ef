/* Polling instead of interrupts: nothing a peer in another kernel does can wake
 * a thread of ours, so our sleeps wake by themselves. One timerfd per process
 * is in every sleep of the library (blocking calls, poll, epoll, accept) while
 * the process uses the region; when it fires, the thread that finds it looks:
 * it relays what the peers rang (ivs_bells.c), renews our lease, judges the
 * others and takes back what dead ones held (ivs_attach.c).
 *
 * The interval adapts: USMC_POLL_US after something happened (a ring relayed,
 * a wait beginning after activity), doubling at each look that finds nothing,
 * up to USMC_POLL_MAX_US. A sleeping connection is woken within that bound, and
 * an idle process costs one wake-up per bound, however many connections it has
 * (a look reads one queue per link group, never every connection). Busy-polling
 * before a sleep (USMC_BUSY_POLL_US) is what keeps a busy connection fast.
 *
 * Where peers interrupt us (ivs_doorbell.c), what sleeps watch is an epoll set
 * of the timer, our vector and the server's socket: an interrupt is a look at
 * once. While every live peer of the region can ring us, and nothing waits to
 * be seen by looking again, the timer fires only a tenth of a lease apart (the
 * lease itself is the keeper thread's, ivs_attach.c), for what a lost interrupt
 * would leave unseen: an idle process wakes a few times a second. A peer that
 * cannot ring (one that polls, a guest with ivshmem-plain) puts the timer back
 * to its usual rates. */
#include "ivs.h"

#include <errno.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "../core/config.h"
#include "../core/lgr.h"
#include "../core/sys.h"

static struct {
	int fd;                       /* what sleeps watch: the timer, or the epoll set */
	int timer;
	int irq;                      /* interrupts are in the set */
	/* Every peer rings us: the timer only backs the interrupts up. Written
	 * under ivs.lock, read by waits without it. */
	_Atomic int slow;
	uint64_t interval_ns;
	_Atomic uint64_t due_ns;      /* when it fires next */
	_Atomic uint64_t looked_ns;   /* when a tick last ran */
} p = {.fd = -1, .timer = -1};

/* The longest the timer waits: up to USMC_POLL_MAX_US while polling, a tenth of
 * the lease while interrupts cover every peer. */
static uint64_t bound_ns(void)
{
	uint64_t max = (uint64_t)cfg.poll_max_us * 1000ull, lease = ivs.r.h.lease_ms * 1000000ull;
	int slow = atomic_load_explicit(&p.slow, memory_order_relaxed);

	return slow && lease / 10 > max ? lease / 10 : max;
}

/* Arms the timer to fire ns from now, and every ns after that: a look that
 * keeps the interval (an idle process's, at the bound) need not arm it again.
 * Under ivs.lock. */
static void arm(uint64_t ns)
{
	struct timespec t = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	struct itimerspec its = {.it_interval = t, .it_value = t};

	atomic_store(&p.due_ns, sys_now_ns() + ns);
	timerfd_settime(p.timer, 0, &its, NULL);
}

/* The epoll set of the timer and what interrupts us, as p.fd; 0 without
 * interrupts (the timer alone is p.fd). */
static int with_interrupts(void)
{
	int fds[3] = {p.timer, -1, -1};

	if (!ivs_doorbell_fds(fds + 1))
		return 0;
	int ep = real.epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < 3 && ep >= 0; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
		if (fds[i] >= 0 && real.epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) < 0) {
			real.close(ep);
			ep = -1;
		}
	}
	if (ep < 0)
		return 0;
	p.fd = sys_fd_high(ep);
	return 1;
}

int poller_fd(void)
{
	if (p.fd >= 0)
		return p.fd;
	pthread_mutex_lock(&ivs.lock);
	if (p.fd < 0) {
		int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (fd >= 0) {
			p.fd = p.timer = sys_fd_high(fd);
			p.irq = with_interrupts();
			p.interval_ns = (uint64_t)cfg.poll_us * 1000ull;
			arm(p.interval_ns);
		}
	}
	pthread_mutex_unlock(&ivs.lock);
	return p.fd;
}

int poller_fd_if_used(void)
{
	return p.fd;
}

/* The look itself. Under ivs.lock. */
static void look(uint64_t now)
{
	uint64_t min = (uint64_t)cfg.poll_us * 1000ull, max = (uint64_t)cfg.poll_max_us * 1000ull;
	int polled;

	atomic_store(&p.looked_ns, now);
	ivs_keep(now);
	int rung = ivs_bells_relay(&polled);
	int slow = p.irq && !polled && ivs_doorbell_covers();
	atomic_store_explicit(&p.slow, slow, memory_order_relaxed);
	uint64_t next = slow ? bound_ns() : rung ? min : p.interval_ns * 2 > max ? max : p.interval_ns * 2;
	if (next != p.interval_ns) {
		p.interval_ns = next;
		arm(next);
	} else {
		atomic_store(&p.due_ns, now + next);
	}
}

void poller_tick(void)
{
	uint64_t n;

	if (p.fd < 0)
		return;
	pthread_mutex_lock(&ivs.lock);
	/* Another thread that woke with us may have looked already. An
	 * interrupt is read before the look, so that one coming during it
	 * wakes us again. */
	int heard = p.irq && ivs_doorbell_heard();
	if (real.read(p.timer, &n, sizeof(n)) == (ssize_t)sizeof(n) || heard ||
	    sys_now_ns() >= atomic_load(&p.due_ns))
		look(sys_now_ns());
	pthread_mutex_unlock(&ivs.lock);
	/* Channels whose client left hang up for the server there. */
	lgr_server_look();
}

int poller_polls(void)
{
	return !atomic_load_explicit(&p.slow, memory_order_relaxed);
}

void poller_soon(uint64_t began)
{
	uint64_t now = sys_now_ns(), min = (uint64_t)cfg.poll_us * 1000ull;
	uint64_t looked = atomic_load_explicit(&p.looked_ns, memory_order_relaxed);
	uint64_t since = began > looked ? began - looked : 0;

	/* A wait that begins right after a look is a loop going back to sleep
	 * (nothing happened): the interval keeps growing. One that begins later
	 * comes after the program did something (sent a request): the answer is
	 * looked for soon. When it began counts, not when it is about to sleep:
	 * its spin (busy-polling) is no sign of anything happening. */
	if (p.fd < 0 || since <= min)
		return;
	/* A process busy enough never to sleep still renews its lease and relays
	 * rings: it looks when a look is overdue. Where interrupts cover every
	 * peer, that is all: the answer rings. */
	int overdue = since > bound_ns();
	if (atomic_load_explicit(&p.slow, memory_order_relaxed) && !overdue)
		return;
	if (!overdue && atomic_load_explicit(&p.due_ns, memory_order_relaxed) <= now + min)
		return;
	pthread_mutex_lock(&ivs.lock);
	if (overdue)
		look(now);
	if (p.interval_ns > min || atomic_load(&p.due_ns) > now + min) {
		p.interval_ns = min;
		arm(min);
	}
	pthread_mutex_unlock(&ivs.lock);
}

/* A process may use the device for longer than a lease without a single wait in
 * the library (a thousand connections made, or accepted by an epoll loop that
 * always finds something ready): it would never hear the timer, and never see
 * poller_soon, and its peers would judge it dead. What it does through the
 * device looks when a look is overdue instead. */
void poller_busy(void)
{
	uint64_t now, max = bound_ns();

	if (p.fd < 0)
		return;
	now = sys_now_ns();
	if (now - atomic_load_explicit(&p.looked_ns, memory_order_relaxed) <= max ||
	    pthread_mutex_trylock(&ivs.lock))
		return;
	if (now - atomic_load(&p.looked_ns) > max)
		look(now);
	pthread_mutex_unlock(&ivs.lock);
}

void poller_forget(int fd)
{
	if (p.irq)
		real.epoll_ctl(p.fd, EPOLL_CTL_DEL, fd, NULL);
}

void poller_atfork_child(void)
{
	/* The timer is the parent's: reading it would take the parent's looks.
	 * The child, which holds what the parent held, gets its own, made before
	 * the parent's copy goes so that its number is another: epoll sets made
	 * before the fork, which hold the parent's, tell by the number that they
	 * must watch the child's too. */
	int parents = p.fd, timer = p.timer;
	if (parents < 0)
		return;
	p.fd = p.timer = -1;
	p.slow = 0;
	poller_fd();
	real.close(parents);
	if (timer != parents)
		real.close(timer);
}
