/* SMC-ERM: registered memory and one-sided copies over an accelerated connection.
 *
 * An application registers memory on a connected socket that usmc carries
 * through shared memory; a region registered with a remote right is announced
 * to the peer, which may then copy from its own registered memory into it
 * (SMC_ERM_CMD_COPY) or out of it (SMC_ERM_CMD_READ) with one sendmsg(), the
 * bytes moving once, from region to region. Completions come back through
 * recvmsg(MSG_ERRQUEUE), as MSG_ZEROCOPY's do, or from a completion queue that
 * usmc_erm_poll() reads without a system call.
 *
 *     struct smc_erm_cmd_reg_mr regmr = {
 *         .type = SMC_ERM_CMD_REG_MR, .addr = buf, .len = size,
 *         .access_flags = SMC_ACCESS_LOCAL_WRITE | SMC_ACCESS_REMOTE_WRITE,
 *     };
 *     int memid = setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &regmr, sizeof(regmr));
 *
 * Memory from usmc_erm_alloc() is shared with the peer, which copies into it
 * with one memcpy(); any other memory is reached by the kernel's
 * process_vm_writev()/process_vm_readv(), one copy as well, where the kernel
 * lets the peer reach this process. On a socket usmc does not carry through
 * shared memory every call fails with EOPNOTSUPP. See usmc-erm(3). */
#ifndef USMC_ERM_H
#define USMC_ERM_H

#include <stddef.h>
#include <stdint.h>

/* As in Linux <bits/socket.h>. */
#ifndef SOL_SMC
#define SOL_SMC 286
#endif

/* Option names at level SOL_SMC, and the type of the control messages. */
#define SMC_ERM_CMD 0x4501       /* setsockopt: REG_MR, DEREG_MR; sendmsg cmsg: COPY, READ */
#define SMC_ERM_PEER_MRS 0x4502  /* getsockopt: the regions the peer announced */
#define SMC_ERM_CMD_COMPL 0x4503 /* recvmsg(MSG_ERRQUEUE) cmsg: a completion */

enum smc_erm_cmd_type {
	SMC_ERM_CMD_REG_MR = 1,
	SMC_ERM_CMD_DEREG_MR = 2,
	SMC_ERM_CMD_COPY = 3, /* write: a region of ours into one of the peer's */
	SMC_ERM_CMD_READ = 4, /* read: a region of the peer's into one of ours */
};

/* Rights of a region. A remote right announces it to the peer. */
#define SMC_ACCESS_LOCAL_WRITE 0x1u  /* reads of the peer's memory may land in it */
#define SMC_ACCESS_REMOTE_READ 0x2u  /* the peer may read it */
#define SMC_ACCESS_REMOTE_WRITE 0x4u /* the peer may write it */

/* Command flags. */
#define SMC_ERM_CMD_FLAG_REMOTE_COMPL 0x1u /* the peer gets an event naming where the bytes went */
#define SMC_ERM_CMD_FLAG_SILENT 0x2u       /* no completion here unless the command fails */

struct smc_erm_cmd_reg_mr {
	uint32_t type;         /* SMC_ERM_CMD_REG_MR */
	uint32_t access_flags; /* SMC_ACCESS_* */
	void *addr;
	uint64_t len;
};

struct smc_erm_cmd_dereg_mr {
	uint32_t type; /* SMC_ERM_CMD_DEREG_MR */
	int32_t memid;
};

struct smc_erm_cmd_hdr {
	uint32_t type;  /* SMC_ERM_CMD_COPY or SMC_ERM_CMD_READ */
	uint32_t flags; /* SMC_ERM_CMD_FLAG_* */
};

/* A copy of len bytes from (src_idx, src_offset) to (dst_idx, dst_offset):
 * for SMC_ERM_CMD_COPY the source is one of our regions and the destination
 * one of the peer's; for SMC_ERM_CMD_READ the other way round. tag comes back
 * in the completions. One control message (SOL_SMC, SMC_ERM_CMD) a command. */
struct smc_erm_cmd_copy {
	struct smc_erm_cmd_hdr hdr;
	uint64_t len;
	int32_t src_idx;
	int32_t dst_idx;
	uint64_t src_offset;
	uint64_t dst_offset;
	uint64_t tag;
};

/* Completion flags. */
#define SMC_ERM_COMPL_REMOTE 0x1u /* the peer's command, on our memory */

/* A completion: of one of our commands (status 0 when it moved its bytes, else
 * the errno that says why it did not), or, with SMC_ERM_COMPL_REMOTE, the
 * peer's command that asked for it. copy.addr is where in our memory the bytes
 * were taken from or landed, in region memid at offset. */
struct smc_rmem_compl_event {
	uint32_t event; /* SMC_ERM_CMD_COPY or SMC_ERM_CMD_READ */
	int32_t status;
	uint32_t flags;
	int32_t memid;
	uint64_t tag;
	struct {
		void *addr;
		uint64_t len;
	} copy;
	uint64_t offset;
	int32_t peer_memid; /* the peer's region of the command */
	uint32_t reserved;
};

/* getsockopt(SOL_SMC, SMC_ERM_PEER_MRS): one entry a region the peer announced
 * and still has registered; optlen comes back as the size all of them take. */
struct smc_erm_peer_mr {
	int32_t memid;
	uint32_t access_flags;
	uint64_t len;
};

/* Helpers, for those who do not build control messages (-lusmc). Each returns
 * what the call it stands for would: -1 and errno on failure. */

/* Memory the peer maps: a write into it is one memcpy() by the peer. Page
 * granular, zero-filled; usmc_erm_free() fails with EBUSY while registered. */
void *usmc_erm_alloc(size_t len);
int usmc_erm_free(void *addr);

int usmc_erm_reg_mr(int fd, void *addr, size_t len, unsigned access_flags);
int usmc_erm_dereg_mr(int fd, int memid);
/* A write (src: ours, dst: the peer's) and a read (src: the peer's, dst: ours). */
int usmc_erm_write(int fd, int src_idx, uint64_t src_offset, int dst_idx, uint64_t dst_offset,
		   uint64_t len, unsigned flags, uint64_t tag);
int usmc_erm_read(int fd, int src_idx, uint64_t src_offset, int dst_idx, uint64_t dst_offset,
		  uint64_t len, unsigned flags, uint64_t tag);

/* A connection's completion queue, read without a system call: usmc_erm_poll()
 * takes up to max completions, in the order recvmsg(MSG_ERRQUEUE) would, and
 * returns how many (0: none yet; -1 and errno ECONNRESET once the connection
 * is gone and nothing is left). One reader at a time. */
struct usmc_erm_cq;
struct usmc_erm_cq *usmc_erm_cq_open(int fd);
int usmc_erm_poll(struct usmc_erm_cq *cq, struct smc_rmem_compl_event *ev, int max);
void usmc_erm_cq_close(struct usmc_erm_cq *cq);

#endif
