/* The options every host command takes, and connecting as they say. */
#include "nvme.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void host_args_init(struct host_args *a)
{
	memset(a, 0, sizeof(*a));
	nvme_host_opts_init(&a->o);
	snprintf(a->traddr, sizeof(a->traddr), "127.0.0.1");
	snprintf(a->trsvcid, sizeof(a->trsvcid), "4420");
	a->nsid = 1;
}

/* 'trtype:tcp traddr:A trsvcid:P subnqn:N', SPDK's transport id, any order;
 * adrfam is taken and left to the address. */
static void trid(struct host_args *a, const char *s)
{
	char buf[1024], *save, *w;

	snprintf(buf, sizeof(buf), "%s", s);
	for (w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		char *v = strchr(w, ':');

		if (!v)
			nvme_usage();
		*v++ = 0;
		if (!strcasecmp(w, "trtype")) {
			if (strcasecmp(v, "tcp")) {
				fprintf(stderr, "usmc nvme: only trtype:tcp is spoken here\n");
				exit(2);
			}
		} else if (!strcasecmp(w, "traddr")) {
			snprintf(a->traddr, sizeof(a->traddr), "%s", v);
		} else if (!strcasecmp(w, "trsvcid")) {
			snprintf(a->trsvcid, sizeof(a->trsvcid), "%s", v);
		} else if (!strcasecmp(w, "subnqn")) {
			snprintf(a->subnqn, sizeof(a->subnqn), "%s", v);
			a->have_subnqn = 1;
		} else if (strcasecmp(w, "adrfam")) {
			nvme_usage();
		}
	}
}

int host_arg(struct host_args *a, int argc, char **argv, int *i)
{
	const char *o = argv[*i];
	const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;

	if (!strcmp(o, "--digest")) {
		a->o.hdgst = a->o.ddgst = 1;
		return 1;
	}
	if (!strcmp(o, "--header-digest")) {
		a->o.hdgst = 1;
		return 1;
	}
	if (!strcmp(o, "--data-digest")) {
		a->o.ddgst = 1;
		return 1;
	}
	if (!strcmp(o, "--sqflow")) {
		a->o.sqflow = 1;
		return 1;
	}
	if (strcmp(o, "-r") && strcmp(o, "--remote") && strcmp(o, "--nqn") && strcmp(o, "-n") &&
	    strcmp(o, "--nsid") && strcmp(o, "--hpda") && strcmp(o, "--ddp") &&
	    strcmp(o, "--io-threshold") && strcmp(o, "--kato"))
		return 0;
	if (!v)
		nvme_usage();
	++*i;
	if (!strcmp(o, "-r") || !strcmp(o, "--remote")) {
		trid(a, v);
	} else if (!strcmp(o, "--nqn")) {
		snprintf(a->subnqn, sizeof(a->subnqn), "%s", v);
		a->have_subnqn = 1;
	} else if (!strcmp(o, "-n") || !strcmp(o, "--nsid")) {
		a->nsid = (uint32_t)nvme_num_arg(v, 1, 0xfffffffe);
	} else if (!strcmp(o, "--hpda")) {
		a->o.hpda = (uint8_t)nvme_num_arg(v, 0, 31);
	} else if (!strcmp(o, "--ddp")) {
		if (strcmp(v, "on") && strcmp(v, "off"))
			nvme_usage();
		a->o.ddp = !strcmp(v, "on");
	} else if (!strcmp(o, "--io-threshold")) {
		a->o.io_threshold = nvme_size_arg(v);
	} else {
		a->o.kato_ms = (unsigned)nvme_num_arg(v, 0, 3600000);
	}
	return 1;
}

/* The first NVM subsystem the discovery controller at the address lists. */
static void discover_subsystem(struct host_args *a)
{
	struct nvme_host_opts o = a->o;
	struct nvme_host *h;
	uint8_t *log = NULL;
	uint64_t n = 0;
	char err[256];
	int st;

	o.subnqn = NULL;
	o.nr_io_queues = 0;
	o.kato_ms = 0;
	h = nvme_host_connect(&o, err, sizeof(err));
	if (!h) {
		fprintf(stderr, "usmc nvme: discovery at %s:%s: %s\n", a->traddr, a->trsvcid, err);
		exit(1);
	}
	st = nvme_discovery_log(h, &log, &n);
	nvme_host_disconnect(h);
	for (uint64_t i = 0; !st && i < n; i++) {
		const uint8_t *e = log + NVMF_DISC_ENTRY_SIZE * (i + 1);

		if (e[DISCE_SUBTYPE] == NVMF_SUBTYPE_NVME && e[DISCE_TRTYPE] == NVMF_TRTYPE_TCP) {
			snprintf(a->subnqn, sizeof(a->subnqn), "%.*s", NVMF_NQN_SIZE,
				 (const char *)e + DISCE_SUBNQN);
			free(log);
			return;
		}
	}
	free(log);
	fprintf(stderr, "usmc nvme: the discovery controller at %s:%s lists no NVM subsystem%s\n",
		a->traddr, a->trsvcid, st ? " (its log could not be read)" : "");
	exit(1);
}

struct nvme_host *host_connect(struct host_args *a)
{
	struct nvme_host *h;
	char err[256];

	a->o.traddr = a->traddr;
	a->o.trsvcid = a->trsvcid;
	if (!a->have_subnqn)
		discover_subsystem(a);
	a->o.subnqn = a->subnqn;
	h = nvme_host_connect(&a->o, err, sizeof(err));
	if (!h) {
		fprintf(stderr, "usmc nvme: %s:%s %s: %s\n", a->traddr, a->trsvcid, a->subnqn, err);
		exit(1);
	}
	return h;
}
