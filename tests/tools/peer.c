/* The two ends the tool tests look at, holding their connections open so that
 * `usmc ss` has something to list:
 *
 *   peer server ADDR PORT                   accepts forever; each connection sends a
 *                                           4-byte length and that many bytes, which
 *                                           come back; the connection stays open
 *   peer client ADDR PORT BYTES [specials]  one such exchange, checked; with
 *                                           `specials`, one MSG_PEEK, MSG_OOB,
 *                                           sendfile and splice call each; then prints
 *                                           "ok" and holds the connection until
 *                                           killed
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
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
	uint32_t n = (uint32_t)atoi(argv[4]), hdr = htonl(n);
	char *out = malloc(n ? n : 1), *back = malloc(n ? n : 1);
	if (!out || !back)
		die("malloc");
	for (uint32_t i = 0; i < n; i++)
		out[i] = (char)(i * 7 + 3);
	if (connect(fd, (struct sockaddr *)&ss, len) < 0)
		die("connect");
	if (io_all(fd, &hdr, sizeof(hdr), 1) < 0 || io_all(fd, out, n, 1) < 0 ||
	    io_all(fd, back, n, 0) < 0)
		die("exchange");
	if (memcmp(out, back, n)) {
		fprintf(stderr, "peer: the echo differs\n");
		return 1;
	}
	if (argc > 5 && !strcmp(argv[5], "specials"))
		specials(fd);
	printf("ok\n");
	fflush(stdout);
	for (;;)
		pause();
}
