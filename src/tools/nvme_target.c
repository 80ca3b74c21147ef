/* usmc nvme target: serves one namespace until killed. */
#include "nvme.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../nvme/target.h"

int cmd_nvme_target(int argc, char **argv)
{
	struct target_opts o = {0};
	static struct target t;
	char err[256];
	int have_ns = 0;

	o.nqn = "nqn.2024-11.io.usmc:nvme";
	o.port = 4420;
	o.disc_port = 8009;
	o.lba_shift = 9;
	o.size = 1ull << 30;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--digest")) {
			o.require_digest = 1;
			continue;
		}
		if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
			o.verbose = 1;
			continue;
		}
		if (!v)
			nvme_usage();
		i++;
		if (!strcmp(a, "--file") || !strcmp(a, "--dev")) {
			if (have_ns++)
				nvme_usage();
			o.path = v;
			if (!strcmp(a, "--dev"))
				o.size = 0;
		} else if (!strcmp(a, "--mem")) {
			if (have_ns++)
				nvme_usage();
			o.size = nvme_size_arg(v);
		} else if (!strcmp(a, "--size")) {
			o.size = nvme_size_arg(v);
		} else if (!strcmp(a, "--lba-size")) {
			unsigned long n = nvme_num_arg(v, 512, 4096);

			if (n != 512 && n != 4096)
				nvme_usage();
			o.lba_shift = n == 512 ? 9 : 12;
		} else if (!strcmp(a, "--nqn")) {
			o.nqn = v;
		} else if (!strcmp(a, "-a") || !strcmp(a, "--addr")) {
			o.addr = v;
		} else if (!strcmp(a, "-p") || !strcmp(a, "--port")) {
			o.port = (uint16_t)nvme_num_arg(v, 1, 65535);
		} else if (!strcmp(a, "--discovery-port")) {
			o.disc_port = (uint16_t)nvme_num_arg(v, 0, 65535);
		} else {
			nvme_usage();
		}
	}
	if (!o.path && o.size < 4096) {
		fprintf(stderr, "usmc nvme target: a namespace of at least 4096 bytes, please\n");
		return 2;
	}
	if (strlen(o.nqn) >= NVMF_NQN_SIZE) {
		fprintf(stderr, "usmc nvme target: NQN longer than %d bytes\n", NVMF_NQN_SIZE - 1);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (target_start(&t, &o, err, sizeof(err)) < 0) {
		fprintf(stderr, "usmc nvme target: %s\n", err);
		return 1;
	}
	printf("usmc nvme target: %s, %s, %llu blocks of %u bytes, listening on port %u",
	       t.nqn, t.ns.path, (unsigned long long)ns_blocks(&t.ns), 1u << t.ns.lba_shift, o.port);
	if (t.nports > 1)
		printf(" and %u (discovery)", o.disc_port);
	printf("%s\n", o.require_digest ? ", digests required" : "");
	fflush(stdout);
	target_run(&t);
	return 1;
}
