/* Settings read once from the environment when the library loads. */
#ifndef USMC_CONFIG_H
#define USMC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define CONFIG_DEVICES_MAX 2

struct config {
	char rundir[4096];         /* USMC_RUNDIR: the trust domain */
	uint64_t ring_size;        /* USMC_RING_SIZE: default bytes per direction */
	/* USMC_SEND_RING_SIZE, USMC_RECV_RING_SIZE: the rings of the connections this
	 * process opens (the connecting side sizes both), else ring_size */
	uint64_t send_ring, recv_ring;
	uint64_t pending_window;   /* bytes a client may write before the server attaches */
	uint64_t arena_size;       /* USMC_ARENA_SIZE: shared memory per link group arena */
	uint32_t busy_poll_us;     /* USMC_BUSY_POLL_US: spin this long for the peer before sleeping */
	int busy_poll_given;       /* USMC_BUSY_POLL_US was set: the spin is the user's choice */
	uint32_t handshake_ms;     /* USMC_HANDSHAKE_TIMEOUT_MS */
	int disabled;              /* USMC_DISABLE=1: interpose nothing */
	int short_conn;            /* USMC_SHORT_CONN: keep short connections on TCP (shortlived.h) */
	int ncpus;
	/* USMC_DEVICE: the devices to use, in order of preference (enum dev_kind),
	 * and the region the ivshmem device maps ("": the ivshmem PCI device) */
	int devices[CONFIG_DEVICES_MAX];
	int ndevices;
	char region[4096];
	/* USMC_POLL_US, USMC_POLL_MAX_US: where the ivshmem device's polling
	 * interval starts after activity, and how far it grows */
	uint32_t poll_us, poll_max_us;
};

extern struct config cfg;

#define CONFIG_RING_MIN 4096u
#define CONFIG_RING_MAX (64u << 20)
#define CONFIG_BUSY_POLL_MAX 1000000u
#define CONFIG_POLL_MAX 100000u

/* A number in the form the settings take (decimal, 0x hex, K, M or G suffix) from
 * lo to hi; -1 if s is not one. */
int config_number(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* Parses a USMC_DEVICE value into c's devices and region: a list of `lo` and
 * `ivshmem[:PATH]`, comma-separated, in order of preference; `ivshmem[:PATH]`
 * alone means `lo,ivshmem[:PATH]` (a peer on the same kernel is met locally).
 * Returns 0, or -1 with the reason in why. */
int config_devices(struct config *c, const char *s, char *why, size_t len);

/* Fills cfg; returns -1 with a message on stderr for a malformed value. */
int config_load(void);
/* Creates the runtime directory if it is missing; returns 0 if it may be trusted: a
 * directory (not a link) owned by us or by root that others cannot write. Else -1,
 * and in why the directory and what is wrong with it ("runtime directory DIR is
 * writable by others (mode 777)"). usmc check judges with this; usmc run judges
 * ahead of the program, which may run as another user: it makes nothing, a
 * missing directory passes if it could be made, and for root any owner passes. */
int config_rundir_check(int ahead, char *why, size_t len);
/* The library's config_rundir_check(): the first refusal is said on stderr. */
int config_rundir_ready(void);
/* The default runtime directory for this user, used when USMC_RUNDIR is unset. */
void config_default_rundir(char *buf, unsigned len);

#endif
