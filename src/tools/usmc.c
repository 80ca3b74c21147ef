/* The usmc command: run a program accelerated, and show what usmc did. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/config.h"
#include "../core/decline.h"
#include "../core/stats.h"

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

static void die_usage(void)
{
	fputs(usage, stderr);
	exit(2);
}

/* The library sits next to this program: <prefix>/bin/usmc -> <prefix>/lib/libusmc.so */
static void lib_path(char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0) {
		fprintf(stderr, "usmc: cannot find myself: %s\n", strerror(errno));
		exit(1);
	}
	exe[n] = 0;
	snprintf(buf, len, "%s/../lib/libusmc.so", dirname(exe));
	if (access(buf, R_OK) != 0) {
		fprintf(stderr, "usmc: %s: %s\n", buf, strerror(errno));
		exit(1);
	}
}

static int cmd_run(int argc, char **argv)
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
	lib_path(lib, sizeof(lib));
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

static int cmd_stats(int argc, char **argv)
{
	int reset = 0;
	char dir[PATH_MAX + 16];
	uint64_t sum[STAT_MAX] = {0};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rundir") && i + 1 < argc)
			setenv("USMC_RUNDIR", argv[++i], 1);
		else if (!strcmp(argv[i], "reset"))
			reset = 1;
		else
			die_usage();
	}
	if (config_load() < 0)
		return 1;
	snprintf(dir, sizeof(dir), "%s/stats", cfg.rundir);
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[PATH_MAX * 2];
		struct stat st;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (reset) {
			unlink(path);
			continue;
		}
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		/* Files are written by other processes: check them before reading. */
		if (fstat(fd, &st) == 0 && st.st_size == (off_t)sizeof(struct stats_file)) {
			struct stats_file *f = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0);
			if (f != MAP_FAILED) {
				if (f->magic == STATS_MAGIC && f->version == STATS_VERSION &&
				    f->nstats == STAT_MAX)
					for (int k = 0; k < STAT_MAX; k++)
						sum[k] += atomic_load(&f->v[k]);
				munmap(f, sizeof(*f));
			}
		}
		close(fd);
	}
	if (d)
		closedir(d);
	if (reset)
		return 0;
	for (int k = 0; k < STAT_FALLBACK_REASON; k++)
		printf("%s %llu\n", stat_name((enum stat_id)k), (unsigned long long)sum[k]);
	for (int r = 0; r < DECL_MAX; r++)
		if (sum[STAT_FALLBACK_REASON + r])
			printf("fallback_%s %llu\n", decline_name((enum decline)r),
			       (unsigned long long)sum[STAT_FALLBACK_REASON + r]);
	return 0;
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
