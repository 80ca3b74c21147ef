#include "registry.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../dev/dev.h"
#include "addr.h"
#include "config.h"
#include "regentry.h"
#include "sys.h"

#define NPORTS 65536
#define TARGET_MAX 4000
/* The ports file: NPORTS 16-bit registration counters, then NPORTS process ids,
 * the one process that accepts on each port (or ACCEPTORS_MANY), then for each
 * port the processes that claimed it, ACCEPTOR_SLOTS of them: what tells, once
 * the others are gone, that one is left; then for each port the second (of the
 * monotonic clock) until which its acceptors do not hand proposals to each
 * other. Last, a change counter per port, bumped after every change of the
 * port's entry (l-<port>): a client keeps what it read of an entry for as long as
 * the counter stands still, and connects without reading the link again. Then a
 * count per port of the proposals clients made (registry_proposing()), and one
 * of those settled (registry_settled()). The file is sparse: only the ports in
 * use take memory. */
#define ACCEPTOR_SLOTS 8
#define PORTS_BYTES \
	(NPORTS * 2 + NPORTS * 4 + NPORTS * 4 * ACCEPTOR_SLOTS + NPORTS * 4 + NPORTS * 4 + NPORTS * 4 + \
	 NPORTS * 4)
/* How long a port whose acceptors failed to hand a proposal over stays on TCP. */
#define HANDOFF_BACKOFF_S 30

static _Atomic uint16_t *_Atomic ports;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long my_netns;

static _Atomic uint16_t *ports_map(void)
{
	_Atomic uint16_t *p = atomic_load_explicit(&ports, memory_order_acquire);
	char path[4200];
	struct stat st;

	if (p)
		return p;
	pthread_mutex_lock(&reg_lock);
	p = atomic_load(&ports);
	if (!p) {
		if (stat("/proc/self/ns/net", &st) == 0)
			my_netns = (unsigned long)st.st_ino;
		snprintf(path, sizeof(path), "%s/ports", cfg.rundir);
		int fd = config_rundir_ready() < 0
				 ? -1
				 : real.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0) {
			if (fstat(fd, &st) == 0 && st.st_size < (off_t)PORTS_BYTES &&
			    ftruncate(fd, PORTS_BYTES) < 0)
				st.st_size = -1;
			void *m = mmap(NULL, PORTS_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (m != MAP_FAILED && st.st_size >= 0)
				p = m;
			real.close(fd);
		}
		atomic_store_explicit(&ports, p, memory_order_release);
	}
	pthread_mutex_unlock(&reg_lock);
	return p;
}

/* An acceptor slot saying that several processes accept on the port. */
#define ACCEPTORS_MANY UINT32_MAX

static _Atomic uint32_t *acceptor_of(_Atomic uint16_t *p, unsigned port)
{
	return (_Atomic uint32_t *)(void *)(p + NPORTS) + port;
}

static _Atomic uint32_t *claimants_of(_Atomic uint16_t *p, unsigned port)
{
	return (_Atomic uint32_t *)(void *)(p + NPORTS) + NPORTS + (size_t)port * ACCEPTOR_SLOTS;
}

static _Atomic uint32_t *no_handoff_until(_Atomic uint16_t *p, unsigned port)
{
	return claimants_of(p, NPORTS) + port;
}

static _Atomic uint32_t *changes_of(_Atomic uint16_t *p, unsigned port)
{
	return no_handoff_until(p, NPORTS) + port;
}

static _Atomic uint32_t *proposals_of(_Atomic uint16_t *p, unsigned port)
{
	return changes_of(p, NPORTS) + port;
}

static _Atomic uint32_t *settled_of(_Atomic uint16_t *p, unsigned port)
{
	return proposals_of(p, NPORTS) + port;
}

/* Whoever changed the port's entry says so, after the change. */
static void entry_changed(unsigned port)
{
	_Atomic uint16_t *p = ports_map();

	if (p)
		atomic_fetch_add_explicit(changes_of(p, port), 1, memory_order_release);
}

static uint32_t now_s(void)
{
	return (uint32_t)(sys_now_ns() / 1000000000ull);
}

void registry_handoff_failed(unsigned port)
{
	_Atomic uint16_t *p = ports_map();

	if (p && port < NPORTS)
		atomic_store(no_handoff_until(p, port), now_s() + HANDOFF_BACKOFF_S);
}

int registry_handoff_ok(unsigned port)
{
	_Atomic uint16_t *p = ports_map();

	return p && port < NPORTS &&
	       (int32_t)(now_s() - atomic_load_explicit(no_handoff_until(p, port),
							  memory_order_relaxed)) >= 0;
}

static void link_path(char *buf, size_t len, unsigned port)
{
	snprintf(buf, len, "%s/l-%u", cfg.rundir, port);
}

/* Appends every address the listener accepts on: its own, or, when it is bound to
 * the wildcard, every address of its network namespace. */
static void addr_list(const struct sockaddr *bound, int v6only, char *out, size_t len)
{
	struct addr a[ADDR_LOCAL_MAX];
	uint8_t prefix[ADDR_LOCAL_MAX];
	int n = addr_local_list(bound, v6only, a, prefix, ADDR_LOCAL_MAX);
	size_t used = 0;

	out[0] = 0;
	for (int i = 0; i < n; i++) {
		char s[64];
		addr_format(&a[i], s, sizeof(s));
		if (prefix[i] == 8)
			snprintf(s, sizeof(s), "127.0.0.0/8");
		size_t l = strlen(s);
		if (used + l + 2 >= len)
			break;
		if (used)
			out[used++] = ',';
		memcpy(out + used, s, l + 1);
		used += l;
	}
}

/* Whether a control socket still has a process behind it; a dead one's file is
 * removed on the way, so a killed listener leaves nothing behind for long. Only a
 * refusal or a missing socket says it is dead: running out of descriptors
 * ourselves, or a full backlog, says nothing about the listener. */
static int listener_alive(const char *path)
{
	int fd = dev_lo.ctl_connect(path);

	if (fd >= 0) {
		real.close(fd);
		return 1;
	}
	if (fd == -ECONNREFUSED)
		unlink(path);
	return fd != -ECONNREFUSED && fd != -ENOENT;
}

/* What this process last read of a port's entry, with the port's change counter
 * before the read. Ports are few per process: one entry per bucket. */
enum cached_kind { CACHED_ABSENT, CACHED_MALFORMED, CACHED_AMBIGUOUS, CACHED_ENTRY };
struct cached {
	int valid;
	unsigned port;
	uint32_t changes;
	enum cached_kind kind;
	struct regentry e;
	char path[4200]; /* the control socket's path, "" when too long */
	/* The last destination judged against e, and its verdict: a client connects
	 * to the same address again and again, and parsing e's list each time cost
	 * as much as a system call. */
	int judged;
	struct addr judged_dst;
	enum reg_verdict verdict;
};
#define NCACHED 8
static struct cached cache[NCACHED];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

void registry_atfork_child(void)
{
	pthread_mutex_init(&cache_lock, NULL);
}

/* Reads the port's entry into c. */
static void cache_fill(struct cached *c, unsigned port, uint32_t changes)
{
	char lp[4200], t[TARGET_MAX];

	link_path(lp, sizeof(lp), port);
	ssize_t n = readlink(lp, t, sizeof(t) - 1);
	c->kind = CACHED_ABSENT;
	if (n > 0) {
		t[n] = 0;
		if (t[0] == '!')
			c->kind = CACHED_AMBIGUOUS;
		else
			c->kind = regentry_parse(t, &c->e) == 0 ? CACHED_ENTRY : CACHED_MALFORMED;
	}
	if (c->kind != CACHED_ENTRY ||
	    (unsigned)snprintf(c->path, sizeof(c->path), "%s/%s", cfg.rundir, c->e.name) >=
		    sizeof(c->path))
		c->path[0] = 0;
	c->judged = 0;
	c->port = port;
	c->changes = changes;
	c->valid = 1;
}

static enum reg_verdict cached_verdict(struct cached *c, const struct addr *dst)
{
	if (!c->judged || !addr_equal(&c->judged_dst, dst)) {
		c->verdict = regentry_verdict(&c->e, dst, my_netns);
		c->judged_dst = *dst;
		c->judged = 1;
	}
	return c->verdict;
}

/* The port's entry as it is now, under cache_lock (the caller unlocks). */
static struct cached *cache_current(_Atomic uint16_t *p, unsigned port)
{
	/* Loaded before the link is read: a change after it leaves the counter moved. */
	uint32_t changes = atomic_load_explicit(changes_of(p, port), memory_order_acquire);
	struct cached *c = &cache[port % NCACHED];

	pthread_mutex_lock(&cache_lock);
	if (!c->valid || c->port != port || c->changes != changes)
		cache_fill(c, port, changes);
	return c;
}

int registry_still(const struct sockaddr *dst, const char *path)
{
	_Atomic uint16_t *p = ports_map();
	const char *name = strrchr(path, '/');

	if (!p)
		return 0;
	struct cached *c = cache_current(p, addr_port(dst));
	int same = c->kind == CACHED_ENTRY && !strcmp(c->e.name, name ? name + 1 : path);
	pthread_mutex_unlock(&cache_lock);
	return same;
}

void registry_forget(const struct sockaddr *dst, const char *path)
{
	char lp[4200], t[TARGET_MAX];
	const char *name = strrchr(path, '/');
	size_t nl;

	/* Read afresh, not from the cache: what is removed must be what failed. */
	name = name ? name + 1 : path;
	nl = strlen(name);
	link_path(lp, sizeof(lp), addr_port(dst));
	ssize_t n = readlink(lp, t, sizeof(t) - 1);
	if (n > (ssize_t)nl && !memcmp(t, name, nl) && t[nl] == ' ' && !listener_alive(path) &&
	    unlink(lp) == 0)
		entry_changed(addr_port(dst));
}

int registry_add(const struct sockaddr *bound, int v6only, const char *ctl_name)
{
	_Atomic uint16_t *p = ports_map();
	char path[4200], tmp[4300], target[TARGET_MAX], addrs[TARGET_MAX - 300], old[TARGET_MAX];
	unsigned port = addr_port(bound);
	ssize_t n;

	if (!p)
		return -1;
	addr_list(bound, v6only, addrs, sizeof(addrs));
	link_path(path, sizeof(path), port);
	n = readlink(path, old, sizeof(old) - 1);
	if (n > 0) {
		old[n] = 0;
		char *sp = strchr(old, ' ');
		size_t nl = strlen(ctl_name);
		if (sp && (size_t)(sp - old) == nl && !memcmp(old, ctl_name, nl)) {
			/* Our own second listener on the port (IPv4 beside IPv6): merge. */
			char *al = strchr(sp + 1, ' ');
			if (al && strlen(al + 1) + strlen(addrs) + 2 < sizeof(addrs)) {
				char merged[sizeof(addrs)];
				snprintf(merged, sizeof(merged), "%s,%s", al + 1, addrs);
				memcpy(addrs, merged, sizeof(addrs));
			}
		} else if (old[0] != '!') {
			struct regentry oe;
			char other[4200];
			/* A live listener elsewhere on this port: clients cannot tell which
			 * of us the kernel will pick, so nobody gets accelerated. A dead
			 * one's entry, or one that names no control socket, is simply
			 * taken over. */
			if (regentry_parse(old, &oe) == 0) {
				snprintf(other, sizeof(other), "%s/%s", cfg.rundir, oe.name);
				if (listener_alive(other))
					snprintf(addrs, sizeof(addrs), "!");
			}
		}
	}
	if (addrs[0] == '!')
		snprintf(target, sizeof(target), "!ambiguous");
	else
		snprintf(target, sizeof(target), "%s %lu %s", ctl_name, my_netns, addrs);
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	unlink(tmp);
	if (symlink(target, tmp) < 0 || rename(tmp, path) < 0) {
		unlink(tmp);
		return -1;
	}
	entry_changed(port);
	atomic_store(acceptor_of(p, port), 0);
	for (int i = 0; i < ACCEPTOR_SLOTS; i++)
		atomic_store(&claimants_of(p, port)[i], 0);
	atomic_fetch_add(&p[port], 1);
	return 0;
}

static int alive(uint32_t pid)
{
	return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

/* Notes me among the port's claimants, freeing the slots of processes that
 * exited; returns how many others are alive. Full of live others: at least one. */
static unsigned claimants_note(_Atomic uint32_t *c, uint32_t me)
{
	unsigned others = 0;
	int noted = 0;

	for (int i = 0; i < ACCEPTOR_SLOTS; i++) {
		uint32_t v = atomic_load(&c[i]);
		if (v == me)
			noted = 1;
		else if (v && !alive(v))
			atomic_compare_exchange_strong(&c[i], &v, 0);
		else if (v)
			others++;
	}
	for (int i = 0; i < ACCEPTOR_SLOTS && !noted; i++) {
		uint32_t free_slot = 0;
		noted = atomic_compare_exchange_strong(&c[i], &free_slot, me);
	}
	return others + !noted;
}

int registry_claim_acceptor(const struct sockaddr *bound)
{
	_Atomic uint16_t *p = ports_map();
	uint32_t me = (uint32_t)getpid();

	if (!p)
		return -1;
	unsigned port = addr_port(bound);
	_Atomic uint32_t *a = acceptor_of(p, port), *c = claimants_of(p, port);
	/* Two live processes take connections from one listening socket (prefork
	 * workers, or a worker and the one replacing it at a reload). A proposal
	 * reaches the one process holding its client's control channel while the
	 * kernel hands the connection to either: an acceptor without the proposal
	 * asks the others (handoff.h), and a client still waiting after that
	 * gives up sooner. The mark lives in the mapped file, so workers that
	 * dropped privileges can set it, and it goes when one claimant is left.
	 * Each writes its pid, then counts the others: of two arriving together,
	 * one at least sees the other. */
	if (claimants_note(c, me)) {
		atomic_store(a, ACCEPTORS_MANY);
		return -1;
	}
	atomic_store(a, me);
	if (claimants_note(c, me)) {
		atomic_store(a, ACCEPTORS_MANY);
		return -1;
	}
	return 0;
}

int registry_claimants(unsigned port, pid_t *pids, int max)
{
	_Atomic uint16_t *p = ports_map();
	int n = 0;

	if (!p || port >= NPORTS)
		return 0;
	_Atomic uint32_t *c = claimants_of(p, port);
	for (int i = 0; i < ACCEPTOR_SLOTS && n < max; i++) {
		uint32_t v = atomic_load(&c[i]);
		/* The file is everyone's: a pid is a pid, not a pointer into us. */
		if (v && v <= (uint32_t)INT32_MAX)
			pids[n++] = (pid_t)v;
	}
	return n;
}

/* Counted exactly: an acceptor takes a connection for plain when the two counts
 * are equal, which a lost count could make them while a client waits. */
void registry_proposing(const struct sockaddr *dst)
{
	_Atomic uint16_t *p = ports_map();

	if (p)
		atomic_fetch_add_explicit(proposals_of(p, addr_port(dst)), 1, memory_order_release);
}

void registry_settled(const struct sockaddr *dst)
{
	_Atomic uint16_t *p = ports_map();

	if (p)
		atomic_fetch_add_explicit(settled_of(p, addr_port(dst)), 1, memory_order_release);
}

int registry_unsettled(unsigned port)
{
	_Atomic uint16_t *p = ports_map();

	return !p || port >= NPORTS ||
	       atomic_load_explicit(proposals_of(p, port), memory_order_acquire) !=
		       atomic_load_explicit(settled_of(p, port), memory_order_acquire);
}

void registry_settle_all(unsigned port, uint32_t proposals)
{
	_Atomic uint16_t *p = ports_map();

	if (!p || port >= NPORTS)
		return;
	uint32_t was = atomic_load(settled_of(p, port));
	/* Settled as far as the count the caller saw stand still: a proposal
	 * made since leaves the counts apart, as it should. */
	if (atomic_load(proposals_of(p, port)) == proposals)
		atomic_compare_exchange_strong(settled_of(p, port), &was, proposals);
}

uint32_t registry_proposals(unsigned port)
{
	_Atomic uint16_t *p = ports_map();

	return p && port < NPORTS ? atomic_load_explicit(proposals_of(p, port), memory_order_relaxed)
				  : 0;
}

int registry_port_shared(const struct sockaddr *bound)
{
	_Atomic uint16_t *p = ports_map();

	return p && atomic_load_explicit(acceptor_of(p, addr_port(bound)), memory_order_relaxed) ==
			    ACCEPTORS_MANY;
}

void registry_remove(const struct sockaddr *bound, const char *ctl_name)
{
	_Atomic uint16_t *p = ports_map();
	char path[4200], old[TARGET_MAX];
	unsigned port = addr_port(bound);
	size_t nl = strlen(ctl_name);

	if (!p)
		return;
	link_path(path, sizeof(path), port);
	ssize_t n = readlink(path, old, sizeof(old) - 1);
	if (n > (ssize_t)nl && !memcmp(old, ctl_name, nl) && old[nl] == ' ' && unlink(path) == 0)
		entry_changed(port);
	uint16_t c = atomic_load(&p[port]);
	while (c && !atomic_compare_exchange_weak(&p[port], &c, (uint16_t)(c - 1)))
		;
}

int registry_lookup(const struct sockaddr *dst, char *path, unsigned len, enum decline *why)
{
	_Atomic uint16_t *p = ports_map();
	unsigned port = addr_port(dst);
	struct addr d;
	int r = -1;

	*why = DECL_PEER_NO_USMC;
	if (!p || !atomic_load_explicit(&p[port], memory_order_relaxed))
		return -1;
	addr_from_sockaddr(&d, dst);
	addr_reached(&d);
	struct cached *c = cache_current(p, port);
	/* Several processes accepting on one socket share its control socket and
	 * hand proposals to each other (handoff.h), unless that failed lately;
	 * separate sockets on one port (SO_REUSEPORT) are told apart by nobody. */
	if (c->kind == CACHED_AMBIGUOUS ||
	    (c->kind != CACHED_ABSENT && registry_port_shared(dst) && !registry_handoff_ok(port)))
		*why = DECL_AMBIGUOUS;
	else if (c->kind == CACHED_ENTRY && c->path[0] && cached_verdict(c, &d) == REG_OK) {
		size_t n = strlen(c->path);
		if (n < len) {
			memcpy(path, c->path, n + 1);
			r = 0;
		}
	}
	pthread_mutex_unlock(&cache_lock);
	return r;
}
