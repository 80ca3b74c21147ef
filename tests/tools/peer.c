/* The two ends the tool tests look at, holding their connections open so that
 * `usmc ss` has something to list:
 *
 *   peer server ADDR PORT                   accepts forever; each connection sends a
 *                                           4-byte length and that many bytes, which
 *                                           come back; the connection stays open
 *   peer client ADDR PORT BYTES [specials|threads]
 *                                           one such exchange, checked; with
 *                                           `specials`, one MSG_PEEK, MSG_OOB,
 *                                           sendfile and splice call each; with
 *                                           `threads`, THREADS more exchanges, each
 *                                           a thread's own on a connection of its
 *                                           own, the first half all running at once
 *                                           (more threads than the counters have
 *                                           slots, stats.h), the second after they
 *                                           ended, then as many forked children
 *                                           (CHILDREN) one after another; then
 *                                           prints "ok" and holds the connections
 *                                           until killed
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "peer: %s: %s\n", what, strerror(errno));
	exit(1);
}

static socklen_t sockaddr_of(const char *addr, const char *port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)atoi(port));
		return sizeof(*a4);
	}
	if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)atoi(port));
		return sizeof(*a6);
	}
	fprintf(stderr, "peer: bad address %s\n", addr);
	exit(2);
}

static int io_all(int fd, void *buf, size_t n, int out)
{
	char *p = buf;
	while (n) {
		ssize_t r = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r == 0)
				errno = ECONNRESET;
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* One exchange as a client makes it: the length, the bytes, their echo. Returns
 * -1 if the connection failed, 1 if the echo differs, 0 if it came back whole. */
static int exchange_on(int fd, const char *out, char *back, uint32_t n)
{
	uint32_t hdr = htonl(n);

	if (io_all(fd, &hdr, sizeof(hdr), 1) < 0 || io_all(fd, (char *)out, n, 1) < 0 ||
	    io_all(fd, back, n, 0) < 0)
		return -1;
	return memcmp(out, back, n) != 0;
}

static void serve(int l)
{
	for (;;) {
		int c = accept(l, NULL, NULL);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			die("accept");
		}
		uint32_t n;
		/* `usmc check` connects and leaves without a word. */
		if (io_all(c, &n, sizeof(n), 0) < 0) {
			close(c);
			continue;
		}
		n = ntohl(n);
		char *buf = malloc(n ? n : 1);
		if (!buf)
			die("malloc");
		if (io_all(c, buf, n, 0) < 0 || io_all(c, buf, n, 1) < 0)
			die("echo");
		free(buf);
		/* Kept open: the tests look at it. */
	}
}

/* Each call the statistics count among the special ones, once. */
static void specials(int fd)
{
	char c, path[] = "/tmp/usmc-peer.XXXXXX";
	int p[2];

	recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	send(fd, "!", 1, MSG_OOB);
	int f = mkstemp(path);
	if (f < 0 || write(f, "sendfile", 8) != 8)
		die("temporary file");
	unlink(path);
	off_t off = 0;
	if (sendfile(fd, f, &off, 8) != 8)
		die("sendfile");
	close(f);
	if (pipe(p) < 0 || write(p[1], "splice", 6) != 6)
		die("pipe");
	if (splice(p[0], NULL, fd, NULL, 6, 0) != 6)
		die("splice");
	close(p[0]);
	close(p[1]);
}

#define THREADS 200
#define CHILDREN 70

static struct sockaddr_storage dst;
static socklen_t dst_len;
static uint32_t exchange_n;
static pthread_barrier_t all_in;

/* One exchange of exchange_n bytes on a connection of the thread's own, left open. */
static void *exchange(void *wait)
{
	char *out = malloc(exchange_n ? exchange_n : 1), *back = malloc(exchange_n ? exchange_n : 1);
	int fd = socket(dst.ss_family, SOCK_STREAM, 0);

	if (!out || !back || fd < 0 || connect(fd, (struct sockaddr *)&dst, dst_len) < 0)
		die("thread's connection");
	memset(out, 't', exchange_n);
	if (exchange_on(fd, out, back, exchange_n))
		die("thread's exchange");
	free(out);
	free(back);
	if (wait)
		pthread_barrier_wait(&all_in);
	return NULL;
}

static void threads(const struct sockaddr_storage *ss, socklen_t len, uint32_t n)
{
	pthread_t t[THREADS];

	dst = *ss;
	dst_len = len;
	exchange_n = n;
	pthread_barrier_init(&all_in, NULL, THREADS / 2);
	for (int i = 0; i < THREADS; i++) {
		if (pthread_create(&t[i], NULL, exchange, i < THREADS / 2 ? &all_in : NULL))
			die("pthread_create");
		if (i == THREADS / 2 - 1)
			for (int j = 0; j <= i; j++)
				pthread_join(t[j], NULL);
	}
	for (int i = THREADS / 2; i < THREADS; i++)
		pthread_join(t[i], NULL);
	/* Forked children count into our file, and leave their slots taken. */
	for (int i = 0; i < CHILDREN; i++) {
		int st;
		pid_t c = fork();
		if (c < 0)
			die("fork");
		if (c == 0) {
			exchange(NULL);
			_exit(0);
		}
		if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
			die("child's exchange");
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	int one = 1;

	if (argc < 4)
		return 2;
	socklen_t len = sockaddr_of(argv[2], argv[3], &ss);
	int fd = socket(ss.ss_family, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (!strcmp(argv[1], "server")) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0)
			die("listen");
		printf("listening\n");
		fflush(stdout);
		serve(fd);
	}
	if (argc < 5 || strcmp(argv[1], "client"))
		return 2;
	uint32_t n = (uint32_t)atoi(argv[4]);
	char *out = malloc(n ? n : 1), *back = malloc(n ? n : 1);
	if (!out || !back)
		die("malloc");
	for (uint32_t i = 0; i < n; i++)
		out[i] = (char)(i * 7 + 3);
	if (connect(fd, (struct sockaddr *)&ss, len) < 0)
		die("connect");
	int r = exchange_on(fd, out, back, n);
	if (r < 0)
		die("exchange");
	if (r) {
		fprintf(stderr, "peer: the echo differs\n");
		return 1;
	}
	if (argc > 5 && !strcmp(argv[5], "specials"))
		specials(fd);
	if (argc > 5 && !strcmp(argv[5], "threads"))
		threads(&ss, len, n);
	printf("ok\n");
	fflush(stdout);
	for (;;)
		pause();
}
