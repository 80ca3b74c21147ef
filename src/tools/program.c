/* usmc's commands that are programs of their own: `usmc nvme` runs usmc-nvme,
 * which sits beside usmc and is linked with the library (it offers direct data
 * placement through it). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "usmc.h"

int cmd_nvme(int argc, char **argv)
{
	char self[PATH_MAX], prog[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n < 0) {
		perror("usmc: /proc/self/exe");
		return 1;
	}
	self[n] = 0;
	slash = strrchr(self, '/');
	*slash = 0;
	snprintf(prog, sizeof(prog), "%s/usmc-nvme", self);
	argv[0] = prog;
	(void)argc;
	execv(prog, argv);
	fprintf(stderr, "usmc: %s: %s\n", prog, strerror(errno));
	return 1;
}
