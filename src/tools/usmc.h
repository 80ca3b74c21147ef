/* The usmc command's subcommands, one file each, and what they share. */
#ifndef USMC_TOOL_H
#define USMC_TOOL_H

/* Prints the usage text to stderr and exits with status 2. */
void die_usage(void);

int cmd_run(int argc, char **argv);
int cmd_stats(int argc, char **argv);

#endif
