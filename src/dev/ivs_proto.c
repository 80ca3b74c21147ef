#include "ivs_proto.h"

#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "../core/sys.h"

int ivsp_send(int sock, int64_t v, int fd)
{
	uint64_t le = htole64((uint64_t)v);
	struct iovec iov = {&le, sizeof(le)};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(h), &fd, sizeof(int));
	}
	/* Never blocks: a client that does not read is not worth waiting for. */
	ssize_t n = real.sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n == (ssize_t)sizeof(le))
		return 0;
	return n < 0 ? -errno : -EAGAIN;
}

/* Closes every descriptor the ancillary data of msg carries; returns how many
 * SCM_RIGHTS descriptors there were, the first in *fd (not closed), and whether
 * anything else came in *other. */
static int take_fds(struct msghdr *msg, int *fd, int *other)
{
	int n = 0;

	*fd = -1;
	*other = (msg->msg_flags & MSG_CTRUNC) != 0;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(msg); h; h = CMSG_NXTHDR(msg, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) {
			*other = 1;
			continue;
		}
		size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int x;
			memcpy(&x, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
			if (n++ == 0)
				*fd = x;
			else
				real.close(x);
		}
	}
	return n;
}

int ivsp_recv(int sock, int64_t *v, int *fd)
{
	uint64_t le;
	struct iovec iov = {&le, sizeof(le)};
	union {
		struct cmsghdr h;
		/* Room for a few more than the one allowed, so that extra ones are
		 * received, and closed, rather than cut off unseen. */
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} ctl;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf)};
	int other;

	*fd = -1;
	ssize_t n = real.recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	int nfds = take_fds(&msg, fd, &other);
	if (n == 0 && !nfds)
		return 0;
	/* A message comes whole: its eight bytes are written at once, and a
	 * stream never splits so few. */
	if (n != (ssize_t)sizeof(le) || nfds > 1 || other) {
		if (*fd >= 0)
			real.close(*fd);
		*fd = -1;
		return -EPROTO;
	}
	*v = (int64_t)le64toh(le);
	return 1;
}

void ivsp_client_init(struct ivsp_client *c)
{
	memset(c, 0, sizeof(*c));
	c->self = -1;
	c->memory = -1;
}

static struct ivsp_peer *find(struct ivsp_client *c, int64_t id)
{
	for (int i = 0; i < c->npeers; i++)
		if (c->peers[i].id == id)
			return &c->peers[i];
	return NULL;
}

const struct ivsp_peer *ivsp_client_peer(const struct ivsp_client *c, int64_t id)
{
	return find((struct ivsp_client *)c, id);
}

static void forget(struct ivsp_client *c, struct ivsp_peer *p)
{
	for (int i = 0; i < p->nfd; i++)
		real.close(p->fd[i]);
	*p = c->peers[--c->npeers];
}

/* A vector of peer id: kept while there is room, else closed (that peer is
 * then polled, as one without a doorbell). */
static void add_vector(struct ivsp_client *c, int64_t id, int fd)
{
	struct ivsp_peer *p = find(c, id);

	if (!p && c->npeers < IVSP_PEERS_MAX) {
		p = &c->peers[c->npeers++];
		p->id = id;
		p->nfd = 0;
	}
	if (p && p->nfd < IVSP_VECTORS_MAX) {
		p->fd[p->nfd++] = fd;
		return;
	}
	real.close(fd);
	c->dropped++;
}

int ivsp_client_take(struct ivsp_client *c, int64_t v, int fd, const char **why)
{
	const char *bad = NULL;

	switch (c->stage) {
	case IVSP_WANT_VERSION:
		if (v != IVSP_VERSION || fd >= 0)
			bad = "a protocol version other than 0";
		break;
	case IVSP_WANT_ID:
		if (v < 0 || v > IVSP_ID_MAX || fd >= 0)
			bad = "a peer ID out of range";
		else
			c->self = v;
		break;
	case IVSP_WANT_MEMORY:
		if (v != -1 || fd < 0)
			bad = "something else than the shared memory after the peer ID";
		else {
			c->memory = fd;
			fd = -1;
		}
		break;
	case IVSP_READY:
		if (v < 0 || v > IVSP_ID_MAX)
			bad = "a peer ID out of range";
		else if (fd >= 0) {
			add_vector(c, v, fd);
			fd = -1;
		} else if (v == c->self)
			bad = "word that we left";
		else if (find(c, v))
			forget(c, find(c, v));
		break;
	}
	if (fd >= 0)
		real.close(fd);
	if (bad) {
		*why = bad;
		return -1;
	}
	if (c->stage != IVSP_READY)
		c->stage++;
	return 0;
}

void ivsp_client_clear(struct ivsp_client *c)
{
	while (c->npeers)
		forget(c, &c->peers[0]);
	if (c->memory >= 0)
		real.close(c->memory);
	ivsp_client_init(c);
}
