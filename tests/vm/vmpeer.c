/* The two ends of the guests' scenarios (tests/vm/run.sh), for guests that hold no shell:
 *
 *   vmpeer serve PORT                    echoes every connection on PORT (epoll, any number at
 *                                        once); says when one ends otherwise than by EOF
 *   vmpeer transfer ADDR PORT BYTES      sends BYTES of a pattern and checks what comes back
 *   vmpeer rr ADDR PORT COUNT            COUNT request/response exchanges of 64 bytes, checked
 *   vmpeer many ADDR PORT N              N connections at once, each echoing a message
 *   vmpeer hold ADDR PORT                one exchange, prints "holding", then reads until the
 *                                        connection ends
 *   vmpeer waitport ADDR PORT            returns once something listens there (30 s at most)
 *   vmpeer netbytes IFACE                prints the bytes IFACE received and sent
 *   vmpeer quiet ADDR PORT ROUNDS MS     ROUNDS exchanges of 64 bytes, each after MS ms of
 *                                        quiet (both ends sleep meanwhile), checked
 *   vmpeer vfio-bind                     binds the ivshmem PCI device to vfio-pci
 *
 * Every check that fails prints why and exits 1. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	printf("vmpeer: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct sockaddr_in addr_of(const char *ip, const char *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};

	if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
		printf("vmpeer: bad address %s\n", ip);
		exit(1);
	}
	return a;
}

static int connect_to(const char *ip, const char *port)
{
	struct sockaddr_in a = addr_of(ip, port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	return fd;
}

static unsigned char pattern(uint64_t off)
{
	return (unsigned char)(off * 7 + (off >> 9));
}

static void write_all(int fd, const unsigned char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			die("write");
		p += w;
		n -= (size_t)w;
	}
}

static void read_all(int fd, unsigned char *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r <= 0) {
			if (r == 0)
				errno = EPIPE;
			die("read");
		}
		p += r;
		n -= (size_t)r;
	}
}

_Noreturn static void serve(const char *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1, ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
	static unsigned char buf[1 << 16];
	uint64_t ended = 0;

	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 4096) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
		die("listen");
	printf("serving on %s\n", port);
	fflush(stdout);
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, -1);
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == lfd) {
				int c = accept(lfd, NULL, NULL);
				struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
				if (c >= 0)
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
				continue;
			}
			ssize_t r = read(fd, buf, sizeof(buf));
			if (r > 0) {
				write_all(fd, buf, (size_t)r);
				continue;
			}
			if (r < 0)
				printf("connection ended: %s (%llu so far)\n", strerror(errno),
				       (unsigned long long)++ended);
			fflush(stdout);
			close(fd);
		}
	}
}

/* Sends bytes in pieces, reading each echo back before the next: the ring never
 * holds more than a piece each way. */
static int transfer(const char *ip, const char *port, uint64_t bytes)
{
	int fd = connect_to(ip, port);
	static unsigned char out[1 << 16], in[1 << 16];
	uint64_t start = now_ms();

	for (uint64_t off = 0; off < bytes;) {
		size_t n = bytes - off < sizeof(out) ? (size_t)(bytes - off) : sizeof(out);
		for (size_t i = 0; i < n; i++)
			out[i] = pattern(off + i);
		write_all(fd, out, n);
		read_all(fd, in, n);
		if (memcmp(in, out, n)) {
			printf("vmpeer: the echo differs near byte %llu\n", (unsigned long long)off);
			return 1;
		}
		off += n;
	}
	close(fd);
	printf("transfer ok: %llu bytes both ways, checked, in %llu ms\n", (unsigned long long)bytes,
	       (unsigned long long)(now_ms() - start));
	return 0;
}

static int rr(const char *ip, const char *port, int count)
{
	int fd = connect_to(ip, port);
	unsigned char q[64], a[64];
	uint64_t start = now_ms();

	for (int i = 0; i < count; i++) {
		for (int k = 0; k < 64; k++)
			q[k] = pattern((uint64_t)i * 64 + (uint64_t)k);
		write_all(fd, q, sizeof(q));
		read_all(fd, a, sizeof(a));
		if (memcmp(q, a, sizeof(q))) {
			printf("vmpeer: answer %d differs\n", i);
			return 1;
		}
	}
	close(fd);
	printf("rr ok: %d exchanges, %.1f us each\n", count,
	       (double)(now_ms() - start) * 1000.0 / count);
	return 0;
}

static int many(const char *ip, const char *port, int n)
{
	int *fd = calloc((size_t)n, sizeof(*fd));

	for (int i = 0; i < n; i++) {
		unsigned char m[8];
		fd[i] = connect_to(ip, port);
		memcpy(m, &i, sizeof(i));
		memcpy(m + 4, &i, sizeof(i));
		write_all(fd[i], m, sizeof(m));
	}
	for (int i = 0; i < n; i++) {
		unsigned char m[8];
		int a, b;
		read_all(fd[i], m, sizeof(m));
		memcpy(&a, m, sizeof(a));
		memcpy(&b, m + 4, sizeof(b));
		if (a != i || b != i) {
			printf("vmpeer: connection %d echoed another's message\n", i);
			return 1;
		}
	}
	printf("many ok: %d connections open at once, each echoed\n", n);
	fflush(stdout);
	for (int i = 0; i < n; i++)
		close(fd[i]);
	return 0;
}

static int hold(const char *ip, const char *port)
{
	int fd = connect_to(ip, port);
	unsigned char m[16] = "held", back[16];

	write_all(fd, m, sizeof(m));
	read_all(fd, back, sizeof(back));
	printf("holding\n");
	fflush(stdout);
	ssize_t r = read(fd, back, 1);
	printf("hold ended: %zd %s\n", r, r < 0 ? strerror(errno) : "");
	return 0;
}

static int quiet(const char *ip, const char *port, int rounds, int ms)
{
	int fd = connect_to(ip, port);

	for (int i = 0; i < rounds; i++) {
		unsigned char m[64], back[64];
		usleep((useconds_t)ms * 1000);
		memset(m, i, sizeof(m));
		write_all(fd, m, sizeof(m));
		read_all(fd, back, sizeof(back));
		if (memcmp(m, back, sizeof(m))) {
			printf("vmpeer: round %d echoed something else\n", i);
			return 1;
		}
	}
	printf("quiet ok: %d exchanges after %d ms of quiet each\n", rounds, ms);
	close(fd);
	return 0;
}

/* What an operator does once per boot: the device's driver is vfio-pci. */
static int vfio_bind(void)
{
	char path[300], id[16];
	struct dirent *e;
	DIR *d = opendir("/sys/bus/pci/devices");

	while (d && (e = readdir(d))) {
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/device", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		int is = fgets(id, sizeof(id), f) && !strncmp(id, "0x1110", 6);
		fclose(f);
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", e->d_name);
		if (!is || !(f = fopen(path, "r")))
			continue;
		is = fgets(id, sizeof(id), f) && !strncmp(id, "0x1af4", 6);
		fclose(f);
		if (!is)
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver_override", e->d_name);
		if (!(f = fopen(path, "w")) || fputs("vfio-pci", f) < 0 || fclose(f))
			die(path);
		if (!(f = fopen("/sys/bus/pci/drivers_probe", "w")) || fputs(e->d_name, f) < 0 ||
		    fclose(f))
			die("drivers_probe");
		printf("vfio-bind: %s bound to vfio-pci\n", e->d_name);
		return 0;
	}
	printf("vmpeer: no ivshmem PCI device\n");
	return 1;
}

static int waitport(const char *ip, const char *port)
{
	struct sockaddr_in a = addr_of(ip, port);

	for (int i = 0; i < 300; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			close(fd);
			return 0;
		}
		close(fd);
		usleep(100000);
	}
	printf("vmpeer: nothing listens on %s:%s\n", ip, port);
	return 1;
}

static unsigned long long counter(const char *iface, const char *name)
{
	char path[256];
	unsigned long long v = 0;

	snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/%s", iface, name);
	FILE *f = fopen(path, "r");
	if (!f || fscanf(f, "%llu", &v) != 1)
		die(path);
	fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "serve"))
		serve(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "transfer"))
		return transfer(argv[2], argv[3], strtoull(argv[4], NULL, 0));
	if (argc == 5 && !strcmp(argv[1], "rr"))
		return rr(argv[2], argv[3], atoi(argv[4]));
	if (argc == 5 && !strcmp(argv[1], "many"))
		return many(argv[2], argv[3], atoi(argv[4]));
	if (argc == 4 && !strcmp(argv[1], "hold"))
		return hold(argv[2], argv[3]);
	if (argc == 6 && !strcmp(argv[1], "quiet"))
		return quiet(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
	if (argc == 2 && !strcmp(argv[1], "vfio-bind"))
		return vfio_bind();
	if (argc == 4 && !strcmp(argv[1], "waitport"))
		return waitport(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "netbytes")) {
		printf("netbytes %s %llu\n", argv[2], counter(argv[2], "rx_bytes") + counter(argv[2], "tx_bytes"));
		return 0;
	}
	printf("usage: vmpeer serve|transfer|rr|many|hold|waitport|netbytes|quiet|vfio-bind ...\n");
	return 2;
}
