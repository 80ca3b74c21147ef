/* usmc stats: the counters of every process of the caller that used a runtime
 * directory, summed; `reset` zeroes them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/config.h"
#include "../core/decline.h"
#include "../core/procfile.h"
#include "../core/stats.h"
#include "json.h"
#include "usmc.h"

struct totals {
	uint64_t v[STAT_MAX];
	unsigned files, live;
};

/* A file of this layout, or one to leave alone (another version's, half made). */
static const struct stats_file *valid(const struct procfile *f)
{
	const struct stats_file *s = f->map;

	if (s->magic != STATS_MAGIC || s->version != STATS_VERSION || s->nstats != STAT_MAX ||
	    f->size != sizeof(*s))
		return NULL;
	return s;
}

static int add_file(struct procfile *f, void *arg)
{
	struct totals *t = arg;
	const struct stats_file *s = valid(f);

	if (!s)
		return 0;
	for (int k = 0; k < STAT_MAX; k++)
		t->v[k] += stat_value(s, (enum stat_id)k);
	t->files++;
	t->live += f->alive != 0;
	return 0;
}

static int reset_file(struct procfile *f, void *arg)
{
	struct stats_file *s = (struct stats_file *)f->map;

	(void)arg;
	if (!valid(f))
		return 0;
	if (!f->alive) {
		unlink(f->path);
		return 0;
	}
	/* The process keeps counting: whatever it adds from here on stays (but for
	 * an add to a slot under way, which writes back what it read before). */
	for (int k = 0; k < STAT_MAX; k++)
		atomic_exchange(&s->v[k], 0);
	for (int i = 0; i < STAT_SLOTS; i++)
		for (int k = 0; k < STAT_HOT; k++)
			atomic_store(&s->slot[i].v[k], 0);
	return 0;
}

static const char *ring_label(unsigned bucket)
{
	static char buf[16];
	uint64_t kib = 4ull << bucket;

	if (kib >= 1024)
		snprintf(buf, sizeof(buf), "%lluM", (unsigned long long)(kib >> 10));
	else
		snprintf(buf, sizeof(buf), "%lluK", (unsigned long long)kib);
	return buf;
}

/* Reasons by count, most frequent first; ties in code order. */
static int by_count(const uint64_t *count, int *order)
{
	int n = 0;

	for (int r = 0; r < DECL_MAX; r++)
		if (count[r])
			order[n++] = r;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && count[order[j]] > count[order[j - 1]]; j--) {
			int x = order[j];
			order[j] = order[j - 1];
			order[j - 1] = x;
		}
	return n;
}

static const uint64_t *side_of(const struct totals *t, enum stat_side side)
{
	return t->v + stat_side_id(side, 0);
}

static const char *const side_names[SIDE_MAX] = {"client", "server"};

static void print_lines(const struct totals *t)
{
	int order[DECL_MAX];

	for (int k = 0; k < STAT_FALLBACK_REASON; k++)
		printf("%s %llu\n", stat_name((enum stat_id)k), (unsigned long long)t->v[k]);
	for (int r = 0; r < DECL_MAX; r++)
		if (t->v[STAT_FALLBACK_REASON + r])
			printf("fallback_%s %llu\n", decline_name((enum decline)r),
			       (unsigned long long)t->v[STAT_FALLBACK_REASON + r]);
	for (int k = STAT_PEEK_CALLS; k < STAT_SIDE; k++)
		printf("%s %llu\n", stat_name((enum stat_id)k), (unsigned long long)t->v[k]);
	for (int s = 0; s < SIDE_MAX; s++) {
		const uint64_t *v = side_of(t, (enum stat_side)s);
		const char *n = side_names[s];
		printf("%s_conn_accelerated %llu\n", n, (unsigned long long)v[SIDE_ACCEL]);
		printf("%s_conn_fallback %llu\n", n, (unsigned long long)v[SIDE_FALLBACK]);
		for (int i = 0, k = by_count(v + SIDE_REASON, order); i < k; i++)
			printf("%s_fallback_%s %llu\n", n, decline_name((enum decline)order[i]),
			       (unsigned long long)v[SIDE_REASON + order[i]]);
		for (int dir = 0; dir < 2; dir++)
			for (unsigned b = 0; b < STAT_RING_BUCKETS; b++) {
				uint64_t c = v[(dir ? SIDE_RING_RX : SIDE_RING_TX) + b];
				if (c)
					printf("%s_ring_%s_%s %llu\n", n, dir ? "rx" : "tx",
					       ring_label(b), (unsigned long long)c);
			}
	}
	for (int d = 0; d < STAT_DEVICES; d++)
		printf("%s_conn_accelerated %llu\n", stat_device_names[d],
		       (unsigned long long)t->v[STAT_DEV_ACCEL + d]);
	printf("ivshmem_interrupts_sent %llu\nivshmem_interrupts_received %llu\n",
	       (unsigned long long)t->v[STAT_IVS_IRQ_SENT], (unsigned long long)t->v[STAT_IVS_IRQ_RECV]);
}

static void json_reasons(const uint64_t *count)
{
	int order[DECL_MAX], n = by_count(count, order);

	printf("[");
	for (int i = 0; i < n; i++)
		printf("%s{\"name\": \"%s\", \"code\": \"0x%08x\", \"count\": %llu}", i ? ", " : "",
		       decline_name((enum decline)order[i]), decline_code((enum decline)order[i]),
		       (unsigned long long)count[order[i]]);
	printf("]");
}

static void json_rings(const uint64_t *count)
{
	printf("{");
	for (unsigned b = 0; b < STAT_RING_BUCKETS; b++)
		printf("%s\"%s\": %llu", b ? ", " : "", ring_label(b), (unsigned long long)count[b]);
	printf("}");
}

static void print_json(const struct totals *t)
{
	printf("{\"rundir\": ");
	json_string(stdout, cfg.rundir);
	printf(", \"processes\": %u, \"running\": %u,\n \"total\": {", t->files, t->live);
	for (int k = 0; k < STAT_FALLBACK_REASON; k++)
		printf("%s\"%s\": %llu", k ? ", " : "", stat_name((enum stat_id)k),
		       (unsigned long long)t->v[k]);
	printf("},\n \"fallback_reasons\": ");
	json_reasons(t->v + STAT_FALLBACK_REASON);
	printf(",\n \"special_calls\": {");
	for (int k = STAT_PEEK_CALLS; k < STAT_ERM_COMMANDS; k++)
		printf("%s\"%s\": %llu", k > STAT_PEEK_CALLS ? ", " : "", stat_name((enum stat_id)k),
		       (unsigned long long)t->v[k]);
	printf("},\n \"erm\": {");
	for (int k = STAT_ERM_COMMANDS; k < STAT_DDP; k++)
		printf("%s\"%s\": %llu", k > STAT_ERM_COMMANDS ? ", " : "", stat_name((enum stat_id)k),
		       (unsigned long long)t->v[k]);
	printf("},\n \"ddp\": {");
	for (int k = STAT_DDP; k < STAT_SIDE; k++)
		printf("%s\"%s\": %llu", k > STAT_DDP ? ", " : "", stat_name((enum stat_id)k),
		       (unsigned long long)t->v[k]);
	printf("}");
	for (int s = 0; s < SIDE_MAX; s++) {
		const uint64_t *v = side_of(t, (enum stat_side)s);
		printf(",\n \"%s\": {\"conn_accelerated\": %llu, \"conn_fallback\": %llu, "
		       "\"fallback_reasons\": ",
		       side_names[s], (unsigned long long)v[SIDE_ACCEL],
		       (unsigned long long)v[SIDE_FALLBACK]);
		json_reasons(v + SIDE_REASON);
		printf(",\n  \"ring_tx\": ");
		json_rings(v + SIDE_RING_TX);
		printf(",\n  \"ring_rx\": ");
		json_rings(v + SIDE_RING_RX);
		printf("}");
	}
	printf(",\n \"devices\": {");
	for (int d = 0; d < STAT_DEVICES; d++) {
		printf("%s\"%s\": {\"conn_accelerated\": %llu", d ? ", " : "", stat_device_names[d],
		       (unsigned long long)t->v[STAT_DEV_ACCEL + d]);
		if (!strcmp(stat_device_names[d], "ivshmem"))
			printf(", \"interrupts_sent\": %llu, \"interrupts_received\": %llu",
			       (unsigned long long)t->v[STAT_IVS_IRQ_SENT],
			       (unsigned long long)t->v[STAT_IVS_IRQ_RECV]);
		printf("}");
	}
	printf("}}\n");
}

int cmd_stats(int argc, char **argv)
{
	int reset = 0, json = 0;
	struct totals *t = calloc(1, sizeof(*t));

	for (int i = 1; i < argc; i++) {
		if (opt_rundir(argc, argv, &i))
			continue;
		if (is_help(argv[i]))
			help_exit();
		else if (!strcmp(argv[i], "reset"))
			reset = 1;
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else
			die_usage();
	}
	if (!t || config_load() < 0)
		return 1;
	int others;
	if (reset) {
		others = procfile_each("stats", sizeof(struct stats_file), 1, reset_file, NULL);
	} else {
		others = procfile_each("stats", sizeof(struct stats_file), 0, add_file, t);
		if (json)
			print_json(t);
		else
			print_lines(t);
	}
	if (others)
		fprintf(stderr, "usmc stats: %s holds the counters of %d processes of another user, "
				"left out (run as that user)\n", cfg.rundir, others);
	free(t);
	return 0;
}
