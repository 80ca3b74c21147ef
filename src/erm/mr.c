/* Registering memory on a connection, and the rule that keeps a peer's command
 * off memory that is no longer registered.
 *
 * A region is one of two kinds. Memory from usmc_erm_alloc() (mem.c) is
 * shared: its memfd goes to the peer once per connection, and the peer copies
 * into it and out of it itself. Any other memory stays the application's own,
 * registered by address: the peer reaches it through the kernel
 * (process_vm_writev(), process_vm_readv()), so nothing is mapped or pinned
 * and nothing can go stale when the memory is freed and mapped again; the
 * registration checks that it is mapped with the rights asked for, and, for a
 * remote right, that the kernel will let the peer's process reach ours.
 *
 * A region with a remote right is announced in our area's slot for its memid
 * (wire.h), the remote MR table the peer reads: its fields first, then its
 * state, valid with a new generation, so that a peer that sees the state sees
 * the fields, and stream bytes written after the registration reach the peer
 * after it. The in-flight rule: a peer about to copy names the region's memid
 * and generation in our area's inflight word, then looks at the state again;
 * deregistering makes the state invalid, then waits for the word to name
 * something else. With full fences on both sides one of them sees the other: a
 * peer's command either fails, or runs to its end before deregistration
 * returns. A peer that stays in flight longer than ERM_REVOKE_NS (stopped, or
 * hostile) makes deregistration fail with EBUSY, the region still revoked; one
 * whose process ended is not waited for. */
#include "erm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "../core/lgr.h"
#include "../core/sys.h"

#define ERM_REVOKE_NS 2000000000ull
#define REVOKE_LOOK_NS 20000

#define REMOTE_RIGHTS (SMC_ACCESS_REMOTE_READ | SMC_ACCESS_REMOTE_WRITE)
#define ALL_RIGHTS (SMC_ACCESS_LOCAL_WRITE | REMOTE_RIGHTS)

/* Whether [addr, addr + len) is mapped readable, and writable when asked, as
 * /proc/self/maps says line by line (its lines are sorted by address; the
 * longest holds a path of PATH_MAX bytes after its fields). */
static int vm_mapped(uintptr_t addr, uint64_t len, int writable)
{
	char buf[8192];
	size_t have = 0;
	uintptr_t cur = addr, end = addr + len;
	int fd = real.open("/proc/self/maps", O_RDONLY | O_CLOEXEC), ok = 0;

	if (fd < 0)
		return 0;
	for (;;) {
		ssize_t r = real.read(fd, buf + have, sizeof(buf) - 1 - have);
		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = 0;
		char *line = buf, *nl;
		while ((nl = strchr(line, '\n'))) {
			unsigned long lo, hi;
			char perms[5];
			*nl = 0;
			if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && hi > cur) {
				if (lo > cur || perms[0] != 'r' || (writable && perms[1] != 'w'))
					goto out;
				cur = hi;
				if (cur >= end) {
					ok = 1;
					goto out;
				}
			}
			line = nl + 1;
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
	}
out:
	real.close(fd);
	return ok;
}

/* Whether the kernel will let the peer's process reach ours with
 * process_vm_readv() and process_vm_writev() (ptrace's access mode): the same
 * user and group, and we dumpable, or a peer running as root; and Yama's
 * ptrace_scope, where it is built in, 0, or 1 with the peer our ancestor. A
 * seccomp filter or an LSM may still refuse; the command then fails. */
static int vm_reachable(struct erm_conn *e)
{
	struct ucred cr;
	char buf[16];
	int scope = sys_read_file("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof(buf)) > 0
			    ? atoi(buf)
			    : 0;
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (lgr_peer_cred(e->lgr, &cr) < 0 || scope >= 3)
		return 0;
	if (cr.uid == 0)
		return 1;
	if (scope == 2 || prctl(PR_GET_DUMPABLE) != 1 || getresuid(&ru, &eu, &su) < 0 ||
	    getresgid(&rg, &eg, &sg) < 0)
		return 0;
	if (ru != cr.uid || eu != cr.uid || su != cr.uid || rg != cr.gid || eg != cr.gid ||
	    sg != cr.gid)
		return 0;
	return scope == 0 || sys_descends(sys_pid(), cr.pid);
}

/* Region memid, or NULL. Called with e->lock held. */
static struct erm_mr *mr_of(const struct erm_conn *e, int32_t memid)
{
	if (memid < 0 || (uint32_t)memid >= e->nmrs || !e->mrs[memid].kind)
		return NULL;
	return &e->mrs[memid];
}

const struct erm_mr *erm_mr(const struct erm_conn *e, int32_t memid)
{
	return mr_of(e, memid);
}

/* A free memid, the lowest, growing the table; -1 if all ERM_MRS are taken. */
static int memid_new(struct erm_conn *e)
{
	for (uint32_t i = 0; i < e->nmrs; i++)
		if (!e->mrs[i].kind)
			return (int)i;
	if (e->nmrs == ERM_MRS)
		return -1;
	uint32_t n = e->nmrs ? 2 * e->nmrs : 16;
	if (n > ERM_MRS)
		n = ERM_MRS;
	struct erm_mr *t = realloc(e->mrs, n * sizeof(*t));
	if (!t)
		return -1;
	memset(t + e->nmrs, 0, (n - e->nmrs) * sizeof(*t));
	e->mrs = t;
	int id = (int)e->nmrs;
	e->nmrs = n;
	return id;
}

static void announce(struct erm_conn *e, int memid, const struct erm_mr *mr)
{
	struct erm_slot *sl = &e->area->slot[memid];

	atomic_store_explicit(&sl->access, mr->access & REMOTE_RIGHTS, memory_order_relaxed);
	atomic_store_explicit(&sl->kind, (uint32_t)mr->kind, memory_order_relaxed);
	atomic_store_explicit(&sl->fd_index, mr->kind == ERM_MEM_SHM ? mr->fd_index : 0,
			      memory_order_relaxed);
	atomic_store_explicit(&sl->base,
			      mr->kind == ERM_MEM_SHM ? (uint64_t)(mr->addr - mr->alloc->base)
						      : (uint64_t)(uintptr_t)mr->addr,
			      memory_order_relaxed);
	atomic_store_explicit(&sl->len, mr->len, memory_order_relaxed);
	atomic_store_explicit(&sl->state, erm_state(mr->gen, 1), memory_order_release);
	if (atomic_load_explicit(&e->area->mrs_used, memory_order_relaxed) <= (uint32_t)memid)
		atomic_store_explicit(&e->area->mrs_used, (uint32_t)memid + 1, memory_order_relaxed);
}

int erm_reg(struct usock *s, int fd, void *addr, uint64_t len, uint32_t access)
{
	uintptr_t a = (uintptr_t)addr;

	if (!addr || !len || len > ERM_REGION_MAX || a + len < a || (access & ~ALL_RIGHTS))
		return -EINVAL;
	struct erm_conn *e = erm_get(s, fd);
	if (!e)
		return -errno;
	int remote = (access & REMOTE_RIGHTS) != 0;
	struct erm_alloc *alloc = erm_alloc_find(addr, len);
	if (!alloc) {
		if (!vm_mapped(a, len, (access & (SMC_ACCESS_LOCAL_WRITE | SMC_ACCESS_REMOTE_WRITE)) != 0))
			return -EFAULT;
		if (remote && !vm_reachable(e))
			return -EPERM;
	}
	pthread_mutex_lock(&e->lock);
	int r = atomic_load(&e->dead) ? -EOPNOTSUPP : remote ? erm_area_open(e) : 0;
	int memid = r ? -1 : memid_new(e);
	uint32_t fd_index = 0;
	if (!r && memid < 0)
		r = -ENOSPC;
	if (!r && remote && alloc)
		r = erm_area_share(e, alloc, &fd_index);
	if (r) {
		pthread_mutex_unlock(&e->lock);
		if (alloc)
			erm_alloc_put(alloc);
		return r;
	}
	struct erm_mr *mr = &e->mrs[memid];
	*mr = (struct erm_mr){addr, len, access, mr->gen + 1, alloc ? ERM_MEM_SHM : ERM_MEM_VM,
			      alloc, fd_index};
	if (remote)
		announce(e, memid, mr);
	pthread_mutex_unlock(&e->lock);
	return memid;
}

/* Takes region memid out of the peer's sight and waits for the command the peer
 * has in flight on it, if any. -EBUSY when that one does not end in time.
 * Called with e->lock held. */
static int revoke_mr(struct erm_conn *e, int memid, const struct erm_mr *mr)
{
	uint64_t busy = erm_inflight((uint32_t)memid, mr->gen), until = 0;

	atomic_store(&e->area->slot[memid].state, erm_state(mr->gen, 0));
	while (atomic_load(&e->area->inflight) == busy) {
		uint64_t now = sys_now_ns();
		if (!until)
			until = now + ERM_REVOKE_NS;
		if (now >= until)
			return -EBUSY;
		/* A process that ended copies nothing any more. */
		if (conn_ext_peer_ended(e->s, 1))
			break;
		nanosleep(&(struct timespec){0, REVOKE_LOOK_NS}, NULL);
	}
	return 0;
}

static void mr_free(struct erm_mr *mr)
{
	if (mr->alloc)
		erm_alloc_put(mr->alloc);
	mr->alloc = NULL;
	mr->kind = 0;
}

int erm_dereg(struct usock *s, int fd, int memid)
{
	struct erm_conn *e = erm_get(s, fd);

	if (!e)
		return -errno;
	pthread_mutex_lock(&e->lock);
	struct erm_mr *mr = mr_of(e, memid);
	int r = atomic_load(&e->dead) ? -EOPNOTSUPP : !mr ? -EINVAL : 0;
	if (!r && (mr->access & REMOTE_RIGHTS))
		r = revoke_mr(e, memid, mr);
	if (!r)
		mr_free(mr);
	pthread_mutex_unlock(&e->lock);
	return r;
}

void erm_mr_revoke_all(struct erm_conn *e)
{
	if (e->area) {
		atomic_store(&e->area->closed, 1);
		for (uint32_t i = 0; i < e->nmrs; i++)
			if (e->mrs[i].kind && (e->mrs[i].access & REMOTE_RIGHTS))
				atomic_store(&e->area->slot[i].state, erm_state(e->mrs[i].gen, 0));
		uint64_t until = sys_now_ns() + ERM_REVOKE_NS;
		while (atomic_load(&e->area->inflight) && sys_now_ns() < until &&
		       !conn_ext_peer_ended(e->s, 1))
			nanosleep(&(struct timespec){0, REVOKE_LOOK_NS}, NULL);
	}
	for (uint32_t i = 0; i < e->nmrs; i++)
		if (e->mrs[i].kind)
			mr_free(&e->mrs[i]);
}

int erm_peer_mrs(struct usock *s, int fd, struct smc_erm_peer_mr *out, int max)
{
	struct erm_conn *e = erm_get(s, fd);
	int n = 0;

	if (!e)
		return -errno;
	pthread_mutex_lock(&e->lock);
	struct erm_area *pa = atomic_load(&e->dead) ? NULL : erm_peer_area(e);
	uint32_t used = pa ? atomic_load_explicit(&pa->mrs_used, memory_order_relaxed) : 0;
	for (uint32_t k = 0; k < used && k < ERM_MRS; k++) {
		struct erm_rslot rs;
		uint32_t st = atomic_load_explicit(&pa->slot[k].state, memory_order_acquire);
		if (!(st & 1) || erm_slot_read(&pa->slot[k], &rs) < 0 || rs.state != st)
			continue;
		if (n < max)
			out[n] = (struct smc_erm_peer_mr){(int32_t)k, rs.access, rs.len};
		n++;
	}
	pthread_mutex_unlock(&e->lock);
	return n;
}
