/* A device moves bytes between two endpoints through memory both can map.
 * Connection logic (lgr.c, conn_wake.c) sees a device only through this table, so a
 * device for VMs sharing one region can replace the local one without touching it. */
#ifndef USMC_DEV_H
#define USMC_DEV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct dev_ops {
	const char *name;
	/* Shared memory from which connection segments (DMBs) are carved. */
	int (*arena_create)(uint64_t size);            /* returns a descriptor or -errno */
	void *(*arena_map)(int fd, uint64_t size);     /* NULL on failure */
	void (*arena_unmap)(void *base, uint64_t size);
	/* Doorbells for poll and epoll: a pair of ends, one for each side. An end
	 * is polled and cleared by its side when it waits, and rung to wake the
	 * other. Ringing never blocks, whatever the other side does to the
	 * descriptor it holds. Whoever keeps an end moves it out of the
	 * application's range (sys_fd_high); an end passed on is not worth it. */
	int (*doorbell_create)(int fds[2]);
	void (*doorbell_ring)(int fd);
	void (*doorbell_clear)(int fd);
	/* Control channel: reliable, message-oriented, passes descriptors, and
	 * reports the peer's death. A path starting with '@' is abstract. */
	int (*ctl_listen)(const char *path);
	int (*ctl_connect)(const char *path);
	int (*ctl_accept)(int lfd);
	ssize_t (*ctl_send)(int fd, const void *msg, size_t len, const int *fds, int nfds);
	/* Returns the message length, 0 on hang-up, -errno (-EAGAIN when empty);
	 * *nfds in: room in fds, out: descriptors received (all CLOEXEC). */
	ssize_t (*ctl_recv)(int fd, void *msg, size_t len, int *fds, int *nfds);
};

extern const struct dev_ops dev_lo;

#endif
