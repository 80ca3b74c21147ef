/* usmc nvme identify, usmc nvme discover: what a controller says. */
#include "nvme.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void field(const char *name, const uint8_t *b, size_t n)
{
	while (n && (b[n - 1] == ' ' || !b[n - 1]))
		n--;
	printf("%-10s: %.*s\n", name, (int)n, (const char *)b);
}

static int parse(struct host_args *a, int argc, char **argv)
{
	host_args_init(a);
	for (int i = 1; i < argc; i++)
		if (!host_arg(a, argc, argv, &i))
			nvme_usage();
	return 0;
}

int cmd_nvme_identify(int argc, char **argv)
{
	struct host_args a;
	struct nvme_host *h;
	const struct nvme_host_info *info;
	uint8_t id[NVME_IDENTIFY_SIZE];
	uint64_t blocks;
	unsigned shift;
	int st;

	parse(&a, argc, argv);
	h = host_connect(&a);
	info = nvme_host_info(h);
	field("mn", info->id_ctrl + IDC_MN, 40);
	field("sn", info->id_ctrl + IDC_SN, 20);
	field("fr", info->id_ctrl + IDC_FR, 8);
	field("subnqn", info->id_ctrl + IDC_SUBNQN, NVMF_NQN_SIZE);
	printf("%-10s: %u\n", "cntlid", info->cntlid);
	printf("%-10s: %u\n", "nn", get_le32(info->id_ctrl + IDC_NN));
	printf("%-10s: %u bytes\n", "mdts", info->max_xfer);
	printf("%-10s: %u bytes\n", "incapsule", info->incapsule);
	printf("%-10s: %u x %u entries\n", "ioqueues", info->nr_io_queues, info->queue_size);
	printf("%-10s: header %s, data %s\n", "digests", info->hdgst ? "on" : "off",
	       info->ddgst ? "on" : "off");
	printf("%-10s: %u\n", "maxh2cdata", info->maxh2cdata);
	st = nvme_identify(h, NVME_ID_CNS_NS_ACTIVE_LIST, 0, id);
	if (!st) {
		printf("%-10s:", "active ns");
		for (int i = 0; i < 1024 && get_le32(id + 4 * i); i++)
			printf(" %u", get_le32(id + 4 * i));
		printf("\n");
	}
	if (!st)
		st = nvme_ns_geometry(h, a.nsid, &blocks, &shift);
	if (!st)
		printf("ns %-7u: %llu blocks of %u bytes (%llu bytes)\n", a.nsid,
		       (unsigned long long)blocks, 1u << shift, (unsigned long long)blocks << shift);
	else
		fprintf(stderr, "usmc nvme identify: namespace %u: %s\n", a.nsid,
			st < 0 ? "the admin queue failed" : nvme_status_str((uint16_t)st));
	nvme_host_disconnect(h);
	return st ? 1 : 0;
}

int cmd_nvme_discover(int argc, char **argv)
{
	struct host_args a;
	struct nvme_host *h;
	uint8_t *log;
	uint64_t n;
	char err[256];
	int st;

	parse(&a, argc, argv);
	a.o.traddr = a.traddr;
	a.o.trsvcid = a.trsvcid;
	a.o.subnqn = NULL;
	a.o.nr_io_queues = 0;
	a.o.kato_ms = 0;
	h = nvme_host_connect(&a.o, err, sizeof(err));
	if (!h) {
		fprintf(stderr, "usmc nvme discover: %s:%s: %s\n", a.traddr, a.trsvcid, err);
		return 1;
	}
	st = nvme_discovery_log(h, &log, &n);
	nvme_host_disconnect(h);
	if (st) {
		fprintf(stderr, "usmc nvme discover: %s\n",
			st < 0 ? "the admin queue failed" : nvme_status_str((uint16_t)st));
		return 1;
	}
	printf("Discovery Log Number of Records %llu, Generation counter %llu\n",
	       (unsigned long long)n, (unsigned long long)get_le64(log + DISC_GENCTR));
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *e = log + NVMF_DISC_ENTRY_SIZE * (i + 1);

		printf("=====Discovery Log Entry %llu======\n", (unsigned long long)i);
		printf("trtype:  %s\n", e[DISCE_TRTYPE] == NVMF_TRTYPE_TCP ? "tcp" : "other");
		printf("adrfam:  %s\n", e[DISCE_ADRFAM] == NVMF_ADRFAM_IPV6 ? "ipv6" : "ipv4");
		printf("subtype: %s\n", e[DISCE_SUBTYPE] == NVMF_SUBTYPE_NVME ? "nvme subsystem"
									  : "discovery subsystem");
		printf("portid:  %u\n", get_le16(e + DISCE_PORTID));
		field("trsvcid", e + DISCE_TRSVCID, 32);
		field("subnqn", e + DISCE_SUBNQN, NVMF_NQN_SIZE);
		field("traddr", e + DISCE_TRADDR, 256);
	}
	free(log);
	return 0;
}
