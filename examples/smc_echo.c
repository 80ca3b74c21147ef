/* An IPPROTO_SMC client and server, built against an installed usmc:
 *
 *     cc smc_echo.c $(pkg-config --cflags --libs usmc) -o smc_echo
 *     ./smc_echo server ADDR PORT &        # echoes one connection, then exits
 *     ./smc_echo client ADDR PORT BYTES    # sends BYTES, checks the echo, prints "ok BYTES"
 *
 * ADDR is numeric, IPv4 or IPv6 (127.0.0.1, ::1, 0.0.0.0 for a server on every
 * address). With `tcp` as a last argument, both use protocol 0 instead: plain
 * TCP sockets, which a program linked with usmc leaves alone. */
/* getaddrinfo() under -std=c11 */
#define _POSIX_C_SOURCE 200809L

#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <usmc/usmc.h>

static int fail(const char *what)
{
	perror(what);
	return 1;
}

static int serve(int fd)
{
	char buf[65536];
	ssize_t n;
	int c = accept(fd, NULL, NULL);

	if (c < 0)
		return fail("accept");
	while ((n = read(c, buf, sizeof(buf))) > 0)
		if (write(c, buf, (size_t)n) != n)
			return fail("write");
	close(c);
	return 0;
}

/* Sends total bytes of a pattern and checks that they all come back. */
static int echo(int fd, size_t total)
{
	size_t sent = 0, got = 0;
	char out[4096], in[4096];

	while (got < total) {
		if (sent < total) {
			size_t k = total - sent < sizeof(out) ? total - sent : sizeof(out);
			for (size_t i = 0; i < k; i++)
				out[i] = (char)((sent + i) * 7);
			if (write(fd, out, k) != (ssize_t)k)
				return fail("write");
			sent += k;
		}
		ssize_t n = read(fd, in, sizeof(in));
		if (n <= 0)
			return fail("read");
		for (ssize_t i = 0; i < n; i++)
			if (in[i] != (char)((got + (size_t)i) * 7))
				return fprintf(stderr, "corrupt at %zu\n", got + (size_t)i), 1;
		got += (size_t)n;
	}
	printf("ok %zu\n", got);
	return 0;
}

int main(int argc, char **argv)
{
	int server = argc > 1 && !strcmp(argv[1], "server");
	if (argc < (server ? 4 : 5))
		return fprintf(stderr, "usage: smc_echo server ADDR PORT [tcp] | "
				       "client ADDR PORT BYTES [tcp]\n"), 2;
	int proto = !strcmp(argv[argc - 1], "tcp") ? 0 : IPPROTO_SMC;
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				 .ai_socktype = SOCK_STREAM}, *ai;
	int e = getaddrinfo(argv[2], argv[3], &hints, &ai);
	if (e)
		return fprintf(stderr, "%s %s: %s\n", argv[2], argv[3], gai_strerror(e)), 2;
	int fd = socket(ai->ai_family, SOCK_STREAM, proto), one = 1, r;
	if (fd < 0)
		return fail("socket");
	if (server) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1) < 0)
			return fail("listen");
		printf("listening\n");
		fflush(stdout);
		r = serve(fd);
	} else {
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
			return fail("connect");
		r = echo(fd, strtoul(argv[4], NULL, 10));
	}
	close(fd);
	freeaddrinfo(ai);
	return r;
}
