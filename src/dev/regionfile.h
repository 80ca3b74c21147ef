/* Where a region comes from, and mapping it.
 *
 * In a guest, the ivshmem PCI device (vendor 0x1af4, device 0x1110), found
 * through sysfs: its BAR 2 is the shared memory, mapped through the device's
 * resource2 file (root only, as every sysfs resource file). On the host, or to
 * name one device among several, a path: a PCI device's sysfs directory, one of
 * its resource files, or any file (the one QEMU's memory-backend-file maps).
 *
 * How the mapping is cached depends on the platform: sysfs maps a BAR uncached
 * on x86, while a hypervisor backing the BAR with ordinary memory may ignore
 * that. resource2_wc would write-combine, which reorders stores, and the rings
 * rely on stores being seen in order; so the mapping taken is resource2 (or the
 * file), and what its loads cost is measured and reported. */
#ifndef USMC_REGIONFILE_H
#define USMC_REGIONFILE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "region.h"

#define IVSHMEM_VENDOR 0x1af4
#define IVSHMEM_DEVICE 0x1110

/* A region an ivshmem server hands out (`usmc region serve`): USMC_DEVICE's
 * ivshmem:unix:SOCKET. The socket's path, or NULL for a file or device. */
#define REGION_SERVER_PREFIX "unix:"
static inline const char *region_server(const char *spec)
{
	return spec && !strncmp(spec, REGION_SERVER_PREFIX, sizeof(REGION_SERVER_PREFIX) - 1)
		       ? spec + sizeof(REGION_SERVER_PREFIX) - 1
		       : NULL;
}

struct region_map {
	int fd;
	int vfio;               /* BAR 2 mapped through vfio-pci (ivs_vfio.c), not sysfs */
	unsigned char *base;
	uint64_t size;
	char path[512];         /* what is mapped */
	char pci[256];          /* its PCI device's sysfs directory, "" for a file */
	int cached;             /* loads hit the cache (measured) */
	double load_ns;         /* what a load of a line cost */
};

/* The sysfs directory of the ivshmem PCI device spec names (NULL or "": the
 * first one): 1, or 0 when spec names something else (a file), or -1 with why. */
int region_pci_dir(const char *spec, char *dir, size_t dlen, char *why, size_t len);
/* Measures what a load of m costs, into m->load_ns and m->cached. */
void region_map_measure(struct region_map *m);
/* Maps the region spec names (NULL or "": the first ivshmem PCI device), to
 * read only when ro. Returns 0, or -1 with the reason in why. */
int region_map_open(struct region_map *m, const char *spec, int ro, char *why, size_t len);
/* The same for a descriptor (the one an ivshmem server sends), named name in
 * what is said of it; m takes fd, closed on failure. */
int region_map_fd(struct region_map *m, int fd, const char *name, int ro, char *why, size_t len);
/* The same for a descriptor (the one an ivshmem server sends), which name names
 * in what is said of it; m takes fd, and closes it on failure. */
int region_map_fd(struct region_map *m, int fd, const char *name, int ro, char *why, size_t len);
void region_map_close(struct region_map *m);

/* Attaches r to m's memory; a blank region is formatted first (lease_ms), by
 * whoever comes first. Returns 0, or -1 with the reason in why. */
int region_open(struct region *r, const struct region_map *m, uint32_t lease_ms, char *why,
		size_t len);

#endif
