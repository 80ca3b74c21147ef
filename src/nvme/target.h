/* An NVMe/TCP target: one NVM subsystem with one namespace, and the discovery
 * controller, on any port it listens on. Each connection is a queue served by
 * a thread of its own running an event loop (target.c); controllers tie an
 * admin queue to its I/O queues (ctrl.c); admin commands (admin.c), I/O
 * commands (io.c) and the discovery log (discovery.c) execute in the queue's
 * thread as their data is complete. */
#ifndef USMC_NVME_TARGET_H
#define USMC_NVME_TARGET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ns.h"
#include "queue.h"

#define TGT_MAX_IO_QUEUES 64
#define TGT_MQES 1023            /* largest queue: 1024 entries */
#define TGT_AQ_MAX 32            /* admin queue entries */
#define TGT_MDTS 8               /* 2^8 pages of 4 KiB: 1 MiB a command */
#define TGT_MAX_XFER (4096u << TGT_MDTS)
#define TGT_INCAPSULE 8192u      /* in-capsule data of I/O commands */
#define TGT_ADMIN_INCAPSULE 8192u /* ...and of admin ones (Connect's data) */
#define TGT_MAXH2CDATA (128u << 10)
#define TGT_PORTS_MAX 4

struct target_opts {
	const char *path;          /* NULL: memory */
	uint64_t size;             /* bytes: a memory namespace, or a file to create */
	unsigned lba_shift;
	const char *nqn;
	const char *addr;          /* listen address */
	uint16_t port, disc_port;  /* disc_port 0: only on port */
	int require_digest;        /* refuse hosts that do not ask for both digests */
	int verbose;
};

struct tctrl;

struct target {
	struct target_opts o;
	struct ns ns;
	char nqn[NVMF_NQN_SIZE];
	char serial[21];
	int lfd[TGT_PORTS_MAX];
	uint16_t lport[TGT_PORTS_MAX];
	int nports;
	pthread_mutex_t lock;      /* the controllers */
	struct tctrl *ctrls;
	uint16_t next_cntlid;
	/* what the queues counted, for the log */
	_Atomic uint64_t queues, fatal_errors, ddgst_errors, hdgst_errors;
};

/* A controller: created by an admin queue's Connect, joined by I/O queues'. */
struct tctrl {
	struct tctrl *next;
	struct target *t;
	uint16_t cntlid;
	int disc;                  /* the discovery controller */
	char hostnqn[NVMF_NQN_SIZE];
	uint8_t hostid[16];
	int refs;                  /* queues attached (under t->lock) */
	_Atomic int dead;          /* its admin queue went, or keep-alive expired */
	uint32_t cc;
	_Atomic uint32_t csts;     /* I/O queues look at RDY */
	uint32_t kato_ms;
	uint32_t aec;              /* asynchronous event configuration */
	uint16_t nr_io_queues;     /* granted by Set Features */
	unsigned aers;             /* asynchronous event requests held */
	uint64_t io_queue_used;    /* bit qid-1: an I/O queue connected with it */
};

enum tcmd_state { TC_FREE, TC_DATA_IN, TC_R2T, TC_HELD };

/* A command in flight on a queue. Its slot index is the transfer tag. */
struct tcmd {
	enum tcmd_state state;
	struct nvme_sqe sqe;
	uint16_t cid;
	uint8_t *buf;              /* data, host to controller or back */
	uint32_t len;              /* transfer length */
	uint32_t rcvd;             /* bytes of it received */
	uint32_t capsule_off;      /* in-capsule data: where the command's starts */
	uint16_t status;           /* a failure found while its data came in */
	struct iovec iov[1];       /* buf, as a transmit entry's data */
};

/* One queue: a TCP connection. */
struct tconn {
	struct nvq q;
	struct target *t;
	struct tctrl *ctrl;
	uint16_t qid;
	uint16_t sqsize;           /* entries - 1 */
	uint16_t sqhd;
	int sqflow_off;            /* the host disabled SQ flow control */
	uint32_t maxr2t;           /* the host's, 0's based */
	struct tcmd *cmds;         /* TGT_MQES + 1 slots... */
	uint16_t *free_slots;      /* ...of which sqsize + 1 are handed out */
	unsigned nfree;
	struct tcmd *capsule;      /* the command whose in-capsule data comes in */
	char peer[64];
};

/* target.c */
int target_start(struct target *t, const struct target_opts *o, char *err, size_t errlen);
/* Accepts and serves until the process ends. */
void target_run(struct target *t);
void tlog(const struct tconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Completes a command: its response (or, for a read whose data went with
 * SUCCESS, nothing), and frees its slot. */
void tcmd_complete(struct tconn *c, struct tcmd *cmd, uint16_t status, uint64_t result);
/* Sends len bytes of data from data (which stays valid and unchanged until it
 * left: cmd->buf) in C2HData PDUs, then completes it. ddgst: its data digest,
 * when the caller summed it already (NULL: summed here if the queue has one). */
void tcmd_send_data(struct tconn *c, struct tcmd *cmd, const void *data, uint32_t len,
		    uint16_t status, const uint32_t *ddgst);

/* Makes the queue sqsize + 1 entries deep (Connect). */
void tconn_resize(struct tconn *c, uint16_t sqsize);

/* ctrl.c: Connect and properties. */
void ctrl_connect(struct tconn *c, struct tcmd *cmd);
void ctrl_release(struct tconn *c);
void ctrl_property(struct tconn *c, struct tcmd *cmd);

/* admin.c */
void admin_exec(struct tconn *c, struct tcmd *cmd);
/* io.c */
void io_exec(struct tconn *c, struct tcmd *cmd);
/* discovery.c: the discovery log page's bytes [off, off + len) into buf, as
 * the host reached us through c. */
void discovery_log(const struct tconn *c, uint8_t *buf, uint64_t off, uint32_t len);

/* Whether a command moves data from the host (and so needs it before it runs). */
int tcmd_data_in(const struct tconn *c, const struct nvme_sqe *sqe);

#endif
