/* The usmc command: run a program accelerated, and show what usmc did. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usmc.h"

static const char usage[] =
	"usage: usmc run [--rundir DIR] [--] COMMAND [ARG...]\n"
	"       usmc stats [--rundir DIR] [reset]\n"
	"\n"
	"  run    execute COMMAND with the usmc library preloaded: its TCP connections to\n"
	"         other programs run under usmc with the same runtime directory move their\n"
	"         bytes through shared memory\n"
	"  stats  print the counters of every process that used the runtime directory\n"
	"\n"
	"  --rundir DIR  runtime directory (trust domain); default $USMC_RUNDIR, else\n"
	"                $XDG_RUNTIME_DIR/usmc, else /tmp/usmc-UID\n";

void die_usage(void)
{
	fputs(usage, stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stats"))
		return cmd_stats(argc - 1, argv + 1);
	fprintf(stderr, "usmc: unknown command %s\n", argv[1]);
	die_usage();
	return 2;
}
