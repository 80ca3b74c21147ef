/* usmc region: make a region for the ivshmem device, and show what is in one. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/config.h"
#include "../core/sys.h"
#include "../dev/chan.h"
#include "../dev/heap.h"
#include "../dev/listeners.h"
#include "../dev/regionfile.h"
#include "../dev/slots.h"
#include "json.h"
#include "usmc.h"

_Noreturn static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void fail(const char *fmt, ...)
{
	va_list ap;

	fputs("usmc region: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

const char *region_value_of(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc)
		die_usage();
	return argv[++*i];
}

uint64_t region_number(const char *opt, const char *s, uint64_t lo, uint64_t hi)
{
	uint64_t v;

	if (config_number(s, lo, hi, &v) < 0) {
		fprintf(stderr, "usmc region: %s %s: expected a number from %llu to %llu\n", opt, s,
			(unsigned long long)lo, (unsigned long long)hi);
		exit(2);
	}
	return v;
}

/* ------------------------------------------------------------ create */

static int create(int argc, char **argv)
{
	const char *path = NULL;
	uint64_t size = 0, lease = REGION_LEASE_DEFAULT_MS, slots = SLOTS_DEFAULT;
	int force = 0;
	char why[1024];

	for (int i = 1; i < argc; i++) {
		if (is_help(argv[i]))
			help_exit();
		else if (!strcmp(argv[i], "--size"))
			size = region_number("--size", region_value_of(argc, argv, &i),
					     REGION_MIN_SIZE, REGION_MAX_SIZE);
		else if (!strcmp(argv[i], "--lease"))
			lease = region_number("--lease", region_value_of(argc, argv, &i),
					      REGION_LEASE_MIN_MS, REGION_LEASE_MAX_MS);
		else if (!strcmp(argv[i], "--slots"))
			slots = region_number("--slots", region_value_of(argc, argv, &i), 2,
					      REGION_SLOTS_MAX);
		else if (!strcmp(argv[i], "--force"))
			force = 1;
		else if (argv[i][0] != '-' && !path)
			path = argv[i];
		else
			die_usage();
	}
	if (!path)
		die_usage();
	/* A file is made or grown to the size asked for; a device has its own. */
	struct stat st;
	if (size && (stat(path, &st) < 0 || S_ISREG(st.st_mode))) {
		int fd = real.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
			fail("%s: %s", path, strerror(errno));
		real.close(fd);
	} else if (stat(path, &st) < 0) {
		fail("%s: %s (--size makes it)", path, strerror(errno));
	}
	struct region_map m;
	if (region_map_open(&m, path, 0, why, sizeof(why)) < 0)
		fail("%s", why);
	struct region_hdr *h = (struct region_hdr *)m.base, layout;
	if (h->magic && !force)
		fail("%s holds a region already (format %u): --force formats it again, which ends "
		     "every connection through it",
		     path, h->version);
	if (region_layout(&layout, m.size, (uint32_t)slots, CHANS_DEFAULT, LISTENERS_DEFAULT,
			  (uint32_t)lease) < 0)
		fail("%s: %llu bytes cannot hold a region of %llu slots (at least %u bytes)", path,
		     (unsigned long long)m.size, (unsigned long long)slots, REGION_MIN_SIZE);
	uint64_t id = 0;
	if (getrandom(&id, sizeof(id), 0) != sizeof(id))
		id = sys_now_ns();
	/* Anyone attached sees it formatted again, and lets go. */
	atomic_store(&h->state, REGION_FORMATTING);
	region_format(m.base, &layout, id);
	printf("%s: region of %llu bytes, %u slots, lease %u ms, heap %llu bytes\n", path,
	       (unsigned long long)layout.size, layout.nslots, layout.lease_ms,
	       (unsigned long long)(layout.heap_granules * REGION_PAGE));
	region_map_close(&m);
	return 0;
}

/* ------------------------------------------------------------ status */

struct peer {
	int live, moving;
	uint64_t key, heartbeat, granules;
	uint32_t conns;
	int64_t bell;               /* its ivshmem peer ID, -1 for none */
	const char *mapping;
	int cached;
	char name[65];
};

struct census {
	struct peer p[REGION_SLOTS_MAX];
	struct listener l[64];
	int nl, more_listeners;
	uint32_t chans;
	uint64_t used;
};

/* What the region holds now; the heartbeats looked at twice, 0.2 s apart: a
 * peer that sleeps in the library moves its own within that. One that takes
 * interrupts, and sleeps until one comes, moves it a tenth of the lease apart
 * (poller.c): where there is one, the second look waits that long. */
static void take_census(const struct region *r, struct census *c)
{
	uint64_t by_slot[REGION_SLOTS_MAX];

	memset(c, 0, sizeof(*c));
	for (uint32_t i = 0; i < r->h.nslots; i++) {
		struct region_slot *s = slot_at(r, i);
		uint64_t w = atomic_load(&s->word);
		struct peer *p = &c->p[i];
		p->live = (w & 0xff) == SLOT_LIVE ? 1 : (w & 0xff) == SLOT_DEAD ? -1 : 0;
		p->key = slot_key(i, w >> 8);
		p->heartbeat = atomic_load(&s->heartbeat);
		p->conns = atomic_load(&s->conns);
		uint32_t d = atomic_load(&s->doorbell);
		p->bell = d && d - 1 <= 0xffff ? (int64_t)d - 1 : -1;
		uint8_t k = s->mapping;
		p->mapping = slot_mapping_names[k < SLOT_MAPPINGS ? k : SLOT_MAP_UNKNOWN];
		p->cached = s->mapping_cached != 0;
		memcpy(p->name, s->name, sizeof(s->name));
		p->name[64] = 0;
		for (char *q = p->name; *q; q++)
			if ((unsigned char)*q < ' ' || *q == 0x7f)
				*q = '?';
	}
	uint64_t wait_ms = 200;
	for (uint32_t i = 0; i < r->h.nslots; i++)
		if (c->p[i].live > 0 && c->p[i].bell >= 0 && r->h.lease_ms / 10 + 100 > wait_ms)
			wait_ms = r->h.lease_ms / 10 + 100;
	nanosleep(&(struct timespec){(time_t)(wait_ms / 1000), (long)(wait_ms % 1000) * 1000000}, NULL);
	for (uint32_t i = 0; i < r->h.nslots; i++)
		c->p[i].moving = atomic_load(&slot_at(r, i)->heartbeat) != c->p[i].heartbeat;
	heap_usage(r, &c->used, by_slot);
	for (uint32_t i = 0; i < r->h.nslots; i++)
		c->p[i].granules = by_slot[i];
	for (uint32_t i = 0; i < r->h.nlisteners; i++) {
		struct listener l;
		if (listeners_read(r, i, &l) < 0)
			continue;
		if (c->nl < 64)
			c->l[c->nl++] = l;
		else
			c->more_listeners = 1;
	}
	for (uint32_t i = 0; i < r->h.nchans; i++)
		c->chans += (atomic_load(&chan_at(r, i)->word) & 0xff) != CHAN_FREE;
}

static const char *liveness(const struct peer *p)
{
	return p->live < 0 ? "dead" : p->moving ? "live" : "quiet";
}

static void addr_text(const struct listener_addr *a, char *buf, size_t len)
{
	struct addr x = {.family = a->family == 4 ? AF_INET : AF_INET6};

	memcpy(x.ip, a->ip, sizeof(x.ip));
	addr_format(&x, buf, len);
	size_t n = strlen(buf);
	if (a->prefix != (a->family == 4 ? 32 : 128))
		snprintf(buf + n, len - n, "/%u", a->prefix);
}

static void mib(uint64_t bytes, char *buf, size_t len)
{
	snprintf(buf, len, "%.1fM", (double)bytes / (1 << 20));
}

static void print_text(const struct region_map *m, const struct region *r, const struct census *c)
{
	char a[32], b[32];

	printf("region %s: %llu bytes, format %u, id %016llx, lease %u ms\n", m->path,
	       (unsigned long long)r->h.size, r->h.version, (unsigned long long)r->h.format_id,
	       r->h.lease_ms);
	printf("mapping: %s, %s (%.1f ns a line)\n", *m->pci ? "ivshmem PCI BAR 2" : "file",
	       m->cached ? "cached" : "uncached", m->load_ns);
	mib(c->used * REGION_PAGE, a, sizeof(a));
	mib(r->h.heap_granules * REGION_PAGE, b, sizeof(b));
	printf("memory: %s of %s in use; channels (link groups): %u of %u\n", a, b, c->chans,
	       r->h.nchans);
	printf("%-4s %-12s %-6s %-12s %-8s %-10s %-14s %-7s %s\n", "Slot", "Key", "State",
	       "Heartbeat", "Conns", "Memory", "Mapping", "PeerID", "Process");
	for (uint32_t i = 0; i < r->h.nslots; i++) {
		const struct peer *p = &c->p[i];
		if (!p->live)
			continue;
		mib(p->granules * REGION_PAGE, a, sizeof(a));
		snprintf(b, sizeof(b), "%s,%s", p->mapping, p->cached ? "cached" : "uncached");
		char id[16] = "-";
		if (p->bell >= 0)
			snprintf(id, sizeof(id), "%lld", (long long)p->bell);
		printf("%-4u %-12" PRIx64 " %-6s %-12" PRIu64 " %-8u %-10s %-14s %-7s %s\n", i,
		       p->key, liveness(p), p->heartbeat, p->conns, a, b, id, p->name);
	}
	printf("%-6s %-12s %s\n", "Port", "Owner", "Addresses");
	for (int i = 0; i < c->nl; i++) {
		printf("%-6u %-12" PRIx64 " ", c->l[i].port, c->l[i].owner);
		for (int k = 0; k < c->l[i].naddr; k++) {
			addr_text(&c->l[i].addr[k], a, sizeof(a));
			printf("%s%s", k ? "," : "", a);
		}
		printf("\n");
	}
	if (c->more_listeners)
		printf("(more listeners)\n");
}

static void print_json(const struct region_map *m, const struct region *r, const struct census *c)
{
	char a[64];

	printf("{\"path\": ");
	json_string(stdout, m->path);
	printf(", \"size\": %llu, \"format\": %u, \"id\": \"%016llx\", \"lease_ms\": %u,\n",
	       (unsigned long long)r->h.size, r->h.version, (unsigned long long)r->h.format_id,
	       r->h.lease_ms);
	printf(" \"mapping\": {\"kind\": \"%s\", \"cached\": %s, \"load_ns\": %.1f},\n",
	       *m->pci ? "pci" : "file", m->cached ? "true" : "false", m->load_ns);
	printf(" \"memory\": {\"used\": %llu, \"heap\": %llu}, \"channels\": %u, \"slots\": %u,\n",
	       (unsigned long long)(c->used * REGION_PAGE),
	       (unsigned long long)(r->h.heap_granules * REGION_PAGE), c->chans, r->h.nslots);
	printf(" \"peers\": [");
	int k = 0;
	for (uint32_t i = 0; i < r->h.nslots; i++) {
		const struct peer *p = &c->p[i];
		if (!p->live)
			continue;
		printf("%s\n  {\"slot\": %u, \"key\": \"%" PRIx64 "\", \"state\": \"%s\", "
		       "\"heartbeat\": %" PRIu64 ", \"connections\": %u, \"memory\": %llu, "
		       "\"mapping\": {\"kind\": \"%s\", \"cached\": %s}, \"peer_id\": ",
		       k++ ? "," : "", i, p->key, liveness(p), p->heartbeat, p->conns,
		       (unsigned long long)(p->granules * REGION_PAGE), p->mapping,
		       p->cached ? "true" : "false");
		if (p->bell >= 0)
			printf("%lld", (long long)p->bell);
		else
			printf("null");
		printf(", \"process\": ");
		json_string(stdout, p->name);
		printf("}");
	}
	printf("],\n \"listeners\": [");
	for (int i = 0; i < c->nl; i++) {
		printf("%s\n  {\"port\": %u, \"owner\": \"%" PRIx64 "\", \"addresses\": [", i ? "," : "",
		       c->l[i].port, c->l[i].owner);
		for (int j = 0; j < c->l[i].naddr; j++) {
			addr_text(&c->l[i].addr[j], a, sizeof(a));
			printf("%s\"%s\"", j ? ", " : "", a);
		}
		printf("]}");
	}
	printf("]}\n");
}

static int status(int argc, char **argv)
{
	const char *path = NULL;
	int json = 0;
	char why[1024];

	for (int i = 1; i < argc; i++) {
		if (is_help(argv[i]))
			help_exit();
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (argv[i][0] != '-' && !path)
			path = argv[i];
		else
			die_usage();
	}
	/* Where the library would look: USMC_DEVICE's region, else the device. */
	if (!path && config_load() == 0 && *cfg.region)
		path = cfg.region;
	struct region_map m;
	struct region r;
	if (region_server(path))
		fail("%s names an ivshmem server: give the file it serves", path);
	if (region_map_open(&m, path, 1, why, sizeof(why)) < 0)
		fail("%s", why);
	int e = region_attach(&r, m.base, m.size);
	if (e != REGION_OK)
		fail("%s: %s", m.path, region_strerror(e));
	struct census *c = malloc(sizeof(*c));
	if (!c)
		fail("out of memory");
	take_census(&r, c);
	if (json)
		print_json(&m, &r, c);
	else
		print_text(&m, &r, c);
	free(c);
	region_map_close(&m);
	return 0;
}

int cmd_region(int argc, char **argv)
{
	if (argc < 2)
		die_usage();
	if (!strcmp(argv[1], "create"))
		return create(argc - 1, argv + 1);
	if (!strcmp(argv[1], "status"))
		return status(argc - 1, argv + 1);
	if (!strcmp(argv[1], "serve"))
		return region_serve(argc - 1, argv + 1);
	if (is_help(argv[1]))
		help_exit();
	die_usage();
}
