/* A client of `usmc region serve` written from QEMU's ivshmem protocol spec
 * (not from src/dev/ivs_proto.c, whose decoding it checks), and clients that
 * misbehave. Each mode prints what went wrong and exits 1, or exits 0.
 *
 *   client SOCKET conformance VECTORS   two clients: the welcome each gets, the
 *                                       announcements, a ring between them, a
 *                                       departure
 *   client SOCKET garbage VECTORS       clients that send bytes, descriptors, or
 *                                       hang up half way: each is dropped and its
 *                                       departure told; the server serves on
 *   client SOCKET watch VECTORS N       prints "ready", then waits for N peers to
 *                                       join with VECTORS vectors each and leave */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static const char *sock_path;
static int vectors;

#define CHECK(c, ...)                                                                              \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "client: " __VA_ARGS__);                                   \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static int dial(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int s = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
	CHECK(s >= 0 && connect(s, (struct sockaddr *)&a, sizeof(a)) == 0, "connect %s: %s",
	      sock_path, strerror(errno));
	return s;
}

/* One message within ms: 1 with *v and *fd, 0 at end of stream, -1 on time out. */
static int next(int s, int64_t *v, int *fd, int ms)
{
	struct pollfd pf = {s, POLLIN, 0};
	unsigned char b[8];
	char ctl[CMSG_SPACE(4 * sizeof(int))];
	struct iovec iov = {b, 8};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};

	if (poll(&pf, 1, ms) <= 0)
		return -1;
	ssize_t n = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
	if (n == 0)
		return 0;
	CHECK(n == 8, "a message of %zd bytes", n);
	uint64_t x = 0;
	for (int i = 7; i >= 0; i--)
		x = x << 8 | b[i];
	*v = (int64_t)x;
	*fd = -1;
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	if (h) {
		CHECK(h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
			      h->cmsg_len == CMSG_LEN(sizeof(int)) && !CMSG_NXTHDR(&m, h),
		      "ancillary data other than one descriptor");
		memcpy(fd, CMSG_DATA(h), sizeof(int));
	}
	return 1;
}

struct peer {
	int64_t id;
	int nfd, fd[64];
};

struct cl {
	int s;
	int64_t id;
	struct peer p[64];
	int np;
};

static struct peer *peer_of(struct cl *c, int64_t id, int make)
{
	for (int i = 0; i < c->np; i++)
		if (c->p[i].id == id)
			return &c->p[i];
	if (!make)
		return NULL;
	CHECK(c->np < 64, "too many peers");
	c->p[c->np] = (struct peer){.id = id};
	return &c->p[c->np++];
}

/* One announcement: a vector of a peer, or a departure. Returns the peer's ID,
 * or -1 when none came within ms. */
static int64_t hear(struct cl *c, int ms, int *left)
{
	int64_t v;
	int fd;
	int r = next(c->s, &v, &fd, ms);

	if (r < 0)
		return -1;
	CHECK(r == 1, "peer %lld: the server hung up", (long long)c->id);
	CHECK(v >= 0 && v <= 0xffff, "an announced ID out of range: %lld", (long long)v);
	*left = fd < 0;
	struct peer *p = peer_of(c, v, fd >= 0);
	if (fd >= 0) {
		CHECK(p->nfd < vectors, "peer %lld: more than %d vectors", (long long)v, vectors);
		p->fd[p->nfd++] = fd;
	} else {
		CHECK(p, "a departure of peer %lld, never announced", (long long)v);
		for (int i = 0; i < p->nfd; i++)
			close(p->fd[i]);
		*p = c->p[--c->np];
	}
	return v;
}

/* Connects and checks the welcome: version 0, an ID, the memory, then every
 * peer's vectors with ours last. */
static void hello(struct cl *c)
{
	int64_t v;
	int fd, left;

	memset(c, 0, sizeof(*c));
	c->s = dial();
	CHECK(next(c->s, &v, &fd, 5000) == 1 && v == 0 && fd < 0, "no protocol version 0");
	CHECK(next(c->s, &c->id, &fd, 5000) == 1 && c->id >= 0 && c->id <= 0xffff && fd < 0,
	      "no peer ID");
	CHECK(next(c->s, &v, &fd, 5000) == 1 && v == -1 && fd >= 0, "no shared memory");
	struct stat st;
	CHECK(fstat(fd, &st) == 0 && st.st_size >= 4096, "the memory is no region");
	void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED, "cannot map the memory");
	munmap(m, 4096);
	close(fd);
	for (;;) {
		struct peer *self = peer_of(c, c->id, 0);
		if (self && self->nfd == vectors)
			break;
		CHECK(hear(c, 5000, &left) >= 0 && !left, "peer %lld: not all its vectors",
		      (long long)c->id);
	}
}

static void conformance(void)
{
	struct cl a, b;
	int left;
	uint64_t one = 1, got = 0;

	hello(&a);
	hello(&b);
	CHECK(a.id != b.id, "two peers with ID %lld", (long long)a.id);
	/* b heard of a first, whole; a hears of b now. */
	CHECK(peer_of(&b, a.id, 0) && peer_of(&b, a.id, 0)->nfd == vectors,
	      "the newcomer was not told of the peer there");
	while (!peer_of(&a, b.id, 0) || peer_of(&a, b.id, 0)->nfd < vectors)
		CHECK(hear(&a, 5000, &left) == b.id && !left, "the newcomer was not announced");
	/* a rings b's last vector: b's own copy of it fires. */
	CHECK(write(peer_of(&a, b.id, 0)->fd[vectors - 1], &one, 8) == 8, "cannot ring");
	struct pollfd pf = {peer_of(&b, b.id, 0)->fd[vectors - 1], POLLIN, 0};
	CHECK(poll(&pf, 1, 5000) == 1 && read(pf.fd, &got, 8) == 8 && got == 1,
	      "the ring did not arrive");
	close(b.s);
	CHECK(hear(&a, 5000, &left) == b.id && left, "the departure was not told");
	CHECK(!peer_of(&a, b.id, 0), "the peer that left is still known");
	close(a.s);
	printf("conformance: peers %lld and %lld, %d vectors each\n", (long long)a.id,
	       (long long)b.id, vectors);
}

/* The watcher a hears newcomer join, then leave once it misbehaved. */
static void dropped(struct cl *a, const char *what)
{
	int left;
	int64_t id = -1, v;

	do {
		v = hear(a, 5000, &left);
		CHECK(v >= 0, "%s: never announced, or never dropped", what);
		if (id < 0)
			id = v;
		CHECK(v == id, "%s: another peer announced", what);
	} while (!left);
	printf("garbage: %s: peer %lld dropped\n", what, (long long)id);
}

static void garbage(void)
{
	struct cl a, b;
	int s;

	hello(&a);
	/* Bytes, which the protocol never has a client send. */
	s = dial();
	CHECK(write(s, "GET / HTTP/1.0\r\n\r\n", 18) == 18, "cannot write");
	dropped(&a, "bytes");
	close(s);
	/* A descriptor, with a message the size of the server's own. */
	s = dial();
	{
		int64_t v = 7;
		int fd = 0;
		char ctl[CMSG_SPACE(sizeof(int))] = {0};
		struct iovec iov = {&v, 8};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				   .msg_controllen = sizeof(ctl)};
		struct cmsghdr *h = CMSG_FIRSTHDR(&m);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(h), &fd, sizeof(int));
		CHECK(sendmsg(s, &m, 0) == 8, "cannot send a descriptor");
	}
	dropped(&a, "a descriptor");
	close(s);
	/* Hangs up before reading its welcome: announced and gone, or never
	 * announced at all (its welcome failed first); nothing of it stays. */
	s = dial();
	close(s);
	int left;
	while (hear(&a, 500, &left) >= 0)
		;
	CHECK(a.np == 1, "hung up at once: %d peers known, not just ourselves", a.np);
	printf("garbage: hung up at once: nothing of it stays\n");
	/* Half closed: still reads, sends no more. */
	s = dial();
	shutdown(s, SHUT_WR);
	dropped(&a, "half closed");
	close(s);
	/* Still serving. */
	hello(&b);
	close(b.s);
	close(a.s);
	printf("garbage: served on\n");
}

static void watch(int n)
{
	struct cl a;
	int left, joined = 0, gone = 0;

	hello(&a);
	printf("ready\n");
	fflush(stdout);
	while (gone < n) {
		int64_t v = hear(&a, 60000, &left);
		CHECK(v >= 0, "%d of %d peers joined, %d left", joined, n, gone);
		if (left)
			gone++;
		else if (peer_of(&a, v, 0)->nfd == vectors)
			joined++;
	}
	CHECK(joined == n, "%d peers left, %d joined", gone, joined);
	printf("watch: %d peers joined with %d vectors each and left\n", n, vectors);
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	sock_path = argv[1];
	vectors = atoi(argv[3]);
	CHECK(vectors >= 1 && vectors <= 64, "VECTORS from 1 to 64");
	if (!strcmp(argv[2], "conformance"))
		conformance();
	else if (!strcmp(argv[2], "garbage"))
		garbage();
	else if (!strcmp(argv[2], "watch") && argc == 5)
		watch(atoi(argv[4]));
	else
		return 2;
	return 0;
}
