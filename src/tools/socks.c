#include "socks.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A process in a pid namespace below this view's: its namespace, its pid there
 * and here. */
struct nested {
	uint32_t ns;
	pid_t there, here;
};

static uint32_t pidns_of(const char *proc)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%s/ns/pid", proc);
	return stat(path, &st) == 0 ? (uint32_t)st.st_ino : 0;
}

/* Its pid in each namespace from this view's down to its own, as in
 * /proc/PID/status: the last is the one it knows itself by. 0 when it has only
 * the first (it lives in this view's namespace). */
static pid_t pid_there(const char *proc)
{
	char path[64], line[256];
	pid_t there = 0;

	snprintf(path, sizeof(path), "/proc/%s/status", proc);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		char *p = line + 6, *end;
		long v, last = 0;
		int n = 0;
		while ((v = strtol(p, &end, 10)), end != p) {
			last = v;
			n++;
			p = end;
		}
		there = n > 1 ? (pid_t)last : 0;
		break;
	}
	if (f)
		fclose(f);
	return there;
}

/* Every process of a nested namespace, read when the first table from another
 * namespace is met: what a tool shows is one moment anyway. */
static struct nested *nested;
static size_t nnested;

static void scan_nested(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t cap = 0;

	while (d && (e = readdir(d))) {
		pid_t there;
		if (e->d_name[0] < '1' || e->d_name[0] > '9' || !(there = pid_there(e->d_name)))
			continue;
		if (nnested == cap) {
			struct nested *m = realloc(nested, (cap = cap ? 2 * cap : 64) * sizeof(*m));
			if (!m)
				break;
			nested = m;
		}
		nested[nnested++] = (struct nested){pidns_of(e->d_name), there, (pid_t)atoi(e->d_name)};
	}
	if (d)
		closedir(d);
}

pid_t socks_pid(const struct socktab_hdr *h)
{
	static uint32_t here;
	static int scanned;

	if (!here)
		here = pidns_of("self");
	if (h->pidns == here)
		return h->pid;
	if (!scanned) {
		scan_nested();
		scanned = 1;
	}
	for (size_t i = 0; i < nnested; i++)
		if (nested[i].ns == h->pidns && nested[i].there == h->pid)
			return nested[i].here;
	return 0;
}

const struct socktab_hdr *socks_table(const struct procfile *f)
{
	const struct socktab_hdr *h = f->map;

	if (h->magic != SOCKTAB_MAGIC || h->version != SOCKTAB_VERSION ||
	    h->slot_size != sizeof(struct socktab_slot) || h->nslots > SOCKTAB_MAX_SLOTS ||
	    f->size != sizeof(*h) + (size_t)h->nslots * sizeof(struct socktab_slot) || h->pid <= 0)
		return NULL;
	return h;
}

uint32_t socks_used(const struct socktab_hdr *h)
{
	uint32_t used = atomic_load((_Atomic uint32_t *)&h->used);
	return used < h->nslots ? used : h->nslots;
}

int socks_slot(const struct socktab_hdr *h, uint32_t i, struct socktab_slot *out)
{
	const struct socktab_slot *sl = (const struct socktab_slot *)(h + 1) + i;
	_Atomic uint32_t *seq = (_Atomic uint32_t *)&sl->seq;

	if (i >= socks_used(h))
		return 0;
	for (int tries = 0; tries < 100; tries++) {
		uint32_t a = atomic_load_explicit(seq, memory_order_acquire);
		if (a & 1)
			continue;
		memcpy(out, (const void *)sl, sizeof(*out));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(seq, memory_order_relaxed) != a)
			continue;
		return out->state != SOCKTAB_FREE && out->state < SOCKTAB_STATES &&
		       out->decline < DECL_MAX;
	}
	return 0;
}
