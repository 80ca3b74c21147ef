/* The usmc command: run a program accelerated, and show what usmc did. Every
 * option a command's help lists has its entry in the command's man page
 * (tests/install/manpages.sh holds them to it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usmc.h"

static const char overview[] =
	"usage: usmc COMMAND [OPTION...]\n"
	"\n"
	"commands:\n"
	"  run    execute a program with its TCP connections accelerated\n"
	"  stats  print the counters of every process that used the runtime directory\n"
	"  ss     list the sockets of running processes under usmc: accelerated, fallen\n"
	"         back to TCP (and why), listening\n"
	"  check  tell whether a connection to HOST:PORT would be accelerated, and if not, why\n"
	"  nvme   NVMe/TCP: a target, and a host that identifies, discovers and measures\n"
	"  region make a region shared between virtual machines, or show what is in one\n"
	"\n"
	"`usmc COMMAND --help` describes a command; man usmc(1) and usmc(7) say more.\n";

static const char run_usage[] =
	"usage: usmc run [OPTION...] [--] COMMAND [ARG...]\n"
	"\n"
	"Execute COMMAND with the usmc library preloaded: its TCP connections to other\n"
	"programs under usmc with the same runtime directory move their bytes through\n"
	"shared memory. Which sockets may is the policy's choice: every TCP socket\n"
	"unless --policy, --rule or USMC_POLICY say otherwise (see usmc(7)).\n"
	"\n"
	"options:\n"
	"  --rundir DIR          runtime directory (trust domain); default $USMC_RUNDIR,\n"
	"                        else $XDG_RUNTIME_DIR/usmc, else /tmp/usmc-UID\n"
	"  --policy FILE         policy rules from FILE (repeatable)\n"
	"  --rule RULE           one policy rule, e.g. 'exclude peer 10.0.0.0/8' (repeatable;\n"
	"                        rules and files apply in the order given, first match wins)\n"
	"  -r, --recv-ring SIZE  receive ring of each connection it opens (4K to 64M)\n"
	"  -t, --send-ring SIZE  send ring of each connection it opens (4K to 64M)\n"
	"  --busy-poll US        spin up to US microseconds for the peer before sleeping\n"
	"                        (0 to 1000000; 0 sleeps at once)\n"
	"  --device DEV[,DEV]    the devices to use, in order of preference: lo (processes of\n"
	"                        this kernel, the default), ivshmem[:PATH] (a region shared\n"
	"                        with other kernels: the ivshmem PCI device, or PATH;\n"
	"                        ivshmem:unix:SOCKET, the one `usmc region serve` hands out\n"
	"                        there, with interrupts); ivshmem alone means lo,ivshmem\n"
	"  -h, --help            print this help\n";

static const char stats_usage[] =
	"usage: usmc stats [--rundir DIR] [--json] [reset]\n"
	"\n"
	"Sums the counters of every process of yours that used the runtime directory, running\n"
	"or exited, and prints one `name value` line per counter:\n"
	"  conn_accelerated, conn_fallback    connections through shared memory / plain TCP\n"
	"  conn_aborted, handshake_errors     broken shared state, bad control messages\n"
	"  bytes_sent_shm, bytes_recv_shm     bytes through shared memory\n"
	"  send_calls_shm, recv_calls_shm     calls that moved them\n"
	"  ring_full, doorbells               writers that found the ring full, wake-ups\n"
	"  handoffs                           connections whose proposal another process\n"
	"                                     accepting on the same socket handed over\n"
	"  handoff_links                      connections opened to such processes to ask\n"
	"  handoff_asks                       accepted connections they were asked about\n"
	"  doorbell_pairs                     doorbells made; a segment's next connection\n"
	"                                     reuses the one both ends kept\n"
	"  arena_maps                         arenas mapped, made or received\n"
	"  fallback_REASON                    fallbacks for each reason seen\n"
	"  peek_calls, urgent_calls           MSG_PEEK and MSG_OOB calls on accelerated sockets\n"
	"  sendfile_calls, splice_calls       sendfile and splice calls on them\n"
	"  sigurg_sent                        SIGURG sent to the owner of a socket that urgent\n"
	"                                     data went to\n"
	"  sigurg_unverified, sigurg_denied   not sent: nothing vouched for the process named\n"
	"                                     (another pid namespace...); refused by the kernel\n"
	"  spin_core_lost                     spins given up when the core went to another\n"
	"                                     thread: waits then sleep at once for a while\n"
	"  erm_commands, erm_bytes, erm_failed  SMC-ERM copies that moved their bytes, those\n"
	"                                     bytes, and copies that failed (usmc-erm(3))\n"
	"  rx_nvme_tcp_sk_add, _sk_add_fail, _sk_del, _setup, _setup_fail, _teardown, _drop,\n"
	"  _resync, _packets, _bytes          direct data placement (usmc nvme), as Linux's\n"
	"                                     NVMe/TCP receive offload counts it\n"
	"then the same split by side, SIDE being client (connecting) or server (accepting):\n"
	"  SIDE_conn_accelerated, SIDE_conn_fallback\n"
	"  SIDE_fallback_REASON               most frequent first\n"
	"  SIDE_ring_tx_SIZE, SIDE_ring_rx_SIZE  rings written / read, by size (4K...64M)\n"
	"then per device DEV (lo, ivshmem): DEV_conn_accelerated, and\n"
	"  ivshmem_interrupts_sent, _received  interrupts written to peers' vectors, heard on\n"
	"                                     ours (usmc region serve)\n"
	"Lines for reasons and ring sizes never counted are left out.\n"
	"\n"
	"  reset         zero the counters (your own processes' only; files of exited\n"
	"                processes are removed)\n"
	"  --json        print one JSON object instead (docs/schema/usmc-stats.schema.json)\n"
	"  --rundir DIR  runtime directory; default $USMC_RUNDIR, else $XDG_RUNTIME_DIR/usmc,\n"
	"                else /tmp/usmc-UID\n"
	"  -h, --help    print this help\n";

static const char ss_usage[] =
	"usage: usmc ss [--rundir DIR] [-a|-l] [-d] [--json]\n"
	"\n"
	"Lists the TCP sockets of running processes under usmc in the runtime directory, one\n"
	"line each: TCP state, owner, process, socket inode, local and peer address, and mode:\n"
	"SMCD (through shared memory), PENDING (proposed, not attached yet), or TCP with the\n"
	"SMC decline code and name of the reason it fell back. Listening sockets show SMCD.\n"
	"\n"
	"  -a, --all        list listening sockets too\n"
	"  -l, --listening  list listening sockets only\n"
	"  -d, --debug      add each connection's side, connection id, ring sizes, ring\n"
	"                   cursors (read live from its shared segment) and ring flags\n"
	"  --json           print one JSON object instead (docs/schema/usmc-ss.schema.json)\n"
	"  --rundir DIR     runtime directory; default $USMC_RUNDIR, else\n"
	"                   $XDG_RUNTIME_DIR/usmc, else /tmp/usmc-UID\n"
	"  -h, --help       print this help\n";

static const char check_usage[] =
	"usage: usmc check [--rundir DIR] [--no-connect] [--json] HOST:PORT\n"
	"       usmc check [--rundir DIR] [--no-connect] [--json] [IPV6]:PORT\n"
	"\n"
	"Tells whether a TCP connection from here to HOST:PORT would go through shared memory\n"
	"and, if not, why: no listener under usmc on the port in this runtime directory (the\n"
	"server runs without usmc, or in another trust domain), a listener in another network\n"
	"namespace, or one that does not accept on that address (another address, NAT), several\n"
	"processes accepting on the port, a listener that is gone, or the policy in USMC_POLICY\n"
	"(usmc(7)) excluding the connection. Then it connects for real\n"
	"under the library, as a client would, and reports the outcome (counted in\n"
	"`usmc stats` like any connection), with the SMC decline code when it fell back.\n"
	"\n"
	"Exit status: 0 accelerated, 1 not accelerated (or no connection), 2 usage error.\n"
	"\n"
	"  --no-connect  only consult the registry, make no connection\n"
	"  --json        print one JSON object instead (docs/schema/usmc-check.schema.json)\n"
	"  --rundir DIR  runtime directory; default $USMC_RUNDIR, else $XDG_RUNTIME_DIR/usmc,\n"
	"                else /tmp/usmc-UID\n"
	"  -h, --help    print this help\n";

static const char region_usage[] =
	"usage: usmc region create PATH --size SIZE [--lease MS] [--slots N] [--force]\n"
	"       usmc region status [PATH] [--json]\n"
	"       usmc region serve SOCKET PATH [--vectors N]\n"
	"\n"
	"A region is the memory virtual machines (and host processes) attached to one\n"
	"ivshmem device share: usmc keeps its listeners, link groups and connections there.\n"
	"PATH is a file (what QEMU's memory-backend-file maps), a PCI device's sysfs\n"
	"directory, or one of its resource files; without one, status looks at the region\n"
	"USMC_DEVICE names, else at the first ivshmem PCI device.\n"
	"\n"
	"  create        format PATH as a region (a file is made or grown to SIZE)\n"
	"  --size SIZE   bytes, with a K, M or G suffix (at least 4M)\n"
	"  --lease MS    how long a silent peer lives before its connections end (100 to\n"
	"                600000; default 5000)\n"
	"  --slots N     how many processes may attach at once (2 to 255; default 64)\n"
	"  --force       format a region again, ending every connection through it\n"
	"  status        the peers attached (slot, key, live or quiet, connections,\n"
	"                memory), the listeners published, memory and channels in use\n"
	"  --json        print one JSON object instead (docs/schema/usmc-region.schema.json)\n"
	"  serve         an ivshmem server on the Unix socket SOCKET for PATH: QEMU's\n"
	"                ivshmem-doorbell devices (chardev=...,path=SOCKET) and processes\n"
	"                under USMC_DEVICE=ivshmem:unix:SOCKET interrupt each other\n"
	"  --vectors N   interrupt vectors a peer (1 to 64; default 1)\n"
	"  -h, --help    print this help\n";

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *usage;
} commands[] = {
	{"run", cmd_run, run_usage},
	{"stats", cmd_stats, stats_usage},
	{"ss", cmd_ss, ss_usage},
	{"check", cmd_check, check_usage},
	/* A program of its own, which has its own help. */
	{"nvme", cmd_nvme, NULL},
	{"region", cmd_region, region_usage},
};

static const char *current_usage = overview;

void die_usage(void)
{
	fputs(current_usage, stderr);
	exit(2);
}

_Noreturn void help_exit(void)
{
	fputs(current_usage, stdout);
	exit(0);
}

int opt_rundir(int argc, char **argv, int *i)
{
	if (strcmp(argv[*i], "--rundir"))
		return 0;
	if (*i + 1 >= argc)
		die_usage();
	setenv("USMC_RUNDIR", argv[++*i], 1);
	return 1;
}

int is_help(const char *arg)
{
	return !strcmp(arg, "--help") || !strcmp(arg, "-h");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		die_usage();
	if (is_help(argv[1]))
		help_exit();
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name))
			continue;
		if (commands[i].usage) {
			current_usage = commands[i].usage;
			if (argc > 2 && is_help(argv[2]))
				help_exit();
		}
		return commands[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "usmc: unknown command %s\n", argv[1]);
	die_usage();
}
