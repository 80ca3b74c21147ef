/* Sealed memory files: how shared memory travels between processes of one
 * kernel (the local device's arenas, an extension's memory). The seals keep a
 * file from ever being shorter than its maker made it, so a mapping of it
 * cannot fault on a page the sender took away. */
#ifndef USMC_MEMFD_H
#define USMC_MEMFD_H

#include <stdint.h>

/* A new file of size bytes, sealed (close-on-exec); -errno on failure. */
int memfd_sealed(const char *name, uint64_t size);
/* fd mapped shared, size bytes, if it is sealed and holds that many; NULL
 * (errno set) otherwise. */
void *memfd_map(int fd, uint64_t size);

#endif
