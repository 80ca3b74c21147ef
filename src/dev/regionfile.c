#include "regionfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/sys.h"

#define PCI_DEVICES "/sys/bus/pci/devices"

/* The hexadecimal number in a sysfs attribute file, -1 if none. */
static long sysfs_hex(const char *dir, const char *name)
{
	char path[600], buf[32];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (sys_read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	return strtol(buf, NULL, 16);
}

static int is_ivshmem(const char *dir)
{
	return sysfs_hex(dir, "vendor") == IVSHMEM_VENDOR && sysfs_hex(dir, "device") == IVSHMEM_DEVICE;
}

/* The first ivshmem device's sysfs directory, in order of its address. */
static int find_device(char *out, size_t len)
{
	struct dirent **names;
	int n = scandir(PCI_DEVICES, &names, NULL, alphasort), found = 0;

	for (int i = 0; i < n; i++) {
		char dir[400];
		snprintf(dir, sizeof(dir), PCI_DEVICES "/%s", names[i]->d_name);
		if (!found && names[i]->d_name[0] != '.' && is_ivshmem(dir)) {
			snprintf(out, len, "%s", dir);
			found = 1;
		}
		free(names[i]);
	}
	if (n >= 0)
		free(names);
	return found ? 0 : -1;
}

/* What a load of one line costs in m: every line of the first 256 KiB (or what
 * there is) read twice, the second pass timed, so that a cached mapping is
 * measured with its lines in the cache. */
void region_map_measure(struct region_map *m)
{
	uint64_t bytes = m->size < (256u << 10) ? m->size : (256u << 10), lines = bytes / 64;
	volatile const unsigned char *p = m->base;
	struct timespec a, b;
	unsigned sum = 0;

	for (int pass = 0; pass < 2; pass++) {
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (uint64_t i = 0; i < lines; i++)
			sum += p[i * 64];
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	(void)sum;
	double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	m->load_ns = lines ? ns / (double)lines : 0;
	/* A cached line costs a few nanoseconds, an uncached one a hundred or more. */
	m->cached = m->load_ns < 20;
}

/* Maps m->fd, which m->path names; closes it on failure. */
static int map_opened(struct region_map *m, int ro, char *why, size_t len)
{
	struct stat st;

	if (fstat(m->fd, &st) < 0 || st.st_size < (off_t)REGION_PAGE) {
		snprintf(why, len, "%s: %s", m->path,
			 st.st_size < (off_t)REGION_PAGE ? "too small to hold a region" : strerror(errno));
		region_map_close(m);
		return -1;
	}
	m->size = (uint64_t)st.st_size;
	void *p = mmap(NULL, m->size, PROT_READ | (ro ? 0 : PROT_WRITE), MAP_SHARED, m->fd, 0);
	if (p == MAP_FAILED) {
		snprintf(why, len, "%s: cannot map it: %s", m->path, strerror(errno));
		region_map_close(m);
		return -1;
	}
	m->base = p;
	m->fd = sys_fd_high(m->fd);
	region_map_measure(m);
	return 0;
}

int region_pci_dir(const char *spec, char *dir, size_t dlen, char *why, size_t len)
{
	struct stat st;

	*dir = 0;
	if (!spec || !*spec) {
		if (find_device(dir, dlen) < 0) {
			snprintf(why, len,
				 "no ivshmem device (PCI %04x:%04x) in " PCI_DEVICES
				 ", and no region named",
				 IVSHMEM_VENDOR, IVSHMEM_DEVICE);
			return -1;
		}
	} else if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (!is_ivshmem(spec)) {
			snprintf(why, len, "%s is not an ivshmem PCI device (%04x:%04x)", spec,
				 IVSHMEM_VENDOR, IVSHMEM_DEVICE);
			return -1;
		}
		snprintf(dir, dlen, "%s", spec);
	}
	return *dir ? 1 : 0;
}

int region_map_open(struct region_map *m, const char *spec, int ro, char *why, size_t len)
{
	char dir[400];

	memset(m, 0, sizeof(*m));
	m->fd = -1;
	if (region_pci_dir(spec, dir, sizeof(dir), why, len) < 0)
		return -1;
	if (*dir) {
		snprintf(m->pci, sizeof(m->pci), "%s", dir);
		snprintf(m->path, sizeof(m->path), "%s/resource2", dir);
	} else {
		snprintf(m->path, sizeof(m->path), "%s", spec);
	}
	m->fd = real.open(m->path, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (m->fd < 0) {
		int e = errno;
		snprintf(why, len, "%s: %s%s", m->path, strerror(e),
			 e == EACCES && *m->pci ? " (a PCI resource file is root's)" : "");
		return -1;
	}
	return map_opened(m, ro, why, len);
}

int region_map_fd(struct region_map *m, int fd, const char *name, int ro, char *why, size_t len)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->path, sizeof(m->path), "%s", name);
	m->fd = fd;
	return map_opened(m, ro, why, len);
}

void region_map_close(struct region_map *m)
{
	if (m->base)
		munmap(m->base, m->size);
	if (m->fd >= 0)
		real.close(m->fd);
	m->base = NULL;
	m->fd = -1;
}

int region_open(struct region *r, const struct region_map *m, uint32_t lease_ms, char *why,
		size_t len)
{
	struct region_hdr *h = (struct region_hdr *)m->base;
	uint64_t me = 0, seen = 0, since = 0;
	int e;

	if (getrandom(&me, sizeof(me), GRND_NONBLOCK) != sizeof(me) || !me)
		me = sys_now_ns() | 1;
	/* Blank: the first user formats it, the others wait for READY. A
	 * formatter that does not finish is replaced once it was seen at work
	 * for REGION_FORMAT_STALE_MS. */
	while ((e = region_attach(r, m->base, m->size)) == REGION_EBLANK) {
		uint64_t now = sys_now_ns(), f = atomic_load(&h->formatter);
		if (f != seen || !f) {
			seen = f;
			since = now;
		}
		int stale = f && now - since > REGION_FORMAT_STALE_MS * 1000000ull;
		if (region_claim_format(m->base, me, stale ? f : 0)) {
			struct region_hdr layout;
			uint64_t id = 0;
			if (region_layout_default(&layout, m->size, lease_ms) < 0) {
				/* Left blank for someone who can. */
				atomic_store(&h->state, REGION_BLANK);
				snprintf(why, len, "%s: %llu bytes are too few for a region", m->path,
					 (unsigned long long)m->size);
				return -1;
			}
			if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
				id = sys_now_ns();
			region_format(m->base, &layout, id);
			continue;
		}
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	if (e != REGION_OK) {
		snprintf(why, len, "%s: %s", m->path, region_strerror(e));
		return -1;
	}
	return 0;
}
