/* usmc run: execute a program with the library preloaded. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/config.h"
#include "usmc.h"

/* The library sits next to this program: <prefix>/bin/usmc -> <prefix>/lib/libusmc.so.
 * buf has room for PATH_MAX bytes. */
static void lib_path(char *buf)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0) {
		fprintf(stderr, "usmc: cannot find myself: %s\n", strerror(errno));
		exit(1);
	}
	exe[n] = 0;
	char rel[PATH_MAX + 32];
	snprintf(rel, sizeof(rel), "%s/../lib/libusmc.so", dirname(exe));
	if (!realpath(rel, buf) || access(buf, R_OK) != 0) {
		fprintf(stderr, "usmc: %s: %s\n", rel, strerror(errno));
		exit(1);
	}
}

int cmd_run(int argc, char **argv)
{
	char lib[PATH_MAX], pre[8192];
	int i = 1;

	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--rundir") && i + 1 < argc) {
			setenv("USMC_RUNDIR", argv[++i], 1);
		} else if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "usmc run: unknown option %s\n", argv[i]);
			die_usage();
		} else {
			break;
		}
	}
	if (i >= argc)
		die_usage();
	if (config_load() < 0)
		return 1;
	lib_path(lib);
	const char *old = getenv("LD_PRELOAD");
#ifdef USMC_SANITIZER_RUNTIME
	/* A sanitizer build needs its runtime loaded before anything else. */
	snprintf(pre, sizeof(pre), "%s:%s%s%s", USMC_SANITIZER_RUNTIME, lib, old ? ":" : "",
		 old ? old : "");
	if (!getenv("ASAN_OPTIONS"))
		setenv("ASAN_OPTIONS", "detect_leaks=0:verify_asan_link_order=0", 1);
#else
	snprintf(pre, sizeof(pre), "%s%s%s", lib, old && *old ? ":" : "", old ? old : "");
#endif
	setenv("LD_PRELOAD", pre, 1);
	execvp(argv[i], argv + i);
	fprintf(stderr, "usmc run: %s: %s\n", argv[i], strerror(errno));
	return 127;
}

