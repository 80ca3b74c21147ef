/* A connection handed to another program: exec() writes one record per attached
 * connection into the memfd named by USMC_HANDOVER, and a socket passed with
 * SCM_RIGHTS travels with one (src/interpose/exec.c, fdpass.c). A passed record
 * comes from another process, so the one who takes it up trusts nothing in it
 * before conn_export_valid() has said yes. */
#ifndef USMC_EXPORT_H
#define USMC_EXPORT_H

#include <stdint.h>
#include <sys/time.h>

/* An attached connection's state: plain values and the numbers of inheritable
 * copies of the descriptors it needs. */
struct conn_export {
	int fd;                     /* the TCP socket: the same number after exec */
	uint64_t inode;             /* ...and its inode, by which the next program finds
	                               every descriptor of it, whatever their numbers */
	int family, server, nonblock, shut_rd, shut_wr, abortive;
	int arena_fd, bell, hold_fd; /* arena_fd: -1 for a device that names arenas
					itself; hold_fd: -1 when not shared */
	int dev;                    /* its device (enum dev_kind) */
	uint32_t arena_id;
	uint64_t link[2];           /* the device's name of its channel (ctl_export) */
	uint64_t arena_size, seg_off, seg_size, ring_size[2];
	uint64_t tx_pos, tx_peer, tx_cap, rx_pos, rx_peer, rx_urg;
	uint32_t tx_rung, rx_rung;
	int rx_urg_read, oobinline;
	struct timeval rcvtimeo, sndtimeo;
	int sndbuf, rcvbuf, sndbuf_eff, rcvbuf_eff, rcvlowat, notsent_lowat;
};

/* Whether x holds together: an address family, rings of sizes a proposal could
 * have, a page-aligned segment holding them inside its arena, cursors that fit
 * their rings as this end left them (the urgent one among what was produced),
 * flags that are flags, and timeouts and sizes setsockopt() would take. The descriptors are checked by whoever maps them. */
int conn_export_valid(const struct conn_export *x);

/* A passed record names its descriptors by index into the message's descriptor
 * array: the socket among the application's own, [0, first), the others (or -1)
 * among those appended for usmc, [first, last), none twice across the message's
 * records. taken[i - first] marks appended ones already claimed. Returns 1 and
 * marks the record's, or 0 and marks nothing. */
int conn_export_claim(const struct conn_export *x, int first, int last, unsigned char *taken);

#endif
