/* SMC-ERM from the application's side: the socket calls of the slides
 * (setsockopt(SOL_SMC, SMC_ERM_CMD), sendmsg() with SOL_SMC control messages,
 * recvmsg(MSG_ERRQUEUE)), getsockopt(SOL_SMC, SMC_ERM_PEER_MRS), and the C
 * helpers of <usmc/erm.h>. Each finds the descriptor's accelerated socket and
 * hands over to src/erm; any other descriptor gets EOPNOTSUPP, or what the
 * kernel says of one that is no socket. */
#include "erm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sys.h"
#include "../erm/erm.h"
#include "fdtab.h"

/* Commands one sendmsg() carries on the stack; more are allocated. */
#define STACK_CMDS 16

/* The socket fd names, referenced, if usmc carries it through shared memory;
 * else NULL, errno set as the call must fail. */
static struct usock *erm_sock(int fd)
{
	struct usock *s = fdtab_accel(fd);

	if (!s)
		erm_refuse(fd);
	return s;
}

ssize_t erm_refuse(int fd)
{
	int type;
	socklen_t l = sizeof(type);

	/* EBADF, ENOTSOCK: the kernel's word on what fd is. */
	if (real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) == 0)
		errno = EOPNOTSUPP;
	return -1;
}

/* An option of level SOL_SMC that is not ERM's: as the kernel answers a level a
 * TCP socket does not have. */
static int no_such_option(int fd)
{
	if (erm_refuse(fd) < 0 && errno == EOPNOTSUPP)
		errno = ENOPROTOOPT;
	return -1;
}

static int put_result(struct usock *s, int r)
{
	usock_put(s);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return r;
}

int erm_setsockopt(int fd, int name, const void *val, socklen_t len)
{
	uint32_t type;

	if (name != SMC_ERM_CMD)
		return no_such_option(fd);
	struct usock *s = erm_sock(fd);
	if (!s)
		return -1;
	if (!val || len < sizeof(type))
		return put_result(s, -EINVAL);
	memcpy(&type, val, sizeof(type));
	if (type == SMC_ERM_CMD_REG_MR && len >= sizeof(struct smc_erm_cmd_reg_mr)) {
		struct smc_erm_cmd_reg_mr r;
		memcpy(&r, val, sizeof(r));
		return put_result(s, erm_reg(s, fd, r.addr, r.len, r.access_flags));
	}
	if (type == SMC_ERM_CMD_DEREG_MR && len >= sizeof(struct smc_erm_cmd_dereg_mr)) {
		struct smc_erm_cmd_dereg_mr d;
		memcpy(&d, val, sizeof(d));
		return put_result(s, erm_dereg(s, fd, d.memid));
	}
	return put_result(s, -EINVAL);
}

int erm_getsockopt(int fd, int name, void *val, socklen_t *len)
{
	if (name != SMC_ERM_PEER_MRS)
		return no_such_option(fd);
	struct usock *s = erm_sock(fd);
	if (!s)
		return -1;
	if (!len || (!val && *len))
		return put_result(s, -EFAULT);
	int n = erm_peer_mrs(s, fd, val, (int)(*len / sizeof(struct smc_erm_peer_mr)));
	if (n >= 0)
		*len = (socklen_t)((size_t)n * sizeof(struct smc_erm_peer_mr));
	return put_result(s, n < 0 ? n : 0);
}

int erm_has_cmsg(const struct msghdr *m)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr *)m, c))
		if (c->cmsg_level == SOL_SMC)
			return 1;
	return 0;
}

ssize_t erm_sendmsg(struct usock *s, int fd, const struct msghdr *m, int flags)
{
	struct smc_erm_cmd_copy stack[STACK_CMDS], *cmd = stack;
	int n = 0, cap = STACK_CMDS;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
		if (c->cmsg_level != SOL_SMC)
			continue;
		if (c->cmsg_type != SMC_ERM_CMD || c->cmsg_len != CMSG_LEN(sizeof(*cmd))) {
			n = -1;
			break;
		}
		if (n == cap) {
			struct smc_erm_cmd_copy *t = malloc(2 * (size_t)cap * sizeof(*t));
			if (!t) {
				n = -2;
				break;
			}
			memcpy(t, cmd, (size_t)n * sizeof(*t));
			if (cmd != stack)
				free(cmd);
			cmd = t;
			cap *= 2;
		}
		memcpy(&cmd[n++], CMSG_DATA(c), sizeof(*cmd));
	}
	ssize_t r = n == -1 ? (errno = EINVAL, -1) : n == -2 ? (errno = ENOMEM, -1) : 0;
	/* The bytes first: the commands come after them, and run only once all
	 * of them went (a short count tells the caller that none ran). */
	size_t total = 0;
	for (size_t i = 0; i < m->msg_iovlen; i++)
		total += m->msg_iov[i].iov_len;
	if (!r && total)
		r = conn_send(s, fd, m->msg_iov, (int)m->msg_iovlen, flags);
	if (r == (ssize_t)total) {
		int e = erm_exec(s, fd, cmd, n, s->nonblock || (flags & MSG_DONTWAIT));
		if (e < 0) {
			errno = -e;
			r = -1;
		}
	}
	if (cmd != stack)
		free(cmd);
	return r;
}

/* ------------------------------------------------------------ helpers */

int usmc_erm_reg_mr(int fd, void *addr, size_t len, unsigned access_flags)
{
	struct usock *s = erm_sock(fd);

	return s ? put_result(s, erm_reg(s, fd, addr, len, access_flags)) : -1;
}

int usmc_erm_dereg_mr(int fd, int memid)
{
	struct usock *s = erm_sock(fd);

	return s ? put_result(s, erm_dereg(s, fd, memid)) : -1;
}

static int one_cmd(int fd, uint32_t type, int src_idx, uint64_t src_offset, int dst_idx,
		   uint64_t dst_offset, uint64_t len, unsigned flags, uint64_t tag)
{
	struct usock *s = erm_sock(fd);
	struct smc_erm_cmd_copy c = {{type, flags}, len, src_idx, dst_idx, src_offset, dst_offset, tag};

	return s ? put_result(s, erm_exec(s, fd, &c, 1, s->nonblock)) : -1;
}

int usmc_erm_write(int fd, int src_idx, uint64_t src_offset, int dst_idx, uint64_t dst_offset,
		   uint64_t len, unsigned flags, uint64_t tag)
{
	return one_cmd(fd, SMC_ERM_CMD_COPY, src_idx, src_offset, dst_idx, dst_offset, len, flags,
		       tag);
}

int usmc_erm_read(int fd, int src_idx, uint64_t src_offset, int dst_idx, uint64_t dst_offset,
		  uint64_t len, unsigned flags, uint64_t tag)
{
	return one_cmd(fd, SMC_ERM_CMD_READ, src_idx, src_offset, dst_idx, dst_offset, len, flags,
		       tag);
}

/* The completion queue holds its socket: closing the descriptor leaves what is
 * queued readable until usmc_erm_cq_close(). */
struct usmc_erm_cq {
	struct usock *s;
	struct erm_conn *e;
	unsigned idle; /* polls that found nothing */
};

/* Polls that find nothing between looks at whether the connection ended. */
#define IDLE_LOOK 256

struct usmc_erm_cq *usmc_erm_cq_open(int fd)
{
	struct usock *s = erm_sock(fd);
	struct usmc_erm_cq *cq = NULL;
	struct erm_conn *e = s ? erm_get(s, fd) : NULL;

	if (e && !(cq = malloc(sizeof(*cq))))
		errno = ENOMEM;
	if (!cq) {
		if (s)
			usock_put(s);
		return NULL;
	}
	*cq = (struct usmc_erm_cq){s, e, 0};
	return cq;
}

int usmc_erm_poll(struct usmc_erm_cq *cq, struct smc_rmem_compl_event *ev, int max)
{
	struct erm_conn *e = cq ? cq->e : NULL;

	if (!e || !ev || max <= 0) {
		errno = EINVAL;
		return -1;
	}
	if (erm_cq_pending(e))
		return erm_cq_take(e, ev, max);
	/* Nothing there: has the connection ended? Closed here, that is one load;
	 * whether the peer is still there is looked at now and then only: a busy
	 * poller spins here. (Not dead, under the lock, its shared memory is still
	 * there to look at.) */
	int ended = atomic_load_explicit(&e->dead, memory_order_acquire);
	if (!ended && ++cq->idle % IDLE_LOOK)
		return 0;
	if (!ended) {
		pthread_mutex_lock(&e->lock);
		ended = atomic_load(&e->dead) || !erm_peer_alive(e);
		pthread_mutex_unlock(&e->lock);
	}
	if (!ended)
		return 0;
	/* What came before the end. */
	if (erm_cq_pending(e))
		return erm_cq_take(e, ev, max);
	errno = ECONNRESET;
	return -1;
}

void usmc_erm_cq_close(struct usmc_erm_cq *cq)
{
	if (!cq)
		return;
	usock_put(cq->s);
	free(cq);
}
