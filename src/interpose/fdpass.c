/* Accelerated sockets passed over Unix sockets (SCM_RIGHTS) keep their state.
 *
 * When a message passes accelerated sockets to a process that runs usmc, the
 * sender makes each a shared end (as at fork: the receiver becomes one more
 * holder) and appends to the message's descriptors inheritable copies of what
 * each needs (arena, doorbell, holders' page) and, last, a memfd describing
 * them. The receiver's library recognises that memfd, takes the connections up,
 * and hands the application its own descriptors only, as if nothing had been
 * added. A receiver that does not run usmc gets the message unchanged. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/conn.h"
#include "../core/sys.h"
#include "fdpass.h"
#include "fdtab.h"

#define PASS_MAGIC 0x53534150u /* "PASS" */
/* The description is sealed: an application's own file passed last, whatever it
 * holds, is never taken for one. */
#define PASS_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
/* Sockets handed over in one message, and what travels with each. */
#define PASS_SOCKS 16
#define PASS_EXTRA 3
#define PASS_FDS_MAX (PASS_SOCKS * PASS_EXTRA + 1)

struct pass_hdr {
	uint32_t magic;
	uint32_t count;     /* records that follow */
	uint32_t extra;     /* descriptors appended to the message, the memfd included */
	uint32_t pad;
};

/* In a record, descriptors are indexes into the message's descriptor array. */
static void record_fds(struct conn_export *x, int *fds)
{
	int *f[] = {&x->fd, &x->arena_fd, &x->bell, &x->hold_fd};

	for (unsigned i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		*f[i] = *f[i] < 0 ? -1 : fds[*f[i]];
}

/* Whether the process at the other end of a Unix socket runs usmc. */
static int peer_runs_usmc(int fd)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);
	char path[64], buf[8192];
	int found = 0;

	if (real.getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0 || cr.pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)cr.pid);
	int m = real.open(path, O_RDONLY | O_CLOEXEC);
	if (m < 0)
		return 0;
	/* The library's name may straddle two reads: keep the tail. */
	size_t keep = 0;
	ssize_t n;
	while (!found && (n = real.read(m, buf + keep, sizeof(buf) - 1 - keep)) > 0) {
		buf[keep + (size_t)n] = 0;
		found = strstr(buf, "/libusmc") != NULL;
		size_t len = keep + (size_t)n;
		keep = len < 16 ? len : 16;
		memmove(buf, buf + len - keep, keep);
	}
	real.close(m);
	return found;
}

/* The last SCM_RIGHTS header of a message, or NULL. */
static struct cmsghdr *rights_of(struct msghdr *m)
{
	struct cmsghdr *last = NULL;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			last = c;
	return last;
}

static int rights_count(const struct cmsghdr *c)
{
	return (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
}

ssize_t fdpass_sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct conn_export x[PASS_SOCKS];
	struct usock *shared[PASS_SOCKS];
	int n = 0, extra[PASS_FDS_MAX], nextra = 0;
	struct msghdr mm = *m;
	struct cmsghdr *c = rights_of(&mm);

	if (!c)
		return real.sendmsg(fd, m, flags);
	int nfds = rights_count(c), *fds = (int *)CMSG_DATA(c);
	for (int i = 0; i < nfds && n < PASS_SOCKS; i++) {
		struct obj *o = fdtab_get(fds[i]);
		struct usock *s = sock_of(o);
		int k = 0;
		while (s && k < n && shared[k] != s)
			k++;
		if (s && k < n) {
			/* The same connection again: one record for it; the receiver
			 * finds this descriptor by its socket. */
			obj_put(o);
			continue;
		}
		if (s)
			conn_settle(s, fds[i]);
		if (s && conn_attached(s) && (n || peer_runs_usmc(fd)) &&
		    conn_share(s) == 0) {
			if (conn_export(s, i, &x[n]) == 0) {
				shared[n++] = s;
				continue;
			}
			conn_unshare(s);
		}
		if (o)
			obj_put(o);
	}
	if (!n)
		return real.sendmsg(fd, m, flags);

	/* The records name descriptors by their index in the message. */
	struct pass_hdr h = {PASS_MAGIC, (uint32_t)n, 0, 0};
	for (int k = 0; k < n; k++) {
		int *f[PASS_EXTRA] = {&x[k].arena_fd, &x[k].bell, &x[k].hold_fd};
		for (int j = 0; j < PASS_EXTRA; j++)
			if (*f[j] >= 0) {
				extra[nextra] = *f[j];
				*f[j] = nfds + nextra++;
			}
	}
	ssize_t r = -1;
	int e = ENOMEM, memfd = memfd_create("usmc-pass", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	h.extra = (uint32_t)nextra + 1;
	size_t ctl_len = mm.msg_controllen + CMSG_SPACE(sizeof(int) * h.extra);
	char *ctl = calloc(1, ctl_len);
	size_t xlen = n * sizeof(x[0]);
	if (memfd >= 0 && ctl && pwrite(memfd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
	    pwrite(memfd, x, xlen, sizeof(h)) == (ssize_t)xlen &&
	    real.fcntl(memfd, F_ADD_SEALS, PASS_SEALS) == 0) {
		/* Every header as it was, the last SCM_RIGHTS one grown by the extras
		 * (it is rebuilt at the end). */
		size_t off = 0;
		for (struct cmsghdr *k = CMSG_FIRSTHDR(&mm); k; k = CMSG_NXTHDR(&mm, k))
			if (k != c) {
				memcpy(ctl + off, k, k->cmsg_len);
				off += CMSG_ALIGN(k->cmsg_len);
			}
		struct cmsghdr *rc = (struct cmsghdr *)(void *)(ctl + off);
		rc->cmsg_level = SOL_SOCKET;
		rc->cmsg_type = SCM_RIGHTS;
		rc->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)(nfds + (int)h.extra));
		int *out = (int *)CMSG_DATA(rc);
		memcpy(out, fds, sizeof(int) * (size_t)nfds);
		memcpy(out + nfds, extra, sizeof(int) * (size_t)nextra);
		out[nfds + nextra] = memfd;
		mm.msg_control = ctl;
		mm.msg_controllen = off + CMSG_SPACE(sizeof(int) * (size_t)(nfds + (int)h.extra));
		r = real.sendmsg(fd, &mm, flags);
		e = errno;
	}
	for (int k = 0; k < n; k++) {
		if (r < 0)
			conn_unshare(shared[k]);
		usock_put(shared[k]);
	}
	for (int k = 0; k < nextra; k++)
		real.close(extra[k]);
	if (memfd >= 0)
		real.close(memfd);
	free(ctl);
	errno = e;
	return r;
}

/* Takes up the connections a message handed over, and drops the descriptors that
 * came for usmc from its SCM_RIGHTS header. Returns whether there were any. */
static int take_up(struct cmsghdr *c)
{
	int nfds = rights_count(c), *fds = (int *)CMSG_DATA(c);
	struct pass_hdr h;
	struct stat st;
	int memfd = nfds ? fds[nfds - 1] : -1;

	if (memfd < 0 || fstat(memfd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    real.fcntl(memfd, F_GET_SEALS) != PASS_SEALS ||
	    pread(memfd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || h.magic != PASS_MAGIC ||
	    h.count > PASS_SOCKS || h.extra > (uint32_t)nfds || h.extra > PASS_FDS_MAX)
		return 0;
	int first = nfds - (int)h.extra, at[PASS_SOCKS];
	unsigned char taken[PASS_FDS_MAX] = {0};
	struct usock *up[PASS_SOCKS] = {NULL};
	for (uint32_t i = 0; i < h.count; i++) {
		struct conn_export x;
		if (pread(memfd, &x, sizeof(x), (off_t)(sizeof(h) + i * sizeof(x))) != (ssize_t)sizeof(x))
			break;
		/* The import owns the claimed ones from here: it keeps them or closes them. */
		if (!conn_export_claim(&x, first, nfds - 1, taken))
			continue;
		at[i] = x.fd;
		record_fds(&x, fds);
		up[i] = conn_import(&x);
		if (up[i] && fdtab_set(x.fd, &up[i]->o) < 0) {
			usock_put(up[i]);
			up[i] = NULL;
		}
	}
	/* The application's other descriptors of a connection taken up (one socket
	 * passed twice) get it too: found by the socket itself, not by anything the
	 * sender wrote. */
	for (uint32_t i = 0; i < h.count; i++) {
		struct stat rs, os;
		if (!up[i] || fstat(fds[at[i]], &rs) < 0)
			continue;
		for (int j = 0; j < first; j++)
			if (j != at[i] && fstat(fds[j], &os) == 0 && os.st_ino == rs.st_ino &&
			    os.st_dev == rs.st_dev)
				fdtab_alias(fds[j], &up[i]->o);
	}
	for (int i = first; i < nfds; i++)
		if (!taken[i - first])
			real.close(fds[i]);
	c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)first);
	return 1;
}

ssize_t fdpass_recvmsg(int fd, struct msghdr *m, int flags)
{
	struct msghdr mm = *m;
	size_t room = m->msg_controllen + CMSG_SPACE(sizeof(int) * PASS_FDS_MAX);
	char *ctl = calloc(1, room);

	if (!ctl)
		return real.recvmsg(fd, m, flags);
	mm.msg_control = ctl;
	mm.msg_controllen = room;
	ssize_t r = real.recvmsg(fd, &mm, flags);
	if (r < 0) {
		int e = errno;
		free(ctl);
		errno = e;
		return r;
	}
	struct cmsghdr *c = rights_of(&mm);
	/* The sender put the grown header last: the message now ends with it. */
	if (c && take_up(c))
		mm.msg_controllen = (size_t)((char *)c - ctl) + CMSG_SPACE(c->cmsg_len - CMSG_LEN(0));
	/* Hand the application what fits in its own buffer, as the kernel would. */
	size_t off = 0;
	int trunc = 0;
	for (struct cmsghdr *k = CMSG_FIRSTHDR(&mm); k; k = CMSG_NXTHDR(&mm, k)) {
		if (!trunc && off + k->cmsg_len <= m->msg_controllen) {
			memcpy((char *)m->msg_control + off, k, k->cmsg_len);
			off += CMSG_ALIGN(k->cmsg_len);
			continue;
		}
		trunc = 1;
		if (k->cmsg_level == SOL_SOCKET && k->cmsg_type == SCM_RIGHTS)
			for (int i = 0; i < rights_count(k); i++)
				real.close(((int *)CMSG_DATA(k))[i]);
	}
	m->msg_controllen = off < m->msg_controllen ? off : m->msg_controllen;
	m->msg_namelen = mm.msg_namelen;
	m->msg_flags = mm.msg_flags | (trunc ? MSG_CTRUNC : 0);
	free(ctl);
	return r;
}
