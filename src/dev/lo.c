/* The local device: memfd arenas, socket-pair doorbells and a Unix seqpacket control
 * channel in the runtime directory (whose permissions are the trust domain). */
#include "dev.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../core/sys.h"

/* The arena is sealed at its size: a peer that could shrink it would make our
 * next touch of its pages a SIGBUS. */
#define ARENA_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static int lo_arena_create(uint64_t size)
{
	int fd = memfd_create("usmc-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0 || real.fcntl(fd, F_ADD_SEALS, ARENA_SEALS) < 0) {
		int e = errno;
		real.close(fd);
		return -e;
	}
	return fd;
}

/* Maps an arena received from a peer only if it can never be shorter than it
 * claims. */
static void *lo_arena_map(int fd, uint64_t size)
{
	struct stat st;
	int seals = real.fcntl(fd, F_GET_SEALS);

	if (seals < 0 || (seals & ARENA_SEALS) != ARENA_SEALS || fstat(fd, &st) < 0 ||
	    (uint64_t)st.st_size < size)
		return NULL;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void lo_arena_unmap(void *base, uint64_t size)
{
	munmap(base, size);
}

/* A socket pair, not an eventfd: file status flags are shared by every holder of
 * a descriptor, so a peer could make an eventfd blocking and stall whoever rings
 * it. MSG_DONTWAIT holds whatever the flags say. */
static int lo_doorbell_create(int fds[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) < 0)
		return -errno;
	return 0;
}

static void lo_doorbell_ring(int fd)
{
	/* A full pair means the bell is ringing already. */
	while (real.send(fd, "", 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

static void lo_doorbell_clear(int fd)
{
	char buf[64];

	while (real.recv(fd, buf, sizeof(buf), MSG_DONTWAIT) == (ssize_t)sizeof(buf))
		;
}

/* A path starting with '@' names a socket in the abstract namespace. */
static int sun_of(const char *path, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun->sun_path))
		return -ENAMETOOLONG;
	strcpy(sun->sun_path, path);
	if (path[0] == '@')
		sun->sun_path[0] = 0;
	return 0;
}

static int lo_ctl_listen(const char *path)
{
	struct sockaddr_un sun;
	int fd, e = sun_of(path, &sun);

	if (e)
		return e;
	fd = sys_fd_high(real.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
	if (fd < 0)
		return -errno;
	if (path[0] != '@')
		unlink(path);
	if (real.bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    real.listen(fd, 4096) < 0) {
		e = -errno;
		real.close(fd);
		return e;
	}
	return fd;
}

#define CTL_SNDBUF (2 << 20)

static int lo_ctl_connect(const char *path)
{
	struct sockaddr_un sun;
	int fd, e = sun_of(path, &sun);

	if (e)
		return e;
	/* Nonblocking: a full backlog means the listener is overwhelmed or stuck, and
	 * the answer to that is plain TCP now, not waiting. */
	fd = sys_fd_high(real.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
	if (fd < 0)
		return -errno;
	/* Proposals wait here until the server accepts their connections, and the
	 * kernel counts them (a few hundred bytes each) against our send buffer: a
	 * client opening a thousand connections at once needs room for as many.
	 * The kernel caps the request at net.core.wmem_max. */
	int sndbuf = CTL_SNDBUF;
	real.setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	if (real.connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		e = -errno;
		real.close(fd);
		return e;
	}
	return fd;
}

static int lo_ctl_accept(int lfd)
{
	int fd = real.accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	return fd < 0 ? -errno : sys_fd_high(fd);
}

static ssize_t lo_ctl_send(int fd, const void *msg, size_t len, const int *fds, int nfds)
{
	struct iovec iov = {(void *)msg, len};
	union {
		char buf[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (nfds > 8)
		return -EINVAL;
	if (nfds) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	do
		n = real.sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

static ssize_t lo_ctl_recv(int fd, void *msg, size_t len, int *fds, int *nfds)
{
	struct iovec iov = {msg, len};
	union {
		char buf[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	int room = *nfds, got = 0;
	ssize_t n;

	do
		n = real.recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* Take every descriptor we were sent, even unexpected ones, so none leaks. */
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int *p = (int *)CMSG_DATA(c);
		for (int i = 0; i < k; i++) {
			int f;
			memcpy(&f, p + i, sizeof(f));
			if (got < room)
				fds[got] = f;
			else
				real.close(f);
			got++;
		}
	}
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || got > room) {
		for (int i = 0; i < got && i < room; i++)
			real.close(fds[i]);
		*nfds = 0;
		return -EPROTO;
	}
	*nfds = got;
	return n;
}

const struct dev_ops dev_lo = {
	.name = "lo",
	.arena_create = lo_arena_create,
	.arena_map = lo_arena_map,
	.arena_unmap = lo_arena_unmap,
	.doorbell_create = lo_doorbell_create,
	.doorbell_ring = lo_doorbell_ring,
	.doorbell_clear = lo_doorbell_clear,
	.ctl_listen = lo_ctl_listen,
	.ctl_connect = lo_ctl_connect,
	.ctl_accept = lo_ctl_accept,
	.ctl_send = lo_ctl_send,
	.ctl_recv = lo_ctl_recv,
};
