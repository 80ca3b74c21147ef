#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct config cfg;

void config_default_rundir(char *buf, unsigned len)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	struct stat st;

	if (x && *x && stat(x, &st) == 0 && S_ISDIR(st.st_mode) && access(x, W_OK) == 0)
		snprintf(buf, len, "%s/usmc", x);
	else
		snprintf(buf, len, "/tmp/usmc-%u", (unsigned)getuid());
}

int config_rundir_ready(void)
{
	struct stat st;

	/* Anyone may make the directory first under /tmp. Whoever can write it can
	 * replace a listener's entry and be handed the sockets of every client that
	 * follows it; whoever owns it can make it writable. Group write is a choice
	 * its owner made to share it. */
	mkdir(cfg.rundir, 0700);
	if (lstat(cfg.rundir, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    (st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & S_IWOTH))
		return -1;
	return 0;
}

int config_number(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	int shift = *end == 'k' || *end == 'K' ? 10 : *end == 'm' || *end == 'M' ? 20 : 0;
	if (shift && v > (~0ull >> shift))
		return -1;
	v <<= shift;
	end += shift != 0;
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int env_u64(const char *name, uint64_t def, uint64_t lo, uint64_t hi, uint64_t *out)
{
	const char *s = getenv(name);

	*out = def;
	if (!s || !*s)
		return 0;
	if (config_number(s, lo, hi, out) < 0) {
		fprintf(stderr, "usmc: %s=%s: expected a number from %llu to %llu\n", name, s,
			(unsigned long long)lo, (unsigned long long)hi);
		return -1;
	}
	return 0;
}

static uint64_t pow2_ceil(uint64_t v)
{
	uint64_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

int config_load(void)
{
	const char *rd = getenv("USMC_RUNDIR");
	uint64_t v;
	int bad = 0;

	if (rd && *rd)
		snprintf(cfg.rundir, sizeof(cfg.rundir), "%s", rd);
	else
		config_default_rundir(cfg.rundir, sizeof(cfg.rundir));
	bad |= env_u64("USMC_RING_SIZE", 256 << 10, CONFIG_RING_MIN, CONFIG_RING_MAX, &v);
	cfg.ring_size = pow2_ceil(v);
	bad |= env_u64("USMC_SEND_RING_SIZE", cfg.ring_size, CONFIG_RING_MIN, CONFIG_RING_MAX, &v);
	cfg.send_ring = pow2_ceil(v);
	bad |= env_u64("USMC_RECV_RING_SIZE", cfg.ring_size, CONFIG_RING_MIN, CONFIG_RING_MAX, &v);
	cfg.recv_ring = pow2_ceil(v);
	bad |= env_u64("USMC_ARENA_SIZE", 256 << 20, 1 << 20, 1ull << 32, &v);
	cfg.arena_size = (v + 4095) & ~4095ull;
	bad |= env_u64("USMC_BUSY_POLL_US", 10, 0, CONFIG_BUSY_POLL_MAX, &v);
	cfg.busy_poll_us = (uint32_t)v;
	bad |= env_u64("USMC_HANDSHAKE_TIMEOUT_MS", 10000, 1, 3600000, &v);
	cfg.handshake_ms = (uint32_t)v;
	bad |= env_u64("USMC_DISABLE", 0, 0, 1, &v);
	cfg.disabled = (int)v;
	/* A client's bytes wait in the ring until the server attaches; if it declines
	 * they are replayed on TCP, so keep them within what a fresh loopback socket
	 * takes without blocking. */
	cfg.pending_window = cfg.send_ring < (64 << 10) ? cfg.send_ring : (64 << 10);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	cfg.ncpus = n > 0 ? (int)n : 1;
	return bad ? -1 : 0;
}
