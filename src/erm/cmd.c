/* Running commands: a write copies a region of ours into one of the peer's, a
 * read one of the peer's into one of ours, once, by this process: memcpy()
 * when the peer's region is memory it shared with us, the kernel's
 * process_vm_writev() or process_vm_readv() when it is the peer's own.
 *
 * Commands run under the connection's writer's hold, so a command comes after
 * the bytes written to the stream before it and before those written after,
 * and those of one connection run one at a time, in order: their completions
 * come in command order. What the peer announced is read into private copies
 * and checked before anything is touched (wire.h), so a forged or stale memid,
 * length, right or offset fails that command alone. */
#include "erm.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "../core/stats.h"
#include "../core/sys.h"

/* A writer that finds the peer's event ring full waits, spinning this long
 * before it sleeps between looks. */
#define ROOM_SPIN_NS 50000ull
#define ROOM_LOOK_NS 20000

#define KNOWN_FLAGS (SMC_ERM_CMD_FLAG_REMOTE_COMPL | SMC_ERM_CMD_FLAG_SILENT)

/* One command, as our side and the peer's side of it. */
struct side {
	int32_t id;
	uint64_t off;
};

/* Slot k of the peer's area, read and checked for a copy of len bytes at off
 * with right need. 0 with rs filled, or the command's status. */
static int peer_slot(struct erm_area *pa, int32_t k, uint32_t need, uint64_t off, uint64_t len,
		     struct erm_rslot *rs)
{
	if (k < 0 || (uint32_t)k >= ERM_MRS)
		return ENOENT;
	uint32_t st = atomic_load_explicit(&pa->slot[k].state, memory_order_acquire);
	if (!(st & 1))
		return ENOENT;
	if (erm_slot_read(&pa->slot[k], rs) < 0)
		return EPROTO;
	if (rs->state != st)
		return ENOENT;
	if (!(rs->access & need))
		return EACCES;
	return erm_within(off, len, rs->len) ? 0 : ERANGE;
}

/* The kernel's copy between our memory and the peer process's. */
static int copy_vm(struct erm_conn *e, unsigned char *mine, uint64_t addr, uint64_t len, int write)
{
	struct iovec local = {mine, len}, remote = {(void *)(uintptr_t)addr, len};

	if (!e->peer_pid)
		return EPERM;
	ssize_t n = write ? process_vm_writev(e->peer_pid, &local, 1, &remote, 1, 0)
			  : process_vm_readv(e->peer_pid, &local, 1, &remote, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	if (n >= 0)
		return EFAULT; /* a page of the region is gone */
	if (errno != ESRCH)
		return errno == ENOMEM ? EFAULT : errno;
	/* Its process is gone: the connection learns it now, not at its next
	 * look at the channel. */
	conn_ext_peer_ended(e->s, 1);
	return ECONNRESET;
}

/* Room in the peer's event ring for one more: 0, EAGAIN (a caller that does
 * not wait), ECONNRESET (the peer ended while we waited) or EPROTO (its
 * cursor broke). The peer's cursor is read only once the room we knew of is
 * used up: its line moves at every event the peer takes. */
static int event_room(struct erm_conn *e, struct erm_area *pa, int nonblock)
{
	uint64_t start = 0;

	for (;;) {
		if (e->ev_room)
			return 0;
		uint64_t cons = atomic_load_explicit(&pa->ev_cons, memory_order_acquire);
		if (erm_evq_room(e->ev_prod, cons, &e->ev_room) < 0)
			return EPROTO;
		if (e->ev_room)
			return 0;
		if (nonblock)
			return EAGAIN;
		if (!erm_peer_alive(e) || atomic_load_explicit(&pa->closed, memory_order_relaxed) ||
		    atomic_load(&e->dead))
			return ECONNRESET;
		uint64_t now = sys_now_ns();
		if (!start)
			start = now;
		if (now - start < ROOM_SPIN_NS)
			sched_yield();
		else
			nanosleep(&(struct timespec){0, ROOM_LOOK_NS}, NULL);
	}
}

static void post_event(struct erm_conn *e, struct erm_area *pa, const struct smc_erm_cmd_copy *c,
		       const struct side *peer, const struct side *mine, uint32_t gen)
{
	struct erm_event *ev = &pa->ev[e->ev_prod % ERM_EVQ];

	atomic_store_explicit(&ev->type, c->hdr.type, memory_order_relaxed);
	atomic_store_explicit(&ev->memid, (uint32_t)peer->id, memory_order_relaxed);
	atomic_store_explicit(&ev->gen, gen, memory_order_relaxed);
	atomic_store_explicit(&ev->src_memid, mine->id, memory_order_relaxed);
	atomic_store_explicit(&ev->offset, peer->off, memory_order_relaxed);
	atomic_store_explicit(&ev->len, c->len, memory_order_relaxed);
	atomic_store_explicit(&ev->tag, c->tag, memory_order_relaxed);
	atomic_store_explicit(&ev->seq, ++e->ev_prod, memory_order_release);
	e->ev_room--;
}

/* Runs one command; returns its status. *events counts the events it posted. */
static int run(struct erm_conn *e, struct erm_area *pa, const struct smc_erm_cmd_copy *c,
	       int nonblock, int *events)
{
	int write = c->hdr.type == SMC_ERM_CMD_COPY;
	struct side mine = write ? (struct side){c->src_idx, c->src_offset}
				 : (struct side){c->dst_idx, c->dst_offset};
	struct side peer = write ? (struct side){c->dst_idx, c->dst_offset}
				 : (struct side){c->src_idx, c->src_offset};
	const struct erm_mr *mr = erm_mr(e, mine.id);
	struct erm_rslot rs;
	const struct erm_pmap *m = NULL;
	int st;

	if (!mr)
		return ENOENT;
	if (!write && !(mr->access & SMC_ACCESS_LOCAL_WRITE))
		return EACCES;
	if (!erm_within(mine.off, c->len, mr->len))
		return ERANGE;
	if (!pa)
		return ENOENT;
	if (atomic_load_explicit(&pa->closed, memory_order_relaxed))
		return ECONNRESET;
	if ((st = peer_slot(pa, peer.id, write ? SMC_ACCESS_REMOTE_WRITE : SMC_ACCESS_REMOTE_READ,
			    peer.off, c->len, &rs)))
		return st;
	/* What a copy needs is mapped before the command is in flight: mapping
	 * may read our channel. */
	if (rs.kind == ERM_MEM_SHM && !(m = erm_peer_mem(e, rs.fd_index, rs.base + rs.len)))
		return EPROTO;
	int remote = (c->hdr.flags & SMC_ERM_CMD_FLAG_REMOTE_COMPL) != 0;
	if (remote && (st = event_room(e, pa, nonblock)))
		return st;
	/* In flight, then the state again: full fences on both sides (mr.c). */
	atomic_store(&pa->inflight, erm_inflight((uint32_t)peer.id, rs.state >> 1));
	if (atomic_load(&pa->slot[peer.id].state) != rs.state) {
		atomic_store_explicit(&pa->inflight, 0, memory_order_release);
		return ENOENT;
	}
	unsigned char *p = mr->addr + mine.off;
	if (m) {
		unsigned char *q = m->base + rs.base + peer.off;
		memcpy(write ? q : p, write ? p : q, c->len);
	} else {
		st = copy_vm(e, p, rs.base + peer.off, c->len, write);
	}
	if (!st && remote) {
		post_event(e, pa, c, &peer, &mine, rs.state >> 1);
		(*events)++;
	}
	atomic_store_explicit(&pa->inflight, 0, memory_order_release);
	return st;
}

static int malformed(const struct smc_erm_cmd_copy *c)
{
	return (c->hdr.type != SMC_ERM_CMD_COPY && c->hdr.type != SMC_ERM_CMD_READ) ||
	       (c->hdr.flags & ~KNOWN_FLAGS) || !c->len || c->len > ERM_REGION_MAX;
}

int erm_exec(struct usock *s, int fd, const struct smc_erm_cmd_copy *cmd, int n, int nonblock)
{
	for (int i = 0; i < n; i++)
		if (malformed(&cmd[i]))
			return -EINVAL;
	struct erm_conn *e = erm_get(s, fd);
	if (!e)
		return -errno;
	conn_ext_lock(s);
	pthread_mutex_lock(&e->lock);
	int r = atomic_load(&e->dead) || !erm_peer_alive(e) ? -EPIPE
		: erm_cq_room(e) < (uint32_t)n		     ? -ENOBUFS
							     : 0;
	int events = 0, posted = 0;
	uint64_t bytes = 0, failed = 0;
	struct erm_area *pa = r ? NULL : erm_peer_area(e);
	for (int i = 0; !r && i < n; i++) {
		const struct smc_erm_cmd_copy *c = &cmd[i];
		int st = run(e, pa, c, nonblock, &events);
		int write = c->hdr.type == SMC_ERM_CMD_COPY;
		int32_t id = write ? c->src_idx : c->dst_idx;
		uint64_t off = write ? c->src_offset : c->dst_offset;
		const struct erm_mr *mr = erm_mr(e, id);
		if (st)
			failed++;
		else
			bytes += c->len;
		if (st || !(c->hdr.flags & SMC_ERM_CMD_FLAG_SILENT)) {
			struct smc_rmem_compl_event ev = {
				.event = c->hdr.type, .status = st, .memid = id, .tag = c->tag,
				.copy = {mr && !st ? mr->addr + off : NULL, c->len}, .offset = off,
				.peer_memid = write ? c->dst_idx : c->src_idx,
			};
			erm_cq_post(e, &ev);
			posted++;
		}
	}
	if (events)
		conn_ext_notify(s);
	pthread_mutex_unlock(&e->lock);
	conn_ext_unlock(s);
	if (posted)
		conn_ext_wake_local(s);
	if (!r) {
		stat_add(STAT_ERM_COMMANDS, (uint64_t)n - failed);
		stat_add(STAT_ERM_BYTES, bytes);
		if (failed)
			stat_add(STAT_ERM_FAILED, failed);
	}
	return r;
}
