/* Socket life cycle: creation, connect, listen, accept, descriptor duplication,
 * options that change how usmc must behave, shutdown and close. */
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../core/accept.h"
#include "../core/admit.h"
#include "../core/conn.h"
#include "../core/socktab.h"
#include "../core/sys.h"
#include "epoll.h"
#include "erm.h"
#include "fdtab.h"
#include "init.h"

#include "usmc/usmc.h"

int socket(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	int tcp = (domain == AF_INET || domain == AF_INET6) && base == SOCK_STREAM &&
		  (protocol == 0 || protocol == IPPROTO_TCP || protocol == IPPROTO_SMC);
	int smc = tcp && protocol == IPPROTO_SMC;

	fdtab_run_later();
	int fd = real.socket(domain, type, smc ? IPPROTO_TCP : protocol);
	if (fd < 0 || !tcp || !usmc_active() || !admit_socket(smc))
		return fd;
	if (!smc) {
		fdtab_set_fresh(fd, (type & SOCK_NONBLOCK ? FRESH_NONBLOCK : 0) |
					    (domain == AF_INET6 ? FRESH_INET6 : 0));
		return fd;
	}
	/* The program asked for usmc: it has its state from the start. */
	struct usock *s = usock_new(domain, (type & SOCK_NONBLOCK) != 0);
	if (s)
		s->smc = smc;
	if (s && fdtab_set(fd, &s->o) < 0)
		usock_put(s);
	return fd;
}

/* A socket that will never use shared memory leaves the table, so its calls cost
 * nothing more than a lookup. */
static void forget_if_plain(int fd, struct usock *s)
{
	if (atomic_load(&s->mode) != MODE_PLAIN || s->regs)
		return;
	struct obj *o = fdtab_take(fd);
	if (o)
		obj_put(o);
}

/* A fresh socket's connect() where usmc has nothing to offer: the socket leaves
 * the table before the kernel's connect, so that a thread registering it with
 * epoll meanwhile finds a plain socket, not one waiting to be settled. 1 if the
 * socket may meet usmc after all, or became more than fresh meanwhile. */
static int connect_fresh(int fd, unsigned tag, const struct sockaddr *addr, socklen_t len)
{
	enum decline why;

	if (!conn_fresh_stays_plain(fresh_family(tag), fd, addr, len, &why) ||
	    !(tag = fdtab_unfresh(fd)))
		return 1;
	int r = real.connect(fd, addr, len), e = errno;
	if (r == 0 || e == EINPROGRESS || e == EINTR)
		conn_fresh_fell_back(fd, why);
	else /* refused: the socket may connect again, maybe to usmc */
		fdtab_refresh(fd, tag);
	errno = e;
	return r;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	unsigned tag = fdtab_fresh(fd);
	int r;

	if (tag && (r = connect_fresh(fd, tag, addr, len)) != 1)
		return r;
	struct obj *o = fdtab_get_made(fd);
	struct usock *s = sock_of(o);

	if (!s) {
		if (o)
			obj_put(o);
		return real.connect(fd, addr, len);
	}
	r = conn_connect(s, fd, addr, len);
	int e = errno;
	epoll_sock_settled(s);
	if (atomic_fetch_add(&s->o.fdrefs, 0) == 1)
		forget_if_plain(fd, s);
	obj_put(o);
	errno = e;
	return r;
}

int listen(int fd, int backlog)
{
	struct obj *o = fdtab_get_made(fd);
	struct usock *s = sock_of(o);

	if (!s) {
		if (o)
			obj_put(o);
		return real.listen(fd, backlog);
	}
	int r = conn_listen(s, fd, backlog);
	int e = errno;
	epoll_sock_settled(s);
	obj_put(o);
	errno = e;
	return r;
}

static int accept_common(int lfd, struct sockaddr *addr, socklen_t *alen, int flags)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct obj *o;
	struct usock *l;
	int fd;

	/* Again from the descriptor after an SA_RESTART handler, as the kernel
	 * restarts the call: the handler may have closed it, or put another socket
	 * in its place to make accept() fail (php-fpm's graceful stop does). */
	do {
		o = fdtab_get(lfd);
		l = sock_of(o);
		if (!l || atomic_load(&l->mode) != MODE_LISTEN) {
			if (o)
				obj_put(o);
			return real.accept4(lfd, addr, alen, flags);
		}
		/* Only a listener inherited across fork may have siblings to answer,
		 * and only a device that wakes nobody by itself needs our sleeps to
		 * wake: otherwise a process sleeps in the kernel's accept(), which
		 * wakes it sooner. Blocking as the file says: its flag may have
		 * changed in another process. */
		int blocking = !l->nonblock && accept_in_library(l) &&
			       !(real.fcntl(lfd, F_GETFL) & O_NONBLOCK);
		sl = sizeof(ss);
		fd = blocking ? accept_blocking(l, lfd, (struct sockaddr *)&ss, &sl, flags)
			      : real.accept4(lfd, (struct sockaddr *)&ss, &sl, flags);
		if (fd == ACCEPT_RESTART)
			obj_put(o);
	} while (fd == ACCEPT_RESTART);
	int e = errno;
	if (fd >= 0) {
		struct usock *s = usock_new(l->family, (flags & SOCK_NONBLOCK) != 0);
		if (s) {
			conn_accepted(l, s, fd, (struct sockaddr *)&ss);
			if (atomic_load(&s->mode) == MODE_PLAIN || fdtab_set(fd, &s->o) < 0)
				usock_put(s);
		}
		if (addr && alen) {
			memcpy(addr, &ss, sl < *alen ? sl : *alen);
			*alen = sl;
		}
	}
	obj_put(o);
	errno = e;
	return fd;
}

int accept(int fd, struct sockaddr *addr, socklen_t *alen)
{
	return accept_common(fd, addr, alen, 0);
}

int accept4(int fd, struct sockaddr *addr, socklen_t *alen, int flags)
{
	return accept_common(fd, addr, alen, flags);
}

/* What the last descriptor of a listener leaves to do once closed: whether the listening
 * socket lives on in another process is known only then. */
static void listener_gone(struct obj *o, unsigned long ino)
{
	conn_listener_closed((struct usock *)o, ino);
	obj_put(o);
}

static void put(struct obj *o, unsigned long unused)
{
	(void)unused;
	obj_put(o);
}

/* fd no longer names o: close_fd(arg) closes it (close, or the dup2 that replaces it). The
 * last descriptor of a connection closes it, in two halves around the kernel's close; the
 * last of a listener may take it out of the registry. Inside a signal handler the descriptor
 * goes at once and the rest waits for the next call outside one (fdtab_release_later): a
 * listener's close is then async-signal-safe, as php-fpm's workers need it, which close
 * theirs in their SIGQUIT handler. A connection's is not: its close takes locks. */
static int release_fd(int fd, struct obj *o, int (*close_fd)(void *), void *arg)
{
	struct usock *s = sock_of(o);
	void (*release)(struct obj *, unsigned long) = put;
	unsigned long ino = 0;
	int last = atomic_fetch_sub(&o->fdrefs, 1) == 1, finish = 0;

	if (s && atomic_load(&s->mode) == MODE_LISTEN) {
		struct stat st;
		socktab_closed(fd);
		if (last) {
			ino = fstat(fd, &st) == 0 ? (unsigned long)st.st_ino : 0;
			release = listener_gone;
		}
	} else {
		finish = last && s && conn_close(s, fd);
	}
	int r = close_fd(arg), e = errno;

	if (finish)
		conn_close_finish(s);
	if (sys_in_signal())
		fdtab_release_later(o, release, ino);
	else
		release(o, ino);
	errno = e;
	return r;
}

static int close_one(void *fd)
{
	return real.close(*(int *)fd);
}

int close(int fd)
{
	fdtab_run_later();
	struct obj *o = fdtab_take(fd);

	return o ? release_fd(fd, o, close_one, &fd) : real.close(fd);
}

/* close_range() and closefrom() close in the kernel, out of close()'s sight:
 * the tracked descriptors among them go through close() first, so that their
 * connections end as they would one by one and their numbers come back clean. */
static void close_tracked(unsigned first, unsigned last)
{
	int stack[64], *fds = stack;
	size_t n = fdtab_range(first, last, stack, 64);

	if (n > 64 && (fds = malloc(n * sizeof(*fds))))
		n = fdtab_range(first, last, fds, n);
	else if (n > 64)
		n = 64;
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	if (fds != stack)
		free(fds);
}

int close_range(unsigned first, unsigned last, int flags)
{
	/* CLOSE_RANGE_CLOEXEC closes nothing now; CLOSE_RANGE_UNSHARE closes in a
	 * table of this thread's own, where the other threads' sockets live on. */
	if (!(flags & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) && first <= last)
		close_tracked(first, last);
	if (!real.close_range)
		return (int)syscall(SYS_close_range, first, last, flags);
	return real.close_range(first, last, flags);
}

void closefrom(int lowfd)
{
	if (lowfd < 0)
		return;
	close_tracked((unsigned)lowfd, ~0u);
	if (real.closefrom)
		real.closefrom(lowfd);
	else
		syscall(SYS_close_range, (unsigned)lowfd, ~0u, 0);
}

static int dup_track(int oldfd, int newfd)
{
	struct obj *o;

	if (newfd < 0)
		return newfd;
	o = fdtab_get_made(oldfd);
	if (o) {
		fdtab_alias(newfd, o);
		obj_put(o);
	}
	return newfd;
}

int dup(int fd)
{
	return dup_track(fd, real.dup(fd));
}

struct dup_args {
	int oldfd, newfd, flags, three;
};

static int dup_call(void *arg)
{
	struct dup_args *a = arg;

	return a->three ? real.dup3(a->oldfd, a->newfd, a->flags) : real.dup2(a->oldfd, a->newfd);
}

static int dup_over(int oldfd, int newfd, int flags, int three)
{
	struct dup_args a = {oldfd, newfd, flags, three};

	if (oldfd == newfd)
		return three ? (errno = EINVAL, -1) : real.dup2(oldfd, newfd);
	fdtab_run_later();
	struct obj *old = fdtab_take(newfd);
	/* dup2() closes what newfd named: the connection's close wraps it. */
	return dup_track(oldfd, old ? release_fd(newfd, old, dup_call, &a) : dup_call(&a));
}

int dup2(int oldfd, int newfd)
{
	return dup_over(oldfd, newfd, 0, 0);
}

int dup3(int oldfd, int newfd, int flags)
{
	return dup_over(oldfd, newfd, flags, 1);
}

/* O_NONBLOCK as the open file has it now: in fd's state, or in its tag. */
static void note_nonblock(int fd, int on)
{
	if (fdtab_fresh_nonblock(fd, on))
		return;
	struct obj *o = fdtab_get(fd);
	struct usock *s = sock_of(o);
	if (s)
		s->nonblock = on;
	if (o)
		obj_put(o);
}

/* The socket's owner, who gets SIGURG, as F_SETOWN and its equivalents take
 * it: a pid, or minus a process group. */
static void note_owner(int fd, int type, pid_t id)
{
	struct obj *o = fdtab_get_made(fd);
	struct usock *s = sock_of(o);

	if (s)
		conn_set_owner(s, id < 0 ? F_OWNER_PGRP : type, id < 0 ? -id : id);
	if (o)
		obj_put(o);
}

int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);

	int r = real.fcntl(fd, cmd, arg);
	if (r < 0 || !fdtab_slot(fd))
		return r;
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		return dup_track(fd, r);
	if (cmd == F_SETFL)
		note_nonblock(fd, ((long)arg & O_NONBLOCK) != 0);
	else if (cmd == F_SETOWN)
		note_owner(fd, F_OWNER_PID, (pid_t)(long)arg);
	else if (cmd == F_SETOWN_EX)
		note_owner(fd, ((struct f_owner_ex *)arg)->type, ((struct f_owner_ex *)arg)->pid);
	return r;
}

int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);

	if (!fdtab_slot(fd))
		return real.ioctl(fd, req, arg);
	struct obj *o = fdtab_get(fd);
	struct usock *s = sock_of(o);
	int r;

	if (s && conn_accel(s) &&
	    (req == FIONREAD || req == TIOCOUTQ || req == SIOCOUTQNSD || req == SIOCATMARK) && arg) {
		r = req == FIONREAD	 ? conn_fionread(s, fd, arg)
		    : req == SIOCATMARK ? conn_atmark(s, fd, arg)
					: conn_outq(s, fd, arg);
	} else {
		r = real.ioctl(fd, req, arg);
		if (r == 0 && req == FIONBIO && arg)
			note_nonblock(fd, *(int *)arg != 0);
		else if (r == 0 && (req == FIOSETOWN || req == SIOCSPGRP) && arg)
			note_owner(fd, F_OWNER_PID, *(pid_t *)arg);
	}
	if (o) {
		int e = errno;
		obj_put(o);
		errno = e;
	}
	return r;
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	if (level == SOL_SMC && usmc_active())
		return erm_setsockopt(fd, name, val, len);
	int r = real.setsockopt(fd, level, name, val, len);
	int tcp = level == IPPROTO_TCP && name == TCP_NOTSENT_LOWAT;
	if (r < 0 || !val || (level != SOL_SOCKET && !tcp) ||
	    (!tcp && name != SO_RCVTIMEO && name != SO_SNDTIMEO && name != SO_SNDBUF &&
	     name != SO_RCVBUF && name != SO_SNDBUFFORCE && name != SO_RCVBUFFORCE &&
	     name != SO_RCVLOWAT && name != SO_LINGER && name != SO_OOBINLINE))
		return r;
	/* What an accelerated connection would do differently: its state records it. */
	struct obj *o = fdtab_get_made(fd);
	struct usock *s = sock_of(o);
	if (s) {
		if ((name == SO_RCVTIMEO || name == SO_SNDTIMEO) && !tcp &&
		    len >= sizeof(struct timeval))
			memcpy(name == SO_RCVTIMEO ? &s->rcvtimeo : &s->sndtimeo, val,
			       sizeof(struct timeval));
		else if (tcp && len >= sizeof(int))
			conn_set_limit(s, fd, CONN_NOTSENT_LOWAT, *(const int *)val);
		else if ((name == SO_SNDBUF || name == SO_SNDBUFFORCE) && len >= sizeof(int))
			conn_set_limit(s, fd, CONN_SNDBUF, *(const int *)val);
		else if ((name == SO_RCVBUF || name == SO_RCVBUFFORCE) && len >= sizeof(int))
			conn_set_limit(s, fd, CONN_RCVBUF, *(const int *)val);
		else if (name == SO_RCVLOWAT && len >= sizeof(int))
			conn_set_limit(s, fd, CONN_RCVLOWAT, *(const int *)val);
		else if (name == SO_OOBINLINE && len >= sizeof(int))
			s->oobinline = *(const int *)val != 0;
		else if (name == SO_LINGER && len >= sizeof(struct linger))
			s->abortive = ((const struct linger *)val)->l_onoff &&
				      !((const struct linger *)val)->l_linger;
	}
	if (o)
		obj_put(o);
	return r;
}

/* Only level SOL_SMC is the library's: ERM (usmc-erm(3)). */
int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	if (level == SOL_SMC && usmc_active())
		return erm_getsockopt(fd, name, val, len);
	return real.getsockopt(fd, level, name, val, len);
}

FDTAB_WRAP(int, shutdown, fd, (int fd, int how), (fd, how))
{
	struct obj *o = fdtab_get(fd);
	struct usock *s = sock_of(o);
	int r;

	if (s && conn_accel(s))
		r = conn_shutdown(s, fd, how);
	else
		r = real.shutdown(fd, how);
	if (o) {
		int e = errno;
		obj_put(o);
		errno = e;
	}
	return r;
}
