/* The part of a scatter list that a byte range covers, for whoever fills or
 * reads a transfer's buffers piece by piece. */
#ifndef USMC_IOV_H
#define USMC_IOV_H

#include <stddef.h>
#include <sys/uio.h>

/* [off, off + len) of iov (cnt buffers) as buffers in win (room for cnt): how
 * many; fewer bytes if the list ends first. */
static inline int iov_window(const struct iovec *iov, int cnt, size_t off, size_t len,
			     struct iovec *win)
{
	int n = 0;

	for (int i = 0; i < cnt && len; i++) {
		size_t l = iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		win[n].iov_base = (char *)iov[i].iov_base + off;
		win[n].iov_len = l - off < len ? l - off : len;
		len -= win[n].iov_len;
		off = 0;
		n++;
	}
	return n;
}

static inline size_t iov_length(const struct iovec *iov, int cnt)
{
	size_t t = 0;

	for (int i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

#endif
