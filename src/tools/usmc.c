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
	"  -h, --help            print this help\n";

static const char stats_usage[] =
	"usage: usmc stats [--rundir DIR] [reset]\n"
	"\n"
	"Print `name value` lines: the counters of every process that used the runtime\n"
	"directory, summed, also after they exited. `reset` clears them.\n"
	"\n"
	"options:\n"
	"  --rundir DIR  runtime directory; default $USMC_RUNDIR, else\n"
	"                $XDG_RUNTIME_DIR/usmc, else /tmp/usmc-UID\n"
	"  -h, --help    print this help\n";

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *usage;
} commands[] = {
	{"run", cmd_run, run_usage},
	{"stats", cmd_stats, stats_usage},
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
		current_usage = commands[i].usage;
		if (argc > 2 && is_help(argv[2]))
			help_exit();
		return commands[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "usmc: unknown command %s\n", argv[1]);
	die_usage();
}
