/* The areas both ends share (wire.h), and the peer's memfds.
 *
 * Our area goes to the peer on the link group's channel before the segment's
 * word for our side says it exists, so a peer that sees the word finds the
 * memfd in its channel. The peer's area and memfds are mapped when a command
 * or a listing first needs them, each checked first: sealed at a size that
 * holds what it claims (a peer that could shrink one would make our next touch
 * a SIGBUS), the area's header, and the process it names, which our channel
 * must vouch for before process_vm_writev() is pointed at it. */
#include "erm.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../core/lgr.h"
#include "../core/segment.h"
#include "../core/memfd.h"
#include "../core/sys.h"

int erm_area_open(struct erm_conn *e)
{
	if (e->area)
		return 0;
	int fd = memfd_sealed("usmc-erm-area", ERM_AREA_SIZE);
	if (fd < 0)
		return fd;
	struct erm_area *a = memfd_map(fd, ERM_AREA_SIZE);
	if (!a) {
		real.close(fd);
		return -ENOMEM;
	}
	atomic_store_explicit(&a->magic, ERM_AREA_MAGIC, memory_order_relaxed);
	atomic_store_explicit(&a->version, ERM_AREA_VERSION, memory_order_relaxed);
	atomic_store_explicit(&a->pid, sys_pid(), memory_order_relaxed);
	int r = lgr_ext_send(e->lgr, e->conn_id, 0, fd, ERM_AREA_SIZE);
	real.close(fd);
	if (r < 0) {
		munmap(a, ERM_AREA_SIZE);
		return r;
	}
	atomic_store_explicit(&e->area, a, memory_order_release);
	atomic_store_explicit(&e->s->seg.hdr->ext[e->side], 1, memory_order_release);
	return 0;
}

/* The process the peer's area names, if our channel vouches for it: the one at
 * its other end or a descendant (a prefork worker of the listener), pinned
 * while it is checked so that a pid passed on meanwhile is not taken. */
static pid_t vouched(const struct erm_area *a, struct lgr *g)
{
	pid_t claim = atomic_load_explicit(&a->pid, memory_order_relaxed);
	int pfd = claim > 0 ? (int)syscall(SYS_pidfd_open, claim, 0) : -1;
	pid_t from = pfd >= 0 ? lgr_peer_pid(g) : 0;
	int ok = from && sys_descends(claim, from);

	if (pfd >= 0)
		real.close(pfd);
	return ok ? claim : 0;
}

/* A memfd the peer sent as index, mapped if it holds at least min bytes. */
static void *map_peer(struct erm_conn *e, uint32_t index, uint64_t min, uint64_t *size)
{
	int fd = lgr_ext_take(e->lgr, e->conn_id, index, size);
	void *p = fd >= 0 && *size >= min ? memfd_map(fd, *size) : NULL;

	if (fd >= 0)
		real.close(fd);
	return p;
}

struct erm_area *erm_peer_area(struct erm_conn *e)
{
	uint64_t size;

	if (e->peer ||
	    !atomic_load_explicit(&e->s->seg.hdr->ext[!e->side], memory_order_acquire))
		return e->peer;
	struct erm_area *a = map_peer(e, 0, ERM_AREA_SIZE, &size);
	if (!a)
		return NULL;
	/* Only our own part of it is ever mapped: the rest of a larger memfd
	 * stays out of reach. */
	if (size > ERM_AREA_SIZE)
		munmap((unsigned char *)a + ERM_AREA_SIZE, size - ERM_AREA_SIZE);
	if (erm_area_check(a) < 0) {
		munmap(a, ERM_AREA_SIZE);
		return NULL;
	}
	e->peer_pid = vouched(a, e->lgr);
	e->peer = a;
	return a;
}

const struct erm_pmap *erm_peer_mem(struct erm_conn *e, uint32_t fd_index, uint64_t end)
{
	struct erm_pmap *m;

	if (fd_index == 0 || fd_index >= ERM_FDS)
		return NULL;
	if (!e->pmaps && !(e->pmaps = calloc(ERM_FDS, sizeof(*e->pmaps))))
		return NULL;
	m = &e->pmaps[fd_index];
	if (!m->base) {
		uint64_t size;
		void *p = map_peer(e, fd_index, 1, &size);
		if (!p)
			return NULL;
		m->base = p;
		m->size = size;
	}
	return end <= m->size ? m : NULL;
}

int erm_area_share(struct erm_conn *e, struct erm_alloc *a, uint32_t *fd_index)
{
	for (uint32_t i = 0; i < e->nsent; i++)
		if (e->sent[i].alloc_id == a->id) {
			*fd_index = e->sent[i].fd_index;
			return 0;
		}
	if (e->next_fd_index >= ERM_FDS)
		return -ENOSPC;
	struct erm_sent *t = realloc(e->sent, (e->nsent + 1) * sizeof(*t));
	if (!t)
		return -ENOMEM;
	e->sent = t;
	int r = lgr_ext_send(e->lgr, e->conn_id, e->next_fd_index, a->fd, a->size);
	if (r < 0)
		return r;
	t[e->nsent++] = (struct erm_sent){a->id, e->next_fd_index};
	*fd_index = e->next_fd_index++;
	return 0;
}

void erm_area_close_peer(struct erm_conn *e)
{
	if (e->peer)
		munmap(e->peer, ERM_AREA_SIZE);
	e->peer = NULL;
	for (uint32_t i = 0; e->pmaps && i < ERM_FDS; i++)
		if (e->pmaps[i].base)
			munmap(e->pmaps[i].base, e->pmaps[i].size);
	free(e->pmaps);
	e->pmaps = NULL;
}
