/* usmc stats: the counters of every process that used a runtime directory. */
#include <dirent.h>
#include <fcntl.h>
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
#include "usmc.h"

int cmd_stats(int argc, char **argv)
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

