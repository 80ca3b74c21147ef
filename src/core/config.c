#include "config.h"

#include <errno.h>
#include <libgen.h>
#include <stdatomic.h>
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

/* Whether a missing runtime directory could be made: its parent is a directory
 * we may write in. If not, errno says why. */
static int makeable(void)
{
	char parent[sizeof(cfg.rundir)];

	snprintf(parent, sizeof(parent), "%s", cfg.rundir);
	return access(dirname(parent), W_OK | X_OK) == 0;
}

int config_rundir_check(int ahead, char *why, size_t len)
{
	struct stat st;
	/* Ahead of a program that may become another user (root's runuser, su), the
	 * directory is left for the program to make, as that user. */
	int made = ahead ? 0 : (mkdir(cfg.rundir, 0700) < 0 ? errno : 0);

	/* Anyone may make the directory first under /tmp. Whoever can write it can
	 * replace a listener's entry and be handed the sockets of every client that
	 * follows it; whoever owns it can make it writable. Group write is a choice
	 * its owner made to share it. */
	if (lstat(cfg.rundir, &st) < 0) {
		if (ahead && errno == ENOENT && makeable())
			return 0;
		snprintf(why, len, "runtime directory %s cannot be created: %s", cfg.rundir,
			 strerror(made && made != EEXIST ? made : errno));
	} else if (S_ISLNK(st.st_mode)) {
		snprintf(why, len, "runtime directory %s is a symbolic link", cfg.rundir);
	} else if (!S_ISDIR(st.st_mode)) {
		snprintf(why, len, "runtime directory %s is not a directory", cfg.rundir);
	} else if (st.st_uid != geteuid() && st.st_uid != 0 && !(ahead && geteuid() == 0)) {
		snprintf(why, len, "runtime directory %s belongs to uid %u, neither to uid %u nor to root",
			 cfg.rundir, (unsigned)st.st_uid, (unsigned)geteuid());
	} else if (st.st_mode & S_IWOTH) {
		snprintf(why, len, "runtime directory %s is writable by others (mode %o)", cfg.rundir,
			 (unsigned)(st.st_mode & 07777));
	} else {
		return 0;
	}
	return -1;
}

int config_rundir_ready(void)
{
	static atomic_flag said = ATOMIC_FLAG_INIT;
	char why[sizeof(cfg.rundir) + 128];

	if (config_rundir_check(0, why, sizeof(why)) == 0)
		return 0;
	/* Asked at every connection that could be accelerated: once is enough. */
	if (!atomic_flag_test_and_set(&said))
		fprintf(stderr, "usmc: %s; running without acceleration\n", why);
	return -1;
}

int config_number(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	int shift = *end == 'k' || *end == 'K'	 ? 10
		    : *end == 'm' || *end == 'M' ? 20
		    : *end == 'g' || *end == 'G' ? 30
						 : 0;
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

/* The kinds of src/dev/dev.h's enum dev_kind, by name. */
static const char *const device_names[CONFIG_DEVICES_MAX] = {"lo", "ivshmem"};

int config_devices(struct config *c, const char *s, char *why, size_t len)
{
	char buf[sizeof(c->region) + 16];

	c->ndevices = 0;
	c->region[0] = 0;
	if (strlen(s) >= sizeof(buf)) {
		snprintf(why, len, "too long");
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *path = strchr(t, ':');
		int k = -1;
		if (path)
			*path++ = 0;
		for (int i = 0; i < CONFIG_DEVICES_MAX; i++)
			if (!strcmp(t, device_names[i]))
				k = i;
		if (k < 0 || (path && k != 1)) {
			snprintf(why, len, "unknown device '%s' (lo, ivshmem or ivshmem:PATH)", t);
			return -1;
		}
		for (int i = 0; i < c->ndevices; i++)
			if (c->devices[i] == k) {
				snprintf(why, len, "%s named twice", t);
				return -1;
			}
		if (path)
			snprintf(c->region, sizeof(c->region), "%s", path);
		c->devices[c->ndevices++] = k;
	}
	if (!c->ndevices) {
		snprintf(why, len, "no device named");
		return -1;
	}
	/* The region alone: the local device first all the same. */
	if (c->ndevices == 1 && c->devices[0] == 1) {
		c->devices[1] = 1;
		c->devices[0] = 0;
		c->ndevices = 2;
	}
	return 0;
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
	cfg.busy_poll_given = getenv("USMC_BUSY_POLL_US") != NULL;
	bad |= env_u64("USMC_HANDSHAKE_TIMEOUT_MS", 10000, 1, 3600000, &v);
	cfg.handshake_ms = (uint32_t)v;
	bad |= env_u64("USMC_DISABLE", 0, 0, 1, &v);
	cfg.disabled = (int)v;
	bad |= env_u64("USMC_SHORT_CONN", 1, 0, 1, &v);
	cfg.short_conn = (int)v;
	bad |= env_u64("USMC_POLL_US", 50, 1, CONFIG_POLL_MAX, &v);
	cfg.poll_us = (uint32_t)v;
	bad |= env_u64("USMC_POLL_MAX_US", 2000, cfg.poll_us, CONFIG_POLL_MAX, &v);
	cfg.poll_max_us = (uint32_t)v;
	const char *dev = getenv("USMC_DEVICE");
	char why[256];
	if (config_devices(&cfg, dev && *dev ? dev : "lo", why, sizeof(why)) < 0) {
		fprintf(stderr, "usmc: USMC_DEVICE=%s: %s\n", dev, why);
		bad = 1;
	}
	/* A client's bytes wait in the ring until the server attaches; if it declines
	 * they are replayed on TCP, so keep them within what a fresh loopback socket
	 * takes without blocking. */
	cfg.pending_window = cfg.send_ring < (64 << 10) ? cfg.send_ring : (64 << 10);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	cfg.ncpus = n > 0 ? (int)n : 1;
	return bad ? -1 : 0;
}
