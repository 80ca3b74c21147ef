/* The placement interface's entry points (include/usmc/ddp.h): the payload of a
 * registered tag comes out of the shared-memory ring into its buffers, summed
 * in the same pass, on an accelerated connection, and from the kernel by one
 * readv on any other; what is sent is summed as it is copied into the ring. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "../core/conn.h"
#include "../util/crc32c.h"
#include "../core/ddp.h"
#include "../core/stats.h"
#include "../core/sys.h"
#include "fdtab.h"

unsigned usmc_ddp_caps(int fd)
{
	struct obj *o = fdtab_get(fd);
	struct usock *s = sock_of(o);
	unsigned caps = USMC_DDP_CAP_PLACE;

	if (s && conn_attached(s))
		caps |= USMC_DDP_CAP_RING | USMC_DDP_CAP_CRC;
	if (o)
		obj_put(o);
	return caps;
}

struct usmc_ddp *usmc_ddp_sk_add(int fd, const struct usmc_ddp_config *cfg)
{
	int type = 0;
	socklen_t l = sizeof(type);
	struct usmc_ddp *d = NULL;

	if (real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) == 0 && type == SOCK_STREAM)
		d = ddp_new(fd, cfg);
	else if (errno != EBADF)
		errno = ENOTSOCK;
	stat_add(STAT_DDP + (d ? DDP_SK_ADD : DDP_SK_ADD_FAIL), 1);
	return d;
}

void usmc_ddp_sk_del(struct usmc_ddp *d)
{
	if (!d)
		return;
	ddp_free(d);
	stat_add(STAT_DDP + DDP_SK_DEL, 1);
}

int usmc_ddp_setup(struct usmc_ddp *d, unsigned tag, const struct iovec *iov, int iovcnt)
{
	return ddp_setup(d, tag, iov, iovcnt);
}

void usmc_ddp_teardown(struct usmc_ddp *d, unsigned tag)
{
	ddp_teardown(d, tag);
}

void usmc_ddp_drop(struct usmc_ddp *d)
{
	(void)d;
	stat_add(STAT_DDP + DDP_DROP, 1);
}

void usmc_ddp_resync(struct usmc_ddp *d)
{
	(void)d;
	stat_add(STAT_DDP + DDP_RESYNC, 1);
}

/* The first n bytes of a window, summed. */
static uint32_t sum_window(uint32_t crc, const struct iovec *win, size_t n)
{
	for (; n; win++) {
		size_t l = win->iov_len < n ? win->iov_len : n;

		crc = crc32c(crc, win->iov_base, l);
		n -= l;
	}
	return crc;
}

/* A connection usmc carries: through the ring, where the copy sums as it goes
 * once both ends are attached (one still waiting for its attach may yet fall
 * back, and bytes from the kernel are summed after). */
static ssize_t from_ring(struct usock *s, int fd, const struct iovec *win, int n, uint32_t *crc,
			 int flags)
{
	int fused = conn_attached(s);
	ssize_t r = conn_recv_sum(s, fd, win, n, flags, fused ? crc : NULL);

	if (r > 0 && crc && !fused)
		*crc = sum_window(*crc, win, (size_t)r);
	return r;
}

/* A plain socket: one readv into the window, and what follows into ahead. */
static ssize_t from_kernel(int fd, struct iovec *win, int n, size_t len, uint32_t *crc,
			   void *ahead, size_t ahead_len, size_t *ahead_got, int flags)
{
	struct msghdr mh = {.msg_iov = win, .msg_iovlen = (size_t)n};
	ssize_t r;

	if (ahead && ahead_len) {
		win[n].iov_base = ahead;
		win[n].iov_len = ahead_len;
		mh.msg_iovlen++;
	}
	r = real.recvmsg(fd, &mh, flags);
	if (r > (ssize_t)len) {
		*ahead_got = (size_t)r - len;
		r = (ssize_t)len;
	}
	if (r > 0 && crc)
		*crc = sum_window(*crc, win, (size_t)r);
	return r;
}

ssize_t usmc_ddp_recv(struct usmc_ddp *d, unsigned tag, size_t off, size_t len, uint32_t *crc,
		      void *ahead, size_t ahead_len, size_t *ahead_got, int flags)
{
	struct iovec win[USMC_DDP_IOV_MAX + 1];
	size_t got = 0;
	int n;
	ssize_t r;

	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	n = ddp_window(d, tag, off, len, win);
	if (n < 0)
		return -1;
	if (!len)
		return 0;
	struct obj *o = fdtab_get(d->fd);
	struct usock *s = sock_of(o);
	flags &= MSG_DONTWAIT;
	if (s && conn_accel(s))
		r = from_ring(s, d->fd, win, n, crc, flags);
	else
		r = from_kernel(d->fd, win, n, len, crc, ahead, ahead_len, &got, flags);
	if (o) {
		int e = errno;
		obj_put(o);
		errno = e;
	}
	if (ahead_got)
		*ahead_got = got;
	if (r > 0) {
		stat_add(STAT_DDP + DDP_PACKETS, 1);
		stat_add(STAT_DDP + DDP_BYTES, (uint64_t)r);
	}
	return r;
}

ssize_t usmc_ddp_send(int fd, const struct iovec *iov, int iovcnt, uint32_t *crc, int flags)
{
	struct obj *o = fdtab_get(fd);
	struct usock *s = sock_of(o);
	int fused = s && conn_attached(s);
	ssize_t r;

	flags &= MSG_DONTWAIT | MSG_NOSIGNAL;
	if (s && conn_accel(s)) {
		r = conn_send_sum(s, fd, iov, iovcnt, flags, fused ? crc : NULL);
	} else {
		struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};

		r = real.sendmsg(fd, &mh, flags);
	}
	if (o) {
		int e = errno;
		obj_put(o);
		errno = e;
	}
	if (r > 0 && crc && !fused)
		*crc = sum_window(*crc, iov, (size_t)r);
	return r;
}
