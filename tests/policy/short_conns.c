/* Connections one after another to one server, each carrying BYTES each way and
 * ending: what the short-connection policy learns from (src/core/shortlived.h).
 *
 *   short_conns PORT COUNT BYTES
 *
 * Forks: the parent accepts COUNT connections and sends back what each brought;
 * the child connects COUNT times to 127.0.0.1:PORT and checks every byte of every
 * answer. Prints `ok COUNT` when all were exact. Both run on the core the program
 * started on: the policy learns only from connections whose ends share one. */
#include <arpa/inet.h>
#include <sched.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int all(ssize_t (*io)(int, void *, size_t, int), int fd, unsigned char *p, size_t n)
{
	while (n) {
		ssize_t k = io(fd, p, n, 0);
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static ssize_t rd(int fd, void *p, size_t n, int f)
{
	return recv(fd, p, n, f);
}

static ssize_t wr(int fd, void *p, size_t n, int f)
{
	return send(fd, p, n, f | MSG_NOSIGNAL);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return fprintf(stderr, "usage: short_conns PORT COUNT BYTES\n"), 2;
	int count = atoi(argv[2]);
	size_t bytes = strtoul(argv[3], NULL, 10);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
	unsigned char *out = malloc(bytes), *in = malloc(bytes);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	cpu_set_t one_core;
	CPU_ZERO(&one_core);
	CPU_SET(sched_getcpu(), &one_core);
	if (sched_setaffinity(0, sizeof(one_core), &one_core) < 0)
		return perror("sched_setaffinity"), 1;
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (!out || !in || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 64) < 0)
		return perror("listen"), 1;
	pid_t child = fork();
	if (child == 0) {
		close(l);
		for (int i = 0; i < count; i++) {
			int c = socket(AF_INET, SOCK_STREAM, 0);
			for (size_t j = 0; j < bytes; j++)
				out[j] = (unsigned char)(i + j * 7);
			if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 ||
			    all(wr, c, out, bytes) < 0 || all(rd, c, in, bytes) < 0 ||
			    memcmp(in, out, bytes))
				return fprintf(stderr, "connection %d: not echoed\n", i), 1;
			close(c);
		}
		return 0;
	}
	for (int i = 0; i < count; i++) {
		int c = accept(l, NULL, NULL);
		if (c < 0 || all(rd, c, in, bytes) < 0 || all(wr, c, in, bytes) < 0)
			return fprintf(stderr, "connection %d: not served\n", i), 1;
		close(c);
	}
	int st;
	if (waitpid(child, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return 1;
	printf("ok %d\n", count);
	return 0;
}
