#include "ns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

int ns_open(struct ns *ns, const char *path, uint64_t size, unsigned lba_shift, char *err,
	    size_t errlen)
{
	struct stat st;

	memset(ns, 0, sizeof(*ns));
	ns->fd = -1;
	ns->lba_shift = lba_shift;
	if (getrandom(ns->nguid, sizeof(ns->nguid), 0) != sizeof(ns->nguid))
		memset(ns->nguid, 0x5a, sizeof(ns->nguid));
	if (!path) {
		ns->size = size;
		ns->mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (ns->mem == MAP_FAILED) {
			ns->mem = NULL;
			snprintf(err, errlen, "memory namespace of %llu bytes: %s",
				 (unsigned long long)size, strerror(errno));
			return -1;
		}
		/* Written through, so that reads come from memory of their own and
		 * not from the zero page, which every cache keeps warm. */
		for (uint64_t i = 0; i < size / 8; i++)
			((uint64_t *)ns->mem)[i] = i * 8;
		snprintf(ns->path, sizeof(ns->path), "memory");
		return 0;
	}
	snprintf(ns->path, sizeof(ns->path), "%s", path);
	ns->fd = open(path, O_RDWR | O_CLOEXEC | (size ? O_CREAT : 0), 0600);
	if (ns->fd < 0 || fstat(ns->fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		ns_close(ns);
		return -1;
	}
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(ns->fd, BLKGETSIZE64, &ns->size) < 0) {
			snprintf(err, errlen, "%s: size: %s", path, strerror(errno));
			ns_close(ns);
			return -1;
		}
	} else if (S_ISREG(st.st_mode)) {
		if ((uint64_t)st.st_size < size && ftruncate(ns->fd, (off_t)size) < 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			ns_close(ns);
			return -1;
		}
		ns->size = (uint64_t)st.st_size > size ? (uint64_t)st.st_size : size;
	} else {
		snprintf(err, errlen, "%s: neither a file nor a block device", path);
		ns_close(ns);
		return -1;
	}
	ns->size &= ~((1ull << lba_shift) - 1);
	if (!ns->size) {
		snprintf(err, errlen, "%s: smaller than one block", path);
		ns_close(ns);
		return -1;
	}
	return 0;
}

void ns_close(struct ns *ns)
{
	if (ns->mem)
		munmap(ns->mem, ns->size);
	if (ns->fd >= 0)
		close(ns->fd);
	ns->mem = NULL;
	ns->fd = -1;
}

const void *ns_map(const struct ns *ns, uint64_t off, size_t len)
{
	(void)len;
	return ns->mem ? ns->mem + off : NULL;
}

/* pread or pwrite until all of it moved. */
static int file_io(const struct ns *ns, uint8_t *buf, uint64_t off, size_t len, int write)
{
	while (len) {
		ssize_t r = write ? pwrite(ns->fd, buf, len, (off_t)off) : pread(ns->fd, buf, len, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		buf += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return 0;
}

int ns_read(const struct ns *ns, void *buf, uint64_t off, size_t len)
{
	if (!ns->mem)
		return file_io(ns, buf, off, len, 0);
	memcpy(buf, ns->mem + off, len);
	return 0;
}

int ns_write(const struct ns *ns, const void *buf, uint64_t off, size_t len)
{
	if (!ns->mem)
		return file_io(ns, (uint8_t *)buf, off, len, 1);
	memcpy(ns->mem + off, buf, len);
	return 0;
}

int ns_flush(const struct ns *ns)
{
	return ns->mem ? 0 : fdatasync(ns->fd);
}

int ns_zero(const struct ns *ns, uint64_t off, uint64_t len)
{
	static const uint8_t zeros[65536];
	uint64_t range[2] = {off, len};

	if (ns->mem) {
		memset(ns->mem + off, 0, len);
		return 0;
	}
	if (fallocate(ns->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	if (ioctl(ns->fd, BLKZEROOUT, range) == 0)
		return 0;
	while (len) {
		size_t n = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);

		if (ns_write(ns, zeros, off, n) < 0)
			return -1;
		off += n;
		len -= n;
	}
	return 0;
}
