/* Every way bytes enter or leave a socket, including the fortified variants that
 * distribution binaries call. Plain descriptors pass straight through. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../core/conn.h"
#include "../core/stats.h"
#include "../core/sys.h"
#include "../erm/erm.h"
#include "erm.h"
#include "fdpass.h"
#include "fdtab.h"
#include "init.h"

static ssize_t done(struct usock *s, ssize_t r)
{
	int e = errno;

	usock_put(s);
	errno = e;
	return r;
}

/* A read that only looks: counted where applications ask for it (splice peeks
 * for itself). */
static int peeking(int flags)
{
	if (flags & MSG_PEEK)
		stat_add(STAT_PEEK_CALLS, 1);
	return flags;
}

static ssize_t recv1(struct usock *s, int fd, void *buf, size_t n, int flags)
{
	struct iovec iov = {buf, n};
	return done(s, conn_recv(s, fd, &iov, 1, peeking(flags)));
}

static ssize_t send1(struct usock *s, int fd, const void *buf, size_t n, int flags)
{
	struct iovec iov = {(void *)buf, n};
	return done(s, conn_send(s, fd, &iov, 1, flags));
}

FDTAB_WRAP(ssize_t, read, fd, (int fd, void *buf, size_t n), (fd, buf, n))
{
	struct usock *s = fdtab_accel(fd);
	return s ? recv1(s, fd, buf, n, 0) : real.read(fd, buf, n);
}

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		abort();
	return read(fd, buf, n);
}

FDTAB_WRAP(ssize_t, write, fd, (int fd, const void *buf, size_t n), (fd, buf, n))
{
	struct usock *s = fdtab_accel(fd);
	return s ? send1(s, fd, buf, n, 0) : real.write(fd, buf, n);
}

FDTAB_WRAP(ssize_t, readv, fd, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt))
{
	struct usock *s = fdtab_accel(fd);
	if (!s)
		return real.readv(fd, iov, cnt);
	if (cnt < 0 || cnt > IOV_MAX) {
		usock_put(s);
		errno = EINVAL;
		return -1;
	}
	return done(s, conn_recv(s, fd, iov, cnt, 0));
}

FDTAB_WRAP(ssize_t, writev, fd, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt))
{
	struct usock *s = fdtab_accel(fd);
	if (!s)
		return real.writev(fd, iov, cnt);
	if (cnt < 0 || cnt > IOV_MAX) {
		usock_put(s);
		errno = EINVAL;
		return -1;
	}
	return done(s, conn_send(s, fd, iov, cnt, 0));
}

FDTAB_WRAP(ssize_t, recv, fd, (int fd, void *buf, size_t n, int flags), (fd, buf, n, flags))
{
	struct usock *s = fdtab_accel(fd);
	return s ? recv1(s, fd, buf, n, flags) : real.recv(fd, buf, n, flags);
}

ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		abort();
	return recv(fd, buf, n, flags);
}

FDTAB_WRAP(ssize_t, send, fd, (int fd, const void *buf, size_t n, int flags), (fd, buf, n, flags))
{
	struct usock *s = fdtab_accel(fd);
	return s ? send1(s, fd, buf, n, flags) : real.send(fd, buf, n, flags);
}

/* A connected TCP socket reports no source address. */
FDTAB_WRAP(ssize_t, recvfrom, fd,
	   (int fd, void *buf, size_t n, int flags, struct sockaddr *from, socklen_t *fl),
	   (fd, buf, n, flags, from, fl))
{
	struct usock *s = fdtab_accel(fd);
	if (!s)
		return real.recvfrom(fd, buf, n, flags, from, fl);
	ssize_t r = recv1(s, fd, buf, n, flags);
	if (r >= 0 && from && fl)
		*fl = 0;
	return r;
}

ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *from, socklen_t *fl)
{
	if (n > buflen)
		abort();
	return recvfrom(fd, buf, n, flags, from, fl);
}

FDTAB_WRAP(ssize_t, sendto, fd,
	   (int fd, const void *buf, size_t n, int flags, const struct sockaddr *to, socklen_t tl),
	   (fd, buf, n, flags, to, tl))
{
	struct usock *s = fdtab_accel(fd);
	return s ? send1(s, fd, buf, n, flags) : real.sendto(fd, buf, n, flags, to, tl);
}

static int iov_ok(const struct msghdr *m)
{
	return m->msg_iovlen <= IOV_MAX && (m->msg_iov || !m->msg_iovlen);
}

ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	struct usock *s = fdtab_accel(fd);
	if (!s)
		return m && m->msg_control && m->msg_controllen && usmc_active()
			       ? fdpass_recvmsg(fd, m, flags)
			       : real.recvmsg(fd, m, flags);
	if (!iov_ok(m)) {
		usock_put(s);
		errno = EMSGSIZE;
		return -1;
	}
	/* The error queue: ERM's completions, else the kernel's own. */
	if (flags & MSG_ERRQUEUE) {
		ssize_t r = erm_recv_errqueue(s, m);
		return done(s, r < 0 && errno == EAGAIN ? real.recvmsg(fd, m, flags) : r);
	}
	int mf = 0;
	ssize_t r = done(s, flags & MSG_OOB ? conn_recv_urg(s, fd, m->msg_iov, (int)m->msg_iovlen,
							      peeking(flags), &mf)
					    : conn_recv(s, fd, m->msg_iov, (int)m->msg_iovlen,
							peeking(flags)));
	if (r >= 0) {
		m->msg_namelen = 0;
		m->msg_controllen = 0;
		m->msg_flags = mf;
	}
	return r;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct usock *s = fdtab_accel(fd);
	int ctl = m && m->msg_control && m->msg_controllen && usmc_active();
	if (!s) {
		/* ERM's commands on a socket not carried through shared memory
		 * fail aloud: the kernel's TCP would ignore them. */
		if (ctl && erm_has_cmsg(m))
			return erm_refuse(fd);
		return ctl ? fdpass_sendmsg(fd, m, flags) : real.sendmsg(fd, m, flags);
	}
	if (!iov_ok(m)) {
		usock_put(s);
		errno = EMSGSIZE;
		return -1;
	}
	if (ctl && erm_has_cmsg(m))
		return done(s, erm_sendmsg(s, fd, m, flags));
	return done(s, conn_send(s, fd, m->msg_iov, (int)m->msg_iovlen, flags));
}

FDTAB_WRAP(int, recvmmsg, fd,
	   (int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *tmo),
	   (fd, v, n, flags, tmo))
{
	struct usock *s = fdtab_accel(fd);
	unsigned int i;

	if (!s)
		return real.recvmmsg(fd, v, n, flags, tmo);
	for (i = 0; i < n; i++) {
		int f = flags & ~MSG_WAITFORONE;
		if (i && (flags & MSG_WAITFORONE))
			f |= MSG_DONTWAIT;
		ssize_t r = conn_recv(s, fd, v[i].msg_hdr.msg_iov, (int)v[i].msg_hdr.msg_iovlen,
				      peeking(f));
		if (r < 0)
			break;
		v[i].msg_len = (unsigned int)r;
		v[i].msg_hdr.msg_namelen = 0;
		v[i].msg_hdr.msg_controllen = 0;
		v[i].msg_hdr.msg_flags = 0;
		if (r == 0)
			break;
	}
	return (int)done(s, i ? (ssize_t)i : -1);
}

FDTAB_WRAP(int, sendmmsg, fd, (int fd, struct mmsghdr *v, unsigned int n, int flags),
	   (fd, v, n, flags))
{
	struct usock *s = fdtab_accel(fd);
	unsigned int i;

	if (!s)
		return real.sendmmsg(fd, v, n, flags);
	for (i = 0; i < n; i++) {
		ssize_t r = conn_send(s, fd, v[i].msg_hdr.msg_iov, (int)v[i].msg_hdr.msg_iovlen, flags);
		if (r < 0)
			break;
		v[i].msg_len = (unsigned int)r;
	}
	return (int)done(s, i ? (ssize_t)i : -1);
}

/* sendfile into an accelerated socket: read the file in chunks and write them into
 * the ring; the offset rules are sendfile's. */
FDTAB_WRAP(ssize_t, sendfile, out, (int out, int in, off_t *off, size_t count),
	   (out, in, off, count))
{
	struct usock *s = fdtab_accel(out);
	char buf[65536];
	size_t total = 0;

	if (!s)
		return real.sendfile(out, in, off, count);
	stat_add(STAT_SENDFILE_CALLS, 1);
	while (total < count) {
		size_t want = count - total < sizeof(buf) ? count - total : sizeof(buf);
		ssize_t r = off ? pread(in, buf, want, *off + (off_t)total) : real.read(in, buf, want);
		if (r <= 0) {
			if (r < 0 && !total) {
				usock_put(s);
				return -1;
			}
			break;
		}
		ssize_t w = conn_send(s, out, &(struct iovec){buf, (size_t)r}, 1, 0);
		/* Sent short: the rest once more, as the kernel's splice does.
		 * Once the connection writes to TCP, that send takes the kernel's
		 * error and the call's count hides it: on TCP the next sendfile()
		 * after a reset fails with EPIPE, where a send() fails with
		 * ECONNRESET. */
		if (w >= 0 && w < r) {
			ssize_t more = conn_send_more(s, out, &(struct iovec){buf + w, (size_t)(r - w)}, 1, 0);
			w += more > 0 ? more : 0;
		}
		if (w < 0) {
			if (!off)
				lseek(in, -(off_t)r, SEEK_CUR);
			if (!total) {
				int e = errno;
				usock_put(s);
				errno = e;
				return -1;
			}
			break;
		}
		total += (size_t)w;
		if (w < r) {
			if (!off)
				lseek(in, -(off_t)(r - w), SEEK_CUR);
			break;
		}
	}
	if (off)
		*off += (off_t)total;
	return done(s, (ssize_t)total);
}

ssize_t sendfile64(int out, int in, off_t *off, size_t count) __attribute__((alias("sendfile")));

/* splice with an accelerated socket on one side: its bytes live in a ring, not in
 * kernel buffers, so they pass through a bounce buffer. */
ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len, unsigned int flags)
{
	struct usock *si = fdtab_accel(in), *so = si ? NULL : fdtab_accel(out);
	char buf[65536];
	int dontwait = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;

	if (!si && !so)
		return real.splice(in, off_in, out, off_out, len, flags);
	stat_add(STAT_SPLICE_CALLS, 1);
	if (len > sizeof(buf))
		len = sizeof(buf);
	if (si) {
		/* Take only what the pipe can hold right now, so nothing is lost. */
		ssize_t r = conn_recv(si, in, &(struct iovec){buf, len}, 1, dontwait | MSG_PEEK);
		if (r > 0) {
			ssize_t w = off_out ? pwrite(out, buf, (size_t)r, *off_out) : real.write(out, buf, (size_t)r);
			if (w > 0) {
				conn_recv(si, in, &(struct iovec){buf, (size_t)w}, 1, MSG_DONTWAIT);
				if (off_out)
					*off_out += w;
			}
			r = w;
		}
		return done(si, r);
	}
	ssize_t r = off_in ? pread(in, buf, len, *off_in) : real.read(in, buf, len);
	if (r <= 0)
		return done(so, r);
	ssize_t w = conn_send(so, out, &(struct iovec){buf, (size_t)r}, 1, dontwait);
	if (w > 0 && off_in)
		*off_in += w;
	/* Bytes taken from a pipe cannot be put back; a short send keeps trying. */
	while (!off_in && w >= 0 && w < r) {
		ssize_t more = conn_send(so, out, &(struct iovec){buf + w, (size_t)(r - w)}, 1, 0);
		if (more < 0)
			break;
		w += more;
	}
	return done(so, w);
}
