#include "ddp.h"

#include <errno.h>
#include <stdlib.h>

#include "../util/iov.h"
#include "stats.h"

struct usmc_ddp *ddp_new(int fd, const struct usmc_ddp_config *cfg)
{
	struct usmc_ddp *d;

	if (!cfg || cfg->ulp != USMC_DDP_NVME_TCP || !cfg->max_tags || cfg->max_tags > DDP_TAGS_MAX) {
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (d)
		d->tags = calloc(cfg->max_tags, sizeof(*d->tags));
	if (!d || !d->tags) {
		free(d);
		errno = ENOMEM;
		return NULL;
	}
	d->fd = fd;
	d->ulp = cfg->ulp;
	d->max_tags = cfg->max_tags;
	return d;
}

void ddp_free(struct usmc_ddp *d)
{
	free(d->tags);
	free(d);
}

int ddp_setup(struct usmc_ddp *d, unsigned tag, const struct iovec *iov, int iovcnt)
{
	struct ddp_tag *t = tag < d->max_tags ? &d->tags[tag] : NULL;

	if (!t || iovcnt <= 0 || iovcnt > USMC_DDP_IOV_MAX) {
		stat_add(STAT_DDP + DDP_SETUP_FAIL, 1);
		errno = EINVAL;
		return -1;
	}
	if (t->iovcnt) {
		stat_add(STAT_DDP + DDP_SETUP_FAIL, 1);
		errno = EBUSY;
		return -1;
	}
	t->iov = iov;
	t->len = iov_length(iov, iovcnt);
	t->iovcnt = iovcnt;
	stat_add(STAT_DDP + DDP_SETUP, 1);
	return 0;
}

void ddp_teardown(struct usmc_ddp *d, unsigned tag)
{
	if (tag >= d->max_tags || !d->tags[tag].iovcnt)
		return;
	d->tags[tag].iovcnt = 0;
	stat_add(STAT_DDP + DDP_TEARDOWN, 1);
}

int ddp_window(const struct usmc_ddp *d, unsigned tag, size_t off, size_t len, struct iovec *win)
{
	const struct ddp_tag *t = tag < d->max_tags ? &d->tags[tag] : NULL;

	if (!t || !t->iovcnt || off > t->len || len > t->len - off) {
		stat_add(STAT_DDP + DDP_DROP, 1);
		errno = ERANGE;
		return -1;
	}
	return iov_window(t->iov, t->iovcnt, off, len, win);
}
