/* usmc nvme: NVMe/TCP over the socket API, so that under `usmc run` both ends
 * of a connection go through shared memory like any program's. */
#include "nvme.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: usmc nvme COMMAND [OPTION...]\n"
	"\n"
	"NVMe over TCP: a target serving one namespace, and a host that identifies,\n"
	"discovers and measures. Run both ends under `usmc run` and the connections go\n"
	"through shared memory, C2HData payload placed straight into the reader's\n"
	"buffers with its data digest summed in the same pass.\n"
	"\n"
	"commands:\n"
	"  target    serve a namespace (a file, a block device or memory)\n"
	"  perf      measure reads or writes, as spdk_nvme_perf and fio do\n"
	"  identify  print what the controller and the namespace say of themselves\n"
	"  discover  print the discovery log page\n"
	"\n"
	"target options:\n"
	"  --file F            the namespace is file F (created --size bytes long if missing)\n"
	"  --dev D             the namespace is block device D\n"
	"  --mem SIZE          the namespace is SIZE bytes of memory (the default: 1G)\n"
	"  --size SIZE         size of the file --file creates\n"
	"  --lba-size N        block size, 512 or 4096 (default 512)\n"
	"  --nqn NQN           the subsystem's name (default nqn.2024-11.io.usmc:nvme)\n"
	"  -a, --addr A        listen on address A (default: every address)\n"
	"  -p, --port P        listen on port P (default 4420)\n"
	"  --discovery-port P  also on port P, for discovery (default 8009, 0: no)\n"
	"  --digest            refuse hosts that do not ask for header and data digests\n"
	"  -v, --verbose       log connections and their ends\n"
	"\n"
	"host options (perf, identify, discover):\n"
	"  -r, --remote TRID   'trtype:tcp traddr:A trsvcid:P [subnqn:NQN]' (default\n"
	"                      127.0.0.1, port 4420; without subnqn, the first NVM\n"
	"                      subsystem the discovery controller there lists)\n"
	"  --nqn NQN           the subsystem to connect to\n"
	"  -n, --nsid N        the namespace (default 1)\n"
	"  --digest            ask for header and data digests (CRC32C)\n"
	"  --header-digest     ask for the header digest only\n"
	"  --data-digest       ask for the data digest only\n"
	"  --hpda N            ask the controller to align data to 4 * (N + 1) bytes\n"
	"  --sqflow            keep SQ flow control (a read then always waits for its\n"
	"                      response; without it the last data PDU may complete it)\n"
	"  --ddp on|off        place large reads straight into their buffers, data digest\n"
	"                      summed as they land (on), or copy them through the staging\n"
	"                      buffer and sum after (off)\n"
	"  --io-threshold SIZE the least read that is placed (default 16K)\n"
	"  --kato MS           keep-alive timeout (default 10000, 0: none)\n"
	"\n"
	"perf options:\n"
	"  -q, --queue-depth N commands in flight per job (default 128)\n"
	"  -o, --io-size SIZE  bytes a command (default 4096)\n"
	"  -w, --workload W    randread, randwrite, read, write or randrw (default randread)\n"
	"  -M, --rwmixread P   randrw: percentage of reads (default 50)\n"
	"  -t, --time SEC      how long (default 10)\n"
	"  --jobs N            threads, each with an I/O queue of its own (default 1)\n"
	"  --span SIZE         use the first SIZE bytes of the namespace (default all)\n"
	"  --once              read and write: one pass over the span, then stop\n"
	"  --verify SEED       write data made from SEED; check that reads return it\n"
	"\n"
	"  -h, --help          print this help\n"
	"\n"
	"Exit status: 0, 1 on a failure (a verification failed, an I/O failed), 2 usage.\n";

_Noreturn void nvme_usage(void)
{
	fputs(usage, stderr);
	exit(2);
}

uint64_t nvme_size_arg(const char *arg)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg || arg[0] == '-')
		nvme_usage();
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	case 't': case 'T': v <<= 40; end++; break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		nvme_usage();
	return v;
}

unsigned long nvme_num_arg(const char *arg, unsigned long min, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v < min || v > max)
		nvme_usage();
	return v;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(int, char **);
	} cmds[] = {
		{"target", cmd_nvme_target},
		{"perf", cmd_nvme_perf},
		{"identify", cmd_nvme_identify},
		{"discover", cmd_nvme_discover},
	};

	if (argc < 2)
		nvme_usage();
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(usage, stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			for (int k = 2; k < argc; k++)
				if (!strcmp(argv[k], "-h") || !strcmp(argv[k], "--help")) {
					fputs(usage, stdout);
					return 0;
				}
			return cmds[i].run(argc - 1, argv + 1);
		}
	fprintf(stderr, "usmc nvme: unknown command %s\n", argv[1]);
	nvme_usage();
}
