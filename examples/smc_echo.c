/* An IPPROTO_SMC client and server, built against an installed usmc:
 *
 *     cc smc_echo.c $(pkg-config --cflags --libs usmc) -o smc_echo
 *     ./smc_echo server PORT &        # echoes one connection, then exits
 *     ./smc_echo client PORT BYTES    # sends BYTES, checks the echo, prints "ok BYTES"
 *
 * With `tcp` as a last argument, both use protocol 0 instead: plain TCP sockets,
 * which a program linked with usmc leaves alone. */
#include <arpa/inet.h>
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

int main(int argc, char **argv)
{
	if (argc < 3)
		return fprintf(stderr, "usage: smc_echo server PORT [tcp] | client PORT BYTES [tcp]\n"), 2;
	int server = !strcmp(argv[1], "server");
	int proto = !strcmp(argv[argc - 1], "tcp") ? 0 : IPPROTO_SMC;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, proto), one = 1;
	if (fd < 0)
		return fail("socket");
	if (server) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1) < 0)
			return fail("listen");
		printf("listening\n");
		fflush(stdout);
		int c = accept(fd, NULL, NULL);
		char buf[65536];
		ssize_t n;
		while ((n = read(c, buf, sizeof(buf))) > 0)
			if (write(c, buf, (size_t)n) != n)
				return fail("write");
		close(c);
		close(fd);
		return 0;
	}
	if (argc < 4 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return fail("connect");
	size_t total = strtoul(argv[3], NULL, 10), sent = 0, got = 0;
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
	close(fd);
	return 0;
}
