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

static int env_u64(const char *name, uint64_t def, uint64_t lo, uint64_t hi, uint64_t *out)
{
	const char *s = getenv(name);
	char *end;

	*out = def;
	if (!s || !*s)
		return 0;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (errno || *end || v < lo || v > hi) {
		fprintf(stderr, "usmc: %s=%s: expected a number from %llu to %llu\n", name, s,
			(unsigned long long)lo, (unsigned long long)hi);
		return -1;
	}
	*out = v;
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
	bad |= env_u64("USMC_RING_SIZE", 256 << 10, 4096, 64 << 20, &v);
	cfg.ring_size = pow2_ceil(v);
	bad |= env_u64("USMC_ARENA_SIZE", 256 << 20, 1 << 20, 1ull << 32, &v);
	cfg.arena_size = (v + 4095) & ~4095ull;
	bad |= env_u64("USMC_BUSY_POLL_US", 10, 0, 1000000, &v);
	cfg.busy_poll_us = (uint32_t)v;
	bad |= env_u64("USMC_HANDSHAKE_TIMEOUT_MS", 10000, 1, 3600000, &v);
	cfg.handshake_ms = (uint32_t)v;
	bad |= env_u64("USMC_DISABLE", 0, 0, 1, &v);
	cfg.disabled = (int)v;
	const char *socks = getenv("USMC_SOCKETS");
	cfg.smc_only = -1;
	if (socks && !strcmp(socks, "all")) {
		cfg.smc_only = 0;
	} else if (socks && !strcmp(socks, "smc")) {
		cfg.smc_only = 1;
	} else if (socks) {
		fprintf(stderr, "usmc: USMC_SOCKETS=%s: expected all or smc\n", socks);
		bad = 1;
	}
	/* A client's bytes wait in the ring until the server attaches; if it declines
	 * they are replayed on TCP, so keep them within what a fresh loopback socket
	 * takes without blocking. */
	cfg.pending_window = cfg.ring_size < (64 << 10) ? cfg.ring_size : (64 << 10);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	cfg.ncpus = n > 0 ? (int)n : 1;
	return bad ? -1 : 0;
}
