/* usmc region serve: an ivshmem server (QEMU's protocol, src/dev/ivs_proto.h),
 * so that guests with an ivshmem-doorbell device, and host processes under
 * usmc, share a region and interrupt each other. QEMU's own server is not
 * packaged everywhere (Debian ships none).
 *
 * It hands each client the region's descriptor and one eventfd per vector of
 * every peer: the peers then ring each other without it. Clients are untrusted:
 * one that sends anything (the protocol has it send nothing), stops reading, or
 * hangs up is dropped, and its departure told to the others; none can block
 * the server, whose every send would rather fail than wait. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../core/sys.h"
#include "../dev/ivs_proto.h"
#include "../dev/regionfile.h"
#include "usmc.h"

/* Clients at once: a region holds no more peers than it has slots. */
#define CLIENTS_MAX IVSP_PEERS_MAX

struct client {
	int sock;           /* -1: a free entry */
	int64_t id;
	int announced;      /* the others were told of it */
	int drop;           /* to be dropped (a send failed, it broke the protocol) */
	int fd[IVSP_VECTORS_MAX];
};

static struct {
	const char *sock_path;
	int memory;                     /* the region's descriptor, for every client */
	int vectors;
	int64_t next_id;
	struct client c[CLIENTS_MAX];
	int n;                          /* entries in use at the front of c */
} s;

_Noreturn static void fail(const char *why)
{
	fprintf(stderr, "usmc region serve: %s\n", why);
	exit(1);
}

static void say(const struct client *c, const char *what)
{
	fprintf(stderr, "usmc region serve: peer %lld %s\n", (long long)c->id, what);
}

/* One message to c; a failure marks it for dropping. */
static void send_to(struct client *c, int64_t v, int fd)
{
	if (c->drop)
		return;
	int e = ivsp_send(c->sock, v, fd);
	if (e < 0) {
		say(c, e == -EAGAIN ? "does not read what it is sent: dropped" : "hung up");
		c->drop = 1;
	}
}

/* Every vector of from, to c. */
static void send_vectors(struct client *c, const struct client *from)
{
	for (int v = 0; v < s.vectors; v++)
		send_to(c, from->id, from->fd[v]);
}

/* The lowest free ID from the last one given on: a peer that comes back gets
 * another, so that what was left of its former self is not taken for it. */
static int64_t new_id(void)
{
	for (int64_t k = 0; k <= IVSP_ID_MAX; k++) {
		int64_t id = (s.next_id + k) % (IVSP_ID_MAX + 1), used = 0;
		for (int i = 0; i < s.n; i++)
			used |= s.c[i].id == id;
		if (!used) {
			s.next_id = id + 1;
			return id;
		}
	}
	return -1;
}

static void welcome(int sock)
{
	if (s.n == CLIENTS_MAX) {
		fprintf(stderr, "usmc region serve: %d peers already: a new one is refused\n",
			CLIENTS_MAX);
		close(sock);
		return;
	}
	struct client *c = &s.c[s.n];
	*c = (struct client){.sock = sock, .id = new_id()};
	for (int v = 0; v < s.vectors; v++) {
		c->fd[v] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (c->fd[v] < 0) {
			fprintf(stderr, "usmc region serve: eventfd: %s: a new peer is refused\n",
				strerror(errno));
			while (v--)
				close(c->fd[v]);
			close(sock);
			return;
		}
	}
	s.n++;
	send_to(c, IVSP_VERSION, -1);
	send_to(c, c->id, -1);
	send_to(c, -1, s.memory);
	for (int i = 0; i < s.n - 1; i++)
		if (!s.c[i].drop)
			send_vectors(c, &s.c[i]);
	send_vectors(c, c);
	if (c->drop)
		return;
	say(c, "joined");
	c->announced = 1;
	for (int i = 0; i < s.n - 1; i++)
		send_vectors(&s.c[i], c);
}

/* Drops the clients marked, telling the others; a send that fails then marks
 * one more. */
static void sweep(void)
{
	for (int i = 0; i < s.n;) {
		if (!s.c[i].drop) {
			i++;
			continue;
		}
		struct client gone = s.c[i];
		s.c[i] = s.c[--s.n];
		close(gone.sock);
		for (int v = 0; v < s.vectors; v++)
			close(gone.fd[v]);
		if (gone.announced) {
			say(&gone, "left");
			for (int k = 0; k < s.n; k++)
				send_to(&s.c[k], gone.id, -1);
		}
		i = 0;
	}
}

/* A client speaks: it hung up, or broke the protocol, which has it say nothing. */
static void heard(struct client *c, short revents)
{
	char b[64];
	ssize_t n = (revents & POLLIN) ? recv(c->sock, b, sizeof(b), MSG_DONTWAIT) : 0;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0)
		say(c, "sent data, which the protocol has no place for: dropped");
	c->drop = 1;
}

/* The region's file: a regular file whose size QEMU can make a BAR of, holding
 * a region or blank (its first user formats it). */
static int open_memory(const char *path)
{
	struct region_map m;
	struct region r;
	char why[1024];
	struct stat st;

	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, sizeof(why), "%s: %s", path,
			 S_ISREG(st.st_mode) ? strerror(errno) : "not a regular file");
		fail(why);
	}
	if (region_map_open(&m, path, 1, why, sizeof(why)) < 0)
		fail(why);
	int e = region_attach(&r, m.base, m.size);
	region_map_close(&m);
	if (e != REGION_OK && e != REGION_EBLANK) {
		snprintf(why, sizeof(why), "%s: %s", path, region_strerror(e));
		fail(why);
	}
	/* A PCI BAR's size is a power of two; QEMU refuses another. */
	if (st.st_size < (off_t)REGION_MIN_SIZE || (st.st_size & (st.st_size - 1))) {
		snprintf(why, sizeof(why),
			 "%s: %lld bytes: a BAR needs a power of two of at least %u "
			 "(usmc region create --size)",
			 path, (long long)st.st_size, REGION_MIN_SIZE);
		fail(why);
	}
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, sizeof(why), "%s: %s", path, strerror(errno));
		fail(why);
	}
	return fd;
}

/* Listens on path; a socket left by a server that is gone is replaced, one a
 * server still answers on is not. */
static int listen_on(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char why[1200];
	struct stat st;

	if (strlen(path) >= sizeof(a.sun_path))
		fail("the socket's path is too long");
	strcpy(a.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fail(strerror(errno));
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(why, sizeof(why), "%s exists and is not a socket", path);
			fail(why);
		}
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			snprintf(why, sizeof(why), "%s: a server answers there already", path);
			fail(why);
		}
		unlink(path);
	}
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0) {
		snprintf(why, sizeof(why), "%s: %s", path, strerror(errno));
		fail(why);
	}
	return fd;
}

int region_serve(int argc, char **argv)
{
	const char *mem_path = NULL;
	uint64_t vectors = 1;

	for (int i = 1; i < argc; i++) {
		if (is_help(argv[i]))
			help_exit();
		else if (!strcmp(argv[i], "--vectors"))
			vectors = region_number("--vectors", region_value_of(argc, argv, &i), 1,
						IVSP_VECTORS_MAX);
		else if (argv[i][0] != '-' && !s.sock_path)
			s.sock_path = argv[i];
		else if (argv[i][0] != '-' && !mem_path)
			mem_path = argv[i];
		else
			die_usage();
	}
	if (!mem_path)
		die_usage();
	s.vectors = (int)vectors;
	s.memory = open_memory(mem_path);
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sig = signalfd(-1, &stop, SFD_CLOEXEC);
	int lfd = listen_on(s.sock_path);
	fprintf(stderr, "usmc region serve: %s on %s, %d vector%s a peer\n", mem_path, s.sock_path,
		s.vectors, s.vectors > 1 ? "s" : "");
	for (;;) {
		struct pollfd pf[CLIENTS_MAX + 2] = {{sig, POLLIN, 0}, {lfd, POLLIN, 0}};
		int n = s.n;
		for (int i = 0; i < n; i++)
			pf[2 + i] = (struct pollfd){s.c[i].sock, POLLIN, 0};
		if (poll(pf, (nfds_t)n + 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fail(strerror(errno));
		}
		if (pf[0].revents)
			break;
		for (int i = 0; i < n; i++)
			if (pf[2 + i].revents)
				heard(&s.c[i], pf[2 + i].revents);
		sweep();
		if (pf[1].revents & POLLIN) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
			if (c >= 0)
				welcome(c);
			sweep();
		}
	}
	fprintf(stderr, "usmc region serve: stopped\n");
	unlink(s.sock_path);
	return 0;
}
