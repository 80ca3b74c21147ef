/* The first and only process of a test guest (tests/vm/run.sh): mounts what the programs
 * need, brings up loopback, lifts RLIMIT_NOFILE (the guest's root has the right that a
 * container's may lack), runs the commands it was given after "--" on the kernel command
 * line, one after the other, separated by "+" words, reports each one's exit status on the
 * console and powers the guest off. The kernel hands init 32 words at most: "@FILE" instead
 * runs the lines of FILE, a command a line, its words separated by spaces. */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOFILE 1048576

static void say(const char *what)
{
	fprintf(stderr, "vm-init: %s: %s\n", what, strerror(errno));
}

static void loopback_up(void)
{
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	strcpy(ifr.ifr_name, "lo");
	if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		say("lo");
	ifr.ifr_flags |= IFF_UP;
	if (fd >= 0 && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		say("lo up");
	if (fd >= 0)
		close(fd);
}

static int run(char **argv)
{
	int status = 255;
	pid_t pid = fork();

	if (pid == 0) {
		execv(argv[0], argv);
		say(argv[0]);
		_exit(127);
	}
	while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void report(char **argv)
{
	printf("vm-init: exit status %d\n", run(argv));
	fflush(stdout);
}

static void run_file(const char *path)
{
	static char line[8192];
	FILE *f = fopen(path, "r");

	if (!f) {
		say(path);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char *words[256], *save;
		int n = 0;

		for (char *w = strtok_r(line, " \n", &save); w && n < 255; w = strtok_r(NULL, " \n", &save))
			words[n++] = w;
		words[n] = NULL;
		if (n)
			report(words);
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	struct rlimit rl = {NOFILE, NOFILE};

	if (mount("proc", "/proc", "proc", 0, NULL) < 0)
		say("mount /proc");
	if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) < 0)
		say("mount /dev");
	if (mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777") < 0)
		say("mount /tmp");
	loopback_up();
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		say("RLIMIT_NOFILE");
	/* The kernel hands init the words after "--" on its command line. */
	if (argc == 2 && argv[1][0] == '@')
		run_file(argv[1] + 1);
	for (int i = 1; i < argc && argv[1][0] != '@';) {
		int j = i;
		while (j < argc && strcmp(argv[j], "+"))
			j++;
		argv[j == argc ? argc : j] = NULL;
		report(argv + i);
		i = j + 1;
	}
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}
