/* The usmc command's subcommands, one file each, and what they share. */
#ifndef USMC_TOOL_H
#define USMC_TOOL_H

/* Prints the running command's usage text to stderr and exits with status 2. */
_Noreturn void die_usage(void);
/* Prints it to stdout and exits with status 0 (-h, --help). */
_Noreturn void help_exit(void);
int is_help(const char *arg);

int cmd_run(int argc, char **argv);
int cmd_stats(int argc, char **argv);

#endif
