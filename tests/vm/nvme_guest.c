#define _GNU_SOURCE
/* What the NVMe/TCP guest (tests/vm/run.sh, scenario nvme) needs besides usmc's own programs,
 * with no shell in the guest: one step a command, its outcome on stdout, exit 0 when it held.
 *
 *   nvme_guest nvmet PORT FILE SIZE NQN         Linux's target on 127.0.0.1:PORT through
 *                                               configfs, its namespace FILE (SIZE bytes)
 *   nvme_guest file-check FILE BYTES SEED       FILE's first BYTES hold the verification data
 *   nvme_guest serve PORT PROGRAM ARG...        start PROGRAM in the background; wait until
 *                                               something listens on PORT
 *   nvme_guest kernel-host PORT NQN BYTES SEED [digest]
 *                                               Linux's host: connect through /dev/nvme-fabrics,
 *                                               write BYTES of verification data to the
 *                                               namespace (O_DIRECT), read them back, check
 *                                               them; then zero a megabyte past them (Write
 *                                               Zeroes) and deallocate the next (Dataset
 *                                               Management), check both read back as zeroes;
 *                                               disconnect
 *   nvme_guest dmesg                            the kernel's messages about NVMe
 *
 * The verification data is usmc nvme perf's (src/nvme/pattern.h), so that what one side
 * writes the other checks. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../src/nvme/pattern.h"

#define CHUNK (1u << 20)

static int fail(const char *what)
{
	fprintf(stdout, "nvme_guest: %s: %s\n", what, strerror(errno));
	return 1;
}

static int put(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY);
	ssize_t n = fd < 0 ? -1 : write(fd, value, strlen(value));

	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)strlen(value)) {
		fprintf(stdout, "nvme_guest: %s <- %s: %s\n", path, value, strerror(errno));
		return -1;
	}
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, ms % 1000 * 1000000};

	nanosleep(&ts, NULL);
}

static int mounts(void)
{
	mkdir("/sys", 0755);
	if (mount("sysfs", "/sys", "sysfs", 0, NULL) < 0 && errno != EBUSY)
		return fail("mount /sys");
	if (mount("configfs", "/sys/kernel/config", "configfs", 0, NULL) < 0 && errno != EBUSY)
		return fail("mount configfs");
	return 0;
}

static int nvmet(const char *port, const char *file, const char *size, const char *nqn)
{
	char p[512], q[600];
	int fd;

	if (mounts())
		return 1;
	fd = open(file, O_RDWR | O_CREAT, 0600);
	if (fd < 0 || ftruncate(fd, strtoll(size, NULL, 0)) < 0)
		return fail(file);
	close(fd);
	snprintf(p, sizeof(p), "/sys/kernel/config/nvmet/subsystems/%s", nqn);
	if (mkdir(p, 0755) < 0)
		return fail(p);
	snprintf(q, sizeof(q), "%s/attr_allow_any_host", p);
	if (put(q, "1"))
		return 1;
	snprintf(q, sizeof(q), "%s/namespaces/1", p);
	if (mkdir(q, 0755) < 0)
		return fail(q);
	snprintf(q, sizeof(q), "%s/namespaces/1/device_path", p);
	if (put(q, file))
		return 1;
	/* A tmpfs file takes no O_DIRECT. */
	snprintf(q, sizeof(q), "%s/namespaces/1/buffered_io", p);
	if (put(q, "1"))
		return 1;
	snprintf(q, sizeof(q), "%s/namespaces/1/enable", p);
	if (put(q, "1"))
		return 1;
	if (mkdir("/sys/kernel/config/nvmet/ports/1", 0755) < 0)
		return fail("nvmet port");
	if (put("/sys/kernel/config/nvmet/ports/1/addr_trtype", "tcp") ||
	    put("/sys/kernel/config/nvmet/ports/1/addr_adrfam", "ipv4") ||
	    put("/sys/kernel/config/nvmet/ports/1/addr_traddr", "127.0.0.1") ||
	    put("/sys/kernel/config/nvmet/ports/1/addr_trsvcid", port))
		return 1;
	snprintf(q, sizeof(q), "/sys/kernel/config/nvmet/ports/1/subsystems/%s", nqn);
	if (symlink(p, q) < 0)
		return fail(q);
	printf("nvme_guest: nvmet-tcp serves %s on 127.0.0.1:%s\n", nqn, port);
	return 0;
}

/* Checks BYTES of fd from offset 0 against the data of seed. */
static int check(int fd, uint64_t bytes, uint64_t seed, const char *what)
{
	uint8_t *b = aligned_alloc(4096, CHUNK);

	for (uint64_t off = 0; b && off < bytes; off += CHUNK) {
		long bad;

		if (pread(fd, b, CHUNK, (off_t)off) != CHUNK)
			return fail(what);
		bad = pattern_check(seed, off, b, CHUNK);
		if (bad >= 0) {
			printf("nvme_guest: %s: byte %llu differs\n", what, (unsigned long long)off + (unsigned long long)bad);
			return 1;
		}
	}
	printf("nvme_guest: %s: %llu bytes as written (seed %llu)\n", what, (unsigned long long)bytes,
	       (unsigned long long)seed);
	free(b);
	return 0;
}

static int file_check(const char *file, const char *bytes, const char *seed)
{
	int fd = open(file, O_RDONLY);

	if (fd < 0)
		return fail(file);
	return check(fd, strtoull(bytes, NULL, 0), strtoull(seed, NULL, 0), file);
}

static int listening(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

static int serve(int port, char **argv)
{
	pid_t pid = fork();

	if (pid == 0) {
		setsid();
		execv(argv[0], argv);
		_exit(127);
	}
	for (int i = 0; i < 600; i++) {
		if (listening(port)) {
			printf("nvme_guest: %s listens on port %d\n", argv[0], port);
			return 0;
		}
		sleep_ms(100);
	}
	printf("nvme_guest: %s never listened on port %d\n", argv[0], port);
	return 1;
}

/* The controller /dev/nvme-fabrics made: "instance=N,cntlid=M". */
static int fabrics_connect(const char *opts, int *instance)
{
	char answer[256] = "";
	int fd = open("/dev/nvme-fabrics", O_RDWR);

	if (fd < 0)
		return fail("/dev/nvme-fabrics");
	if (write(fd, opts, strlen(opts)) < 0) {
		close(fd);
		return fail(opts);
	}
	if (read(fd, answer, sizeof(answer) - 1) < 0 || sscanf(answer, "instance=%d", instance) != 1) {
		close(fd);
		return fail("reading /dev/nvme-fabrics");
	}
	close(fd);
	printf("nvme_guest: connected: %s", answer);
	return 0;
}

/* Past the checked bytes: a megabyte zeroed (the kernel sends Write Zeroes), the
 * next deallocated (Dataset Management), both written with data first and read
 * back as zeroes. */
static int zero_and_discard(int fd, uint64_t at, uint8_t *b)
{
	uint64_t zero[2] = {at, CHUNK}, discard[2] = {at + CHUNK, CHUNK};

	pattern_fill(1, at, b, CHUNK);
	if (pwrite(fd, b, CHUNK, (off_t)at) != CHUNK || pwrite(fd, b, CHUNK, (off_t)(at + CHUNK)) != CHUNK)
		return fail("writing before zeroing");
	if (ioctl(fd, BLKZEROOUT, zero) < 0)
		return fail("BLKZEROOUT");
	if (ioctl(fd, BLKDISCARD, discard) < 0)
		return fail("BLKDISCARD");
	for (uint64_t off = at; off < at + 2 * CHUNK; off += CHUNK) {
		if (pread(fd, b, CHUNK, (off_t)off) != CHUNK)
			return fail("reading zeroes");
		for (size_t i = 0; i < CHUNK; i++)
			if (b[i]) {
				printf("nvme_guest: byte %llu not zero\n", (unsigned long long)off + i);
				return 1;
			}
	}
	printf("nvme_guest: zeroed and deallocated: 2 MiB read back as zeroes\n");
	return 0;
}

static int kernel_host(const char *port, const char *nqn, const char *bytes_s, const char *seed_s,
		       int digest)
{
	uint64_t bytes = strtoull(bytes_s, NULL, 0), seed = strtoull(seed_s, NULL, 0);
	char opts[512], dev[64], del[128];
	uint8_t *b = aligned_alloc(4096, CHUNK);
	int instance, fd = -1, rc;

	if (mounts())
		return 1;
	snprintf(opts, sizeof(opts), "nqn=%s,transport=tcp,traddr=127.0.0.1,trsvcid=%s%s", nqn, port,
		 digest ? ",hdr_digest,data_digest" : "");
	if (fabrics_connect(opts, &instance))
		return 1;
	snprintf(dev, sizeof(dev), "/dev/nvme%dn1", instance);
	for (int i = 0; i < 300 && fd < 0; i++) {
		fd = open(dev, O_RDWR | O_DIRECT);
		if (fd < 0)
			sleep_ms(100);
	}
	if (fd < 0)
		return fail(dev);
	for (uint64_t off = 0; b && off < bytes; off += CHUNK) {
		pattern_fill(seed, off, b, CHUNK);
		if (pwrite(fd, b, CHUNK, (off_t)off) != CHUNK)
			return fail("writing");
	}
	if (fsync(fd) < 0)
		return fail("flush");
	printf("nvme_guest: Linux's host wrote %llu bytes to %s%s\n", (unsigned long long)bytes, dev,
	       digest ? " with header and data digests" : "");
	rc = check(fd, bytes, seed, dev);
	if (!rc)
		rc = zero_and_discard(fd, bytes, b);
	close(fd);
	free(b);
	snprintf(del, sizeof(del), "/sys/class/nvme/nvme%d/delete_controller", instance);
	if (put(del, "1"))
		return 1;
	return rc;
}

/* The kernel's messages about NVMe, so that the log shows what it made of us. */
static int dmesg(void)
{
	int n = klogctl(10, NULL, 0);
	char *b = malloc((size_t)n + 1), *line, *save;

	n = klogctl(3, b, n);
	if (n < 0)
		return fail("klogctl");
	b[n] = 0;
	for (line = strtok_r(b, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strstr(line, "nvme"))
			printf("%s\n", line);
	free(b);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 6 && !strcmp(argv[1], "nvmet"))
		return nvmet(argv[2], argv[3], argv[4], argv[5]);
	if (argc == 5 && !strcmp(argv[1], "file-check"))
		return file_check(argv[2], argv[3], argv[4]);
	if (argc >= 4 && !strcmp(argv[1], "serve"))
		return serve(atoi(argv[2]), argv + 3);
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "kernel-host"))
		return kernel_host(argv[2], argv[3], argv[4], argv[5], argc == 7);
	if (argc == 2 && !strcmp(argv[1], "dmesg"))
		return dmesg();
	fprintf(stderr, "nvme_guest: bad command\n");
	return 2;
}
