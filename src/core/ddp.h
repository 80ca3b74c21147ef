/* Direct data placement's bookkeeping (include/usmc/ddp.h): the buffers each
 * tag registered, and the window of them a placement fills. Which way the
 * bytes come (a ring, the kernel) is src/interpose/ddp.c's business; what the
 * tags mean is the upper layer protocol's. */
#ifndef USMC_CORE_DDP_H
#define USMC_CORE_DDP_H

#include <sys/uio.h>

#include "../../include/usmc/ddp.h"

/* The counters carry the names Linux gives them: ulp_ddp counts for NVMe/TCP,
 * the one protocol it places for. */
#define DDP_STAT_PREFIX "rx_nvme_tcp_"

/* The most tags: NVMe/TCP command ids are 16 bits. */
#define DDP_TAGS_MAX 65536u

struct ddp_tag {
	const struct iovec *iov; /* the caller's, until teardown */
	int iovcnt;              /* 0: not set up */
	size_t len;
};

struct usmc_ddp {
	int fd;
	enum usmc_ddp_ulp ulp;
	unsigned max_tags;
	struct ddp_tag *tags;
};

struct usmc_ddp *ddp_new(int fd, const struct usmc_ddp_config *cfg);
void ddp_free(struct usmc_ddp *d);
int ddp_setup(struct usmc_ddp *d, unsigned tag, const struct iovec *iov, int iovcnt);
void ddp_teardown(struct usmc_ddp *d, unsigned tag);
/* The part [off, off + len) of tag's buffers as iovecs in win (room for
 * USMC_DDP_IOV_MAX): their count, or -1 (ERANGE) when tag is not set up or the
 * range goes past its end. */
int ddp_window(const struct usmc_ddp *d, unsigned tag, size_t off, size_t len, struct iovec *win);

#endif
