/* usmc run: execute a program with the library preloaded, under a policy and
 * settings that are checked before it starts (the library would only refuse
 * them once the program runs). */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/config.h"
#include "../core/policy.h"
#include "../dev/regionfile.h"
#include "usmc.h"

_Noreturn static void bad(const char *fmt, ...)
{
	va_list ap;

	fputs("usmc run: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

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

/* Numeric settings that options pass to the library in its environment. */
static const struct setting {
	const char *short_name, *long_name, *env, *expected;
	uint64_t lo, hi;
} settings[] = {
	{"-r", "--recv-ring", "USMC_RECV_RING_SIZE", "a size from 4K to 64M", CONFIG_RING_MIN,
	 CONFIG_RING_MAX},
	{"-t", "--send-ring", "USMC_SEND_RING_SIZE", "a size from 4K to 64M", CONFIG_RING_MIN,
	 CONFIG_RING_MAX},
	{NULL, "--busy-poll", "USMC_BUSY_POLL_US", "microseconds from 0 to 1000000", 0,
	 CONFIG_BUSY_POLL_MAX},
};

/* The rules of every --policy and --rule, in order: checked here, handed to the
 * library as USMC_POLICY. */
static struct policy policy;
static char rules[POLICY_TEXT_MAX + 1];
static size_t rules_len;

/* origin: the file the rules come from, NULL for --rule. */
static void add_rules(const char *text, const char *origin)
{
	char why[2048];
	unsigned line;
	size_t n = strlen(text);

	if (policy_parse(&policy, text, &line, why, sizeof(why)) < 0) {
		if (origin)
			bad("%s:%u: %s", origin, line, why);
		bad("--rule: %s", why);
	}
	if (rules_len + n + 1 > POLICY_TEXT_MAX)
		bad("the policy is larger than %d bytes", POLICY_TEXT_MAX);
	memcpy(rules + rules_len, text, n);
	rules_len += n;
	rules[rules_len++] = '\n';
}

static void add_file(const char *path)
{
	char err[PATH_MAX + 256];
	char *text = policy_read_file(path, err, sizeof(err));

	if (!text)
		bad("%s", err);
	add_rules(text, path);
	free(text);
}

static const char *value_of(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc)
		bad("%s needs a value", argv[*i]);
	return argv[++*i];
}

/* An option that sets a number; 0 if arg is none of them. */
static int set_number(int argc, char **argv, int *i)
{
	for (size_t k = 0; k < sizeof(settings) / sizeof(settings[0]); k++) {
		const struct setting *o = &settings[k];
		uint64_t v;
		if (strcmp(argv[*i], o->long_name) && (!o->short_name || strcmp(argv[*i], o->short_name)))
			continue;
		const char *name = argv[*i], *val = value_of(argc, argv, i);
		if (config_number(val, o->lo, o->hi, &v) < 0)
			bad("%s %s: expected %s", name, val, o->expected);
		setenv(o->env, val, 1);
		return 1;
	}
	return 0;
}

/* Options up to the command; returns its index. */
static int parse_options(int argc, char **argv)
{
	int i = 1, policy_given = 0;

	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (is_help(a))
			help_exit();
		if (!strcmp(a, "--rundir")) {
			setenv("USMC_RUNDIR", value_of(argc, argv, &i), 1);
		} else if (!strcmp(a, "--device")) {
			setenv("USMC_DEVICE", value_of(argc, argv, &i), 1);
		} else if (!strcmp(a, "--policy")) {
			add_file(value_of(argc, argv, &i));
			policy_given = 1;
		} else if (!strcmp(a, "--rule")) {
			add_rules(value_of(argc, argv, &i), NULL);
			policy_given = 1;
		} else if (!set_number(argc, argv, &i)) {
			fprintf(stderr, "usmc run: unknown option %s\n", a);
			die_usage();
		}
	}
	if (i >= argc)
		die_usage();
	const char *env = getenv("USMC_POLICY");
	char err[PATH_MAX + 2048];
	if (policy_given) {
		rules[rules_len] = 0;
		setenv("USMC_POLICY", rules, 1);
	} else if (env && *env && policy_parse_setting(&policy, env, err, sizeof(err)) < 0) {
		bad("%s", err);
	}
	return i;
}

/* The region the ivshmem device would use, checked (and, blank, formatted) now:
 * missing, too small, unreadable or of another format, the program would run
 * without it. */
static int region_ahead(char *why, size_t len)
{
	struct region_map m;
	struct region r;
	char e[1024];

	for (int i = 0; i < cfg.ndevices; i++) {
		if (cfg.devices[i] != 1)
			continue;
		/* Joining the server would announce a peer to every other: its
		 * socket is checked only. */
		const char *server = region_server(cfg.region);
		struct stat st;
		if (server && (stat(server, &st) < 0 || !S_ISSOCK(st.st_mode))) {
			snprintf(why, len, "ivshmem: %s: no ivshmem server's socket there (usmc region "
					   "serve)",
				 server);
			return -1;
		}
		if (server)
			continue;
		if (region_map_open(&m, cfg.region, 0, e, sizeof(e)) < 0 ||
		    region_open(&r, &m, REGION_LEASE_DEFAULT_MS, e, sizeof(e)) < 0) {
			region_map_close(&m);
			snprintf(why, len, "ivshmem: %s", e);
			return -1;
		}
		region_map_close(&m);
	}
	return 0;
}

int cmd_run(int argc, char **argv)
{
	char lib[PATH_MAX], pre[8192], why[sizeof(cfg.rundir) + 128];
	int i = parse_options(argc, argv);

	if (config_load() < 0)
		return 2;
	/* Judged now: the library could only step aside once the program runs.
	 * Disabled, it uses no runtime directory. */
	if (!cfg.disabled && config_rundir_check(1, why, sizeof(why)) < 0)
		bad("%s", why);
	if (!cfg.disabled && region_ahead(why, sizeof(why)) < 0)
		bad("%s", why);
	lib_path(lib);
	const char *old = getenv("LD_PRELOAD");
#if defined(USMC_SANITIZER_RUNTIME) && defined(__SANITIZE_THREAD__)
	/* ThreadSanitizer goes after us: its interceptors call the next definition of
	 * sigaction() while the runtime starts, and ours, instrumented, cannot run before
	 * the runtime has set up the calling thread. */
	snprintf(pre, sizeof(pre), "%s:%s%s%s", lib, USMC_SANITIZER_RUNTIME, old && *old ? ":" : "",
		 old ? old : "");
#elif defined(USMC_SANITIZER_RUNTIME)
	/* AddressSanitizer needs its runtime loaded before anything else. */
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

