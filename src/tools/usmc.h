/* The usmc command's subcommands, one file each, and what they share. */
#ifndef USMC_TOOL_H
#define USMC_TOOL_H

#include <stdint.h>

/* Prints the running command's usage text to stderr and exits with status 2. */
_Noreturn void die_usage(void);
/* Prints it to stdout and exits with status 0 (-h, --help). */
_Noreturn void help_exit(void);
int is_help(const char *arg);

/* Subcommands' option parsing: consumes `--rundir DIR` at argv[*i] (setting
 * USMC_RUNDIR) and returns 1, or returns 0 for anything else. */
int opt_rundir(int argc, char **argv, int *i);

int cmd_run(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_ss(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_nvme(int argc, char **argv);
int cmd_region(int argc, char **argv);
/* usmc region serve (region_serve.c), and the option parsing of usmc region's
 * commands (region.c): an option's value, and a number from lo to hi (exit 2
 * otherwise). */
int region_serve(int argc, char **argv);
const char *region_value_of(int argc, char **argv, int *i);
uint64_t region_number(const char *opt, const char *s, uint64_t lo, uint64_t hi);

#endif
