/* The local device: memfd arenas, socket-pair doorbells and a Unix seqpacket control
 * channel in the runtime directory (whose permissions are the trust domain). The
 * binding proof is the client's TCP socket itself, passed with its proposal; a
 * peer's death is its channel hanging up. */
#include "dev.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../core/addr.h"
#include "../core/clc.h"
#include "../core/config.h"
#include "../core/lgr.h"
#include "../core/memfd.h"
#include "../core/registry.h"
#include "../core/sys.h"

/* Maps an arena received from a peer only if it can never be shorter than it
 * claims (memfd.h). */
static int lo_arena_map(struct arena *a)
{
	void *p = memfd_map(a->fd, a->size);

	if (!p)
		return -errno;
	a->base = p;
	return 0;
}

/* One arena of USMC_ARENA_SIZE per link group holds its connections' segments:
 * pages are used only as touched. */
static int lo_arena_create(struct arena *a, uint64_t size)
{
	int fd, e;

	if (size < cfg.arena_size)
		size = cfg.arena_size;
	if ((fd = memfd_sealed("usmc-arena", size)) < 0)
		return fd;
	a->fd = fd;
	a->size = size;
	if ((e = lo_arena_map(a)) < 0) {
		real.close(fd);
		a->fd = -1;
		return e;
	}
	a->fd = sys_fd_high(fd);
	return 0;
}

/* The memfd's inode: the same arena handed over twice is mapped once. */
static int lo_arena_ident(struct arena *a)
{
	struct stat st;

	if (fstat(a->fd, &st) < 0 || st.st_size < 0 || (uint64_t)st.st_size < a->size)
		return -1;
	a->ident[0] = (uint64_t)st.st_dev;
	a->ident[1] = (uint64_t)st.st_ino;
	return 0;
}

static void lo_arena_release(struct arena *a)
{
	if (a->fd >= 0)
		real.close(a->fd);
	if (a->base)
		munmap(a->base, a->size);
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

static void lo_doorbell_ring(const struct seg_loc *loc, int fd)
{
	(void)loc;
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

int lo_ctl_listen(const char *path)
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

int lo_ctl_accept(int lfd)
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

static int lo_ctl_hangs_up(int ctl, int ms)
{
	struct pollfd pf = {ctl, 0, 0};

	return ctl >= 0 && real.poll(&pf, 1, ms) == 1 && (pf.revents & (POLLHUP | POLLERR));
}

static int lo_ctl_pollfd(int ctl)
{
	return ctl;
}

/* The process that connected the channel, or listens on it. */
static int lo_ctl_peer_cred(int ctl, struct ucred *cr)
{
	socklen_t l = sizeof(*cr);

	return ctl >= 0 && real.getsockopt(ctl, SOL_SOCKET, SO_PEERCRED, cr, &l) == 0 ? 0 : -1;
}

static void lo_ctl_close(int ctl)
{
	real.close(ctl);
}

/* ------------------------------------------------------------ the endpoint */

/* <rundir>/c-PID-RANDOM.sock, watched with the channels in one epoll instance,
 * which outlives the socket: link groups stay in it. */
static int lo_srv_open(struct dev_srv *ds)
{
	char path[4200];
	uint32_t rnd = 0;

	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
		rnd = (uint32_t)sys_now_ns();
	if (config_rundir_ready() < 0)
		return -1;
	snprintf(ds->name, sizeof(ds->name), "c-%d-%08x.sock", (int)getpid(), rnd);
	snprintf(path, sizeof(path), "%s/%s", cfg.rundir, ds->name);
	if (ds->ep < 0)
		ds->ep = sys_fd_high(real.epoll_create1(EPOLL_CLOEXEC));
	int lfd = lo_ctl_listen(path);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	if (lfd < 0 || ds->ep < 0 || real.epoll_ctl(ds->ep, EPOLL_CTL_ADD, lfd, &ev) < 0) {
		if (lfd >= 0)
			real.close(lfd);
		ds->name[0] = 0;
		return -1;
	}
	ds->lfd = lfd;
	ds->maker = sys_pid();
	return 0;
}

/* Link groups already open keep their channels; new clients find no listener
 * here any more, so the name goes, unless it is still its living maker's. */
static void lo_srv_close(struct dev_srv *ds)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/%s", cfg.rundir, ds->name);
	if (ds->maker == sys_pid() || (kill(ds->maker, 0) < 0 && errno == ESRCH))
		unlink(path);
	real.epoll_ctl(ds->ep, EPOLL_CTL_DEL, ds->lfd, NULL);
	real.close(ds->lfd);
	ds->lfd = -1;
	ds->name[0] = 0;
}

static int lo_srv_accept(struct dev_srv *ds)
{
	return lo_ctl_accept(ds->lfd);
}

static int lo_srv_watch(struct dev_srv *ds, int ctl, void *tag)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};

	return real.epoll_ctl(ds->ep, EPOLL_CTL_ADD, ctl, &ev);
}

static void lo_srv_unwatch(struct dev_srv *ds, int ctl)
{
	real.epoll_ctl(ds->ep, EPOLL_CTL_DEL, ctl, NULL);
}

static int lo_srv_events(struct dev_srv *ds, void **tags, int max)
{
	struct epoll_event ev[64];
	int n = real.epoll_wait(ds->ep, ev, max < 64 ? max : 64, 0);

	for (int i = 0; i < n; i++)
		tags[i] = ev[i].data.ptr;
	return n < 0 ? 0 : n;
}

/* The instance came with the fork: the parent's, naming link groups by addresses
 * that mean something only in the parent. The child gets its own, watching the
 * shared control socket for new link groups only: the parent's channels stay the
 * parent's, and their connections that the child holds need them no more (a
 * dead peer's FIN still arrives on TCP). */
static void lo_srv_atfork_child(struct dev_srv *ds)
{
	if (ds->ep < 0)
		return;
	real.close(ds->ep);
	ds->ep = sys_fd_high(real.epoll_create1(EPOLL_CLOEXEC));
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	if (ds->ep >= 0 && ds->lfd >= 0)
		real.epoll_ctl(ds->ep, EPOLL_CTL_ADD, ds->lfd, &ev);
}

/* The names of the client socket that came with the proposal: nobody can attach
 * memory to a connection they do not hold. */
static int lo_bind_names(const int *fds, const struct seg_hdr *h, struct addr *local,
			 struct addr *peer)
{
	(void)h;
	return addr_sock_names(fds[CLC_FD_TCP], local, peer);
}

const struct dev_ops dev_lo = {
	.name = "lo",
	.kind = DEV_LO,
	.flags = DEV_F_PASSES_FDS | DEV_F_FUTEX | DEV_F_ONE_KERNEL,
	/* An ending process closes its TCP socket first (the channel's descriptor
	 * is among its highest), and the rest follows within microseconds. */
	.death_wait_ms = 20,
	.arena_create = lo_arena_create,
	.arena_map = lo_arena_map,
	.arena_ident = lo_arena_ident,
	.arena_release = lo_arena_release,
	.doorbell_create = lo_doorbell_create,
	.doorbell_ring = lo_doorbell_ring,
	.doorbell_clear = lo_doorbell_clear,
	.ctl_connect = lo_ctl_connect,
	.ctl_send = lo_ctl_send,
	.ctl_recv = lo_ctl_recv,
	.ctl_hangs_up = lo_ctl_hangs_up,
	.ctl_pollfd = lo_ctl_pollfd,
	.ctl_peer_cred = lo_ctl_peer_cred,
	.ctl_close = lo_ctl_close,
	.srv_open = lo_srv_open,
	.srv_close = lo_srv_close,
	.srv_accept = lo_srv_accept,
	.srv_watch = lo_srv_watch,
	.srv_unwatch = lo_srv_unwatch,
	.srv_events = lo_srv_events,
	.srv_atfork_child = lo_srv_atfork_child,
	.bind_names = lo_bind_names,
	.reg_add = registry_add,
	.reg_remove = registry_remove,
	.reg_lookup = registry_lookup,
	.reg_still = registry_still,
	.reg_forget = registry_forget,
};
