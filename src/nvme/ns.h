/* A target's namespace: a file, a block device, or memory (a namespace in RAM,
 * so that what is measured is the transport, not a disk). Offsets and lengths
 * are bytes, checked by the caller against ns->size. */
#ifndef USMC_NVME_NS_H
#define USMC_NVME_NS_H

#include <stddef.h>
#include <stdint.h>

struct ns {
	int fd;              /* -1 for memory */
	uint8_t *mem;        /* memory: the namespace itself */
	uint64_t size;       /* bytes, a multiple of the block size */
	unsigned lba_shift;  /* log2 of the block size */
	uint8_t nguid[16];
	char path[256];
};

/* A file (created with size bytes if it does not exist and size is not 0) or a
 * block device; memory when path is NULL. 0, or -1 with a message in err. */
int ns_open(struct ns *ns, const char *path, uint64_t size, unsigned lba_shift, char *err,
	    size_t errlen);
void ns_close(struct ns *ns);

/* The bytes [off, off + len) where they can be sent from without a copy
 * (memory), else NULL: read them with ns_read(). */
const void *ns_map(const struct ns *ns, uint64_t off, size_t len);
int ns_read(const struct ns *ns, void *buf, uint64_t off, size_t len);
int ns_write(const struct ns *ns, const void *buf, uint64_t off, size_t len);
int ns_flush(const struct ns *ns);
/* Zeroes (and, where it can, deallocates) [off, off + len). */
int ns_zero(const struct ns *ns, uint64_t off, uint64_t len);

static inline uint64_t ns_blocks(const struct ns *ns)
{
	return ns->size >> ns->lba_shift;
}

#endif
