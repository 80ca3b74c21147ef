/* SMC-ERM inside the library: a connection's registered regions, the areas
 * both ends share (wire.h), commands, and completions. The interposition
 * layer (src/interpose/erm.c) turns socket calls into these; the core reaches
 * a connection's state only through conn_ext (conn.h).
 *
 *   mem.c   usmc_erm_alloc() memory, and the registration cache over it
 *   mr.c    registering and deregistering, the in-flight rule
 *   area.c  our area, the peer's, and the peer's memfds, mapped
 *   cmd.c   running commands (writes and reads)
 *   cq.c    completions: ours, the peer's events, MSG_ERRQUEUE, the CQ
 *   erm.c   a connection's state and the hooks the core calls */
#ifndef USMC_ERM_ERM_H
#define USMC_ERM_ERM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../core/conn.h"
#include "usmc/erm.h"
#include "wire.h"

/* ------------------------------------------------------------ mem.c */

/* Memory from usmc_erm_alloc(): a sealed memfd of its own, mapped shared, so
 * that it exposes to a peer exactly what the application allocated. Its id is
 * never reused: what a connection sent of it is known by id, not address. */
struct erm_alloc {
	uint64_t id;
	unsigned char *base;
	uint64_t size;
	int fd;
	int refs; /* registrations on it, under the table's lock */
};

/* The allocation that holds [addr, addr + len), referenced; NULL if none. */
struct erm_alloc *erm_alloc_find(const void *addr, uint64_t len);
void erm_alloc_put(struct erm_alloc *a);
/* Before the core's fork handlers are set: the table's lock is taken over
 * fork() and let go first in the child. */
void erm_mem_init(void);

/* ------------------------------------------------------------ erm.c */

/* A region registered on the connection. */
struct erm_mr {
	unsigned char *addr;
	uint64_t len;
	uint32_t access;
	uint32_t gen;             /* of this memid's current (or last) registration */
	int kind;                 /* enum erm_kind; 0: the memid is free */
	struct erm_alloc *alloc;  /* ERM_MEM_SHM */
	uint32_t fd_index;        /* ERM_MEM_SHM with a remote right: its memfd for the peer */
};

/* An allocation of ours sent to the peer, as fd_index. */
struct erm_sent {
	uint64_t alloc_id;
	uint32_t fd_index;
};

/* A memfd of the peer's, mapped. */
struct erm_pmap {
	unsigned char *base;
	uint64_t size;
};

/* Completions of our own commands, waiting for the application: a ring in our
 * memory, one producer (a command, under the state's lock), one consumer
 * (under cq_lock). */
#define ERM_LOCAL_CQ 1024u

struct erm_conn {
	pthread_mutex_t lock;     /* everything but what cq_lock guards */
	pthread_mutex_t cq_lock;  /* the consumer's side of both rings */
	struct usock *s;
	int side;                 /* 0: client, 1: server (the segment's ext[] word) */
	uint64_t conn_id;
	struct lgr *lgr;
	_Atomic int dead;         /* torn down: no more commands or registrations */
	/* Ours. */
	struct erm_area *_Atomic area; /* mapped shared, NULL until made */
	struct erm_mr *mrs;       /* indexed by memid */
	uint32_t nmrs;            /* entries in mrs */
	struct erm_sent *sent;
	uint32_t nsent;
	uint32_t next_fd_index;
	/* The peer's. */
	struct erm_area *peer;    /* mapped, NULL until it made one and we needed it */
	pid_t peer_pid;           /* its process, vouched for by our channel; 0: none */
	struct erm_pmap *pmaps;   /* indexed by fd_index */
	uint64_t ev_prod;         /* our cursor in its event ring */
	/* Room there as of our last look at its consumer's cursor, less what we
	 * posted since: the cursor's line is read only when this runs out. */
	uint64_t ev_room;
	/* When we last looked whether it is still there, or heard from it. */
	uint64_t probed_ns;
	/* Completions of our commands. */
	struct smc_rmem_compl_event *local;
	_Atomic uint64_t local_prod, local_cons;
};

/* The connection's state, made on first use; NULL with errno EOPNOTSUPP when
 * the connection cannot take ERM (not carried through shared memory, held by
 * several processes, gone). */
struct erm_conn *erm_get(struct usock *s, int fd);
/* At start-up, before the library's own fork handlers: the hooks the core
 * calls (conn_ext_ops), and mem.c's. */
void erm_init(void);
/* Whether the peer still reads and writes: probes its channel now and then.
 * Called with e->lock held. */
int erm_peer_alive(struct erm_conn *e);
/* A clock for those looks, coarse (milliseconds) and cheap. */
uint64_t erm_coarse_ns(void);

/* ------------------------------------------------------------ area.c */

/* Makes and sends our area. 0 or -errno. Called with e->lock held. */
int erm_area_open(struct erm_conn *e);
/* The peer's area, mapped, or NULL if it made none (or a broken one). Called
 * with e->lock held. */
struct erm_area *erm_peer_area(struct erm_conn *e);
/* The peer's memfd fd_index, mapped, holding at least end bytes; NULL if it
 * sent none so large. Called with e->lock held. */
const struct erm_pmap *erm_peer_mem(struct erm_conn *e, uint32_t fd_index, uint64_t end);
/* Sends allocation a to the peer (once per connection); 0 with its index, or
 * -errno. Called with e->lock held. */
int erm_area_share(struct erm_conn *e, struct erm_alloc *a, uint32_t *fd_index);
/* Unmaps what is the peer's. Called with e->lock held. */
void erm_area_close_peer(struct erm_conn *e);

/* ------------------------------------------------------------ mr.c */

/* Registers [addr, addr + len) with access (SMC_ACCESS_*): its memid, or
 * -errno (EINVAL, EFAULT, EPERM, ENOSPC, EOPNOTSUPP). */
int erm_reg(struct usock *s, int fd, void *addr, uint64_t len, uint32_t access);
/* 0, or -errno: EINVAL for a memid not registered, EBUSY when the peer's
 * command on it stays in flight (the region is revoked all the same). */
int erm_dereg(struct usock *s, int fd, int memid);
/* The peer's regions into out (at most max); returns how many it has, or
 * -errno. */
int erm_peer_mrs(struct usock *s, int fd, struct smc_erm_peer_mr *out, int max);
/* Our region memid as registered now, or NULL. Called with e->lock held. */
const struct erm_mr *erm_mr(const struct erm_conn *e, int32_t memid);
/* Every region of ours goes from the peer's sight, waiting (bounded) for what
 * it has in flight on them. Called with e->lock held. */
void erm_mr_revoke_all(struct erm_conn *e);

/* ------------------------------------------------------------ cmd.c */

/* Runs n commands, in order, after the bytes the stream took before. 0 or
 * -errno (nothing ran): EINVAL for a malformed command, ENOBUFS when the
 * completions it would post do not fit, EPIPE when the peer ended. */
int erm_exec(struct usock *s, int fd, const struct smc_erm_cmd_copy *cmd, int n, int nonblock);

/* ------------------------------------------------------------ cq.c */

/* Posts a completion of ours (room was checked). Called with e->lock held. */
void erm_cq_post(struct erm_conn *e, const struct smc_rmem_compl_event *ev);
/* Room for this many completions of ours. */
uint32_t erm_cq_room(struct erm_conn *e);
/* Takes up to max completions; returns how many. */
int erm_cq_take(struct erm_conn *e, struct smc_rmem_compl_event *out, int max);
/* Completions waiting: ours or the peer's events. Lock-free. */
int erm_cq_pending(struct erm_conn *e);
/* The connection's recvmsg(MSG_ERRQUEUE): as many completions as the control
 * buffer holds; -1 with EAGAIN when there are none. */
ssize_t erm_recv_errqueue(struct usock *s, struct msghdr *m);

#endif
