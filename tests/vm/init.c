/* The first and only process of a test guest (tests/vm/run.sh): mounts what the programs
 * need, loads the modules the image lists in /modules/order (drivers of the guest's devices,
 * what its programs need of the kernel), brings up loopback and the interfaces its first
 * words name (ip=IFACE,ADDR/LEN), lifts RLIMIT_NOFILE (the guest's root has the right that a
 * container's may lack), runs the commands it was given after "--" on the kernel command
 * line, one after the other, separated by "+" words, reports each one's exit status on the
 * console and powers the guest off. The kernel hands init 32 words at most: "@FILE" instead
 * runs the lines of FILE, a command a line, its words separated by spaces. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOFILE 1048576

static void say(const char *what)
{
	fprintf(stderr, "vm-init: %s: %s\n", what, strerror(errno));
}

/* Brings up iface, with an IPv4 address when addr is not NULL ("a.b.c.d/len"). */
static void iface_up(const char *iface, const char *addr)
{
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface);
	if (addr) {
		char ip[32];
		int len = 24;
		snprintf(ip, sizeof(ip), "%s", addr);
		char *slash = strchr(ip, '/');
		if (slash) {
			*slash = 0;
			len = atoi(slash + 1);
		}
		struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
		sin->sin_family = AF_INET;
		inet_pton(AF_INET, ip, &sin->sin_addr);
		if (ioctl(fd, SIOCSIFADDR, &ifr) < 0)
			say(iface);
		sin->sin_addr.s_addr = htonl(len ? ~0u << (32 - len) : 0);
		if (ioctl(fd, SIOCSIFNETMASK, &ifr) < 0)
			say(iface);
	}
	if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		say(iface);
	ifr.ifr_flags |= IFF_UP;
	if (fd >= 0 && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		say(iface);
	if (fd >= 0)
		close(fd);
}

static void load_modules(void)
{
	char path[512];
	FILE *f = fopen("/modules/order", "r");

	while (f && fgets(path, sizeof(path), f)) {
		path[strcspn(path, "\n")] = 0;
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || syscall(SYS_finit_module, fd, "", 0) < 0)
			say(path);
		if (fd >= 0)
			close(fd);
	}
	if (f)
		fclose(f);
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
	if (mount("sysfs", "/sys", "sysfs", 0, NULL) < 0)
		say("mount /sys");
	load_modules();
	iface_up("lo", NULL);
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		say("RLIMIT_NOFILE");
	/* The kernel hands init the words after "--" on its command line: interfaces to bring
	 * up first, then the commands, or "@FILE" holding them. */
	int i = 1;
	for (; i < argc && !strncmp(argv[i], "ip=", 3); i++) {
		char *comma = strchr(argv[i] + 3, ',');
		if (comma)
			*comma = 0;
		iface_up(argv[i] + 3, comma ? comma + 1 : NULL);
	}
	if (i == argc - 1 && argv[i][0] == '@')
		run_file(argv[i] + 1);
	while (i < argc && argv[i][0] != '@') {
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
