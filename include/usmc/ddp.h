/* usmc's placement interface: direct data placement for protocols that frame
 * their payload on a TCP stream (an upper layer protocol, ULP: NVMe/TCP), in
 * the shape of Linux's ulp_ddp.
 *
 * The ULP parses its headers itself. Before a transfer whose payload it will
 * receive, it registers the destination buffers under a tag (NVMe/TCP: the
 * command id) with usmc_ddp_setup(); when a header announces len bytes of that
 * tag's payload at an offset, usmc_ddp_recv() takes them from the stream
 * straight into those buffers, and usmc_ddp_teardown() releases the tag once
 * the transfer completed. Nothing is staged in between:
 *
 *   - on a connection usmc accelerates, the payload is copied out of the
 *     shared-memory ring into the buffers in one pass that also computes its
 *     CRC32C (USMC_DDP_CAP_RING | USMC_DDP_CAP_CRC);
 *   - on a plain TCP socket, the kernel copies it into them (one readv), which
 *     may also fill a look-ahead buffer with what follows the payload, sparing
 *     the ULP a system call for its next header; the CRC, if asked for, is
 *     summed after the read (USMC_DDP_CAP_PLACE).
 *
 * A ULP on a USMC_DDP_CAP_RING socket should read its headers exactly (never
 * ahead into a payload), since bytes it takes through recv() are bytes the
 * placement cannot place.
 *
 * The sending side has the same saving: usmc_ddp_send() sums the payload it
 * sends as it copies it into the ring, so that the data digest (which follows
 * the data) costs no pass of its own, and covers exactly the bytes that left,
 * whatever changes the source afterwards.
 *
 * The counters (usmc stats) are the kernel's: rx_nvme_tcp_sk_add, _sk_add_fail,
 * _sk_del, _setup, _setup_fail, _teardown, _drop, _resync, _packets, _bytes.
 *
 * Declared by libusmc (link with -lusmc, or run under `usmc run`). One handle
 * serves one thread at a time, as the socket's receive side does. */
#ifndef USMC_DDP_H
#define USMC_DDP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum usmc_ddp_ulp {
	USMC_DDP_NVME_TCP = 1,
};

/* Capabilities of a socket, as it is now (usmc_ddp_caps()). */
#define USMC_DDP_CAP_PLACE 0x1u /* payload lands in the registered buffers */
#define USMC_DDP_CAP_RING 0x2u  /* ...straight from a shared-memory ring */
#define USMC_DDP_CAP_CRC 0x4u   /* ...with the CRC32C computed in the same pass,
				  * and so is what usmc_ddp_send() sends */

/* The most buffers one tag may register. */
#define USMC_DDP_IOV_MAX 64

struct usmc_ddp_config {
	enum usmc_ddp_ulp ulp;
	unsigned max_tags; /* tags are 0 .. max_tags - 1 */
};

struct usmc_ddp;

unsigned usmc_ddp_caps(int fd);

/* Placement for fd, or NULL (errno) when it cannot be offered: counted as
 * sk_add or sk_add_fail. usmc_ddp_sk_del() ends it (sk_del); the socket stays
 * the caller's. */
struct usmc_ddp *usmc_ddp_sk_add(int fd, const struct usmc_ddp_config *cfg);
void usmc_ddp_sk_del(struct usmc_ddp *d);

/* Registers iov (iovcnt buffers) as tag's destination: 0, or -1 (EINVAL: bad
 * tag or count, EBUSY: tag in use) counted as setup_fail. The array itself is
 * used until the teardown, as the kernel uses a ULP's scatter list: it must
 * stay valid and unchanged until then. */
int usmc_ddp_setup(struct usmc_ddp *d, unsigned tag, const struct iovec *iov, int iovcnt);
void usmc_ddp_teardown(struct usmc_ddp *d, unsigned tag);

/* Receives up to len bytes of the stream into tag's buffers, off bytes into
 * them: the number placed (at least 1 unless len is 0), 0 at the end of the
 * stream, or -1 with errno (EAGAIN without MSG_DONTWAIT's wait, ERANGE when
 * the range lies outside what tag registered: counted as a drop). flags:
 * MSG_DONTWAIT. When crc is not NULL, *crc (a CRC32C register) is updated with
 * the bytes placed. ahead (ahead_len bytes) may receive bytes that follow the
 * payload when they come with it at no cost (a plain socket's readv, only once
 * all len bytes came); *ahead_got says how many. */
ssize_t usmc_ddp_recv(struct usmc_ddp *d, unsigned tag, size_t off, size_t len, uint32_t *crc,
		      void *ahead, size_t ahead_len, size_t *ahead_got, int flags);

/* Sends from iov as sendmsg() would (flags: MSG_DONTWAIT, MSG_NOSIGNAL), and,
 * unless crc is NULL, sums what it sent into the CRC32C register *crc: in the
 * same pass that copies it into the ring (USMC_DDP_CAP_CRC), else afterwards,
 * from iov. */
ssize_t usmc_ddp_send(int fd, const struct iovec *iov, int iovcnt, uint32_t *crc, int flags);

/* The ULP counts what the placement could not take: a payload for a tag it had
 * not set up, that it received some other way (drop), and a stream it framed
 * again after losing its place, on a new connection (resync). */
void usmc_ddp_drop(struct usmc_ddp *d);
void usmc_ddp_resync(struct usmc_ddp *d);

#ifdef __cplusplus
}
#endif

#endif
