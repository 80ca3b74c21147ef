/* usmc check HOST:PORT: would a connection from here to there be accelerated,
 * and if not, why. Like smc_chk, it asks twice: the registry of the runtime
 * directory says what a client would find there, and a real connection, made
 * by this program re-run under the library, shows what actually happens. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../core/addr.h"
#include "../core/config.h"
#include "../core/decline.h"
#include "../core/policy.h"
#include "../core/regentry.h"
#include "json.h"
#include "proctcp.h"
#include "socks.h"
#include "usmc.h"

struct target {
	char host[256], port[16], numeric[64];
	struct sockaddr_storage ss;
};

/* What the registry says; decline is what a client would fall back for. */
struct reg_report {
	const char *verdict;
	char detail[600];
	int ok;
};

/* The outcome of the real connection. */
struct conn_report {
	const char *result;    /* accelerated, fallback, pending, error */
	int decline;           /* for fallback: enum decline */
	char detail[256];
};

/* HOST:PORT or [HOST]:PORT, resolved as connect() would be given it. */
static int parse_target(const char *arg, struct target *t)
{
	const char *colon = strrchr(arg, ':');
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
	size_t hl;

	if (!colon || !colon[1] || strlen(colon + 1) >= sizeof(t->port))
		return -1;
	if (arg[0] == '[') {
		if (colon == arg || colon[-1] != ']')
			return -1;
		hl = (size_t)(colon - 1 - (arg + 1));
		memcpy(t->host, arg + 1, hl < sizeof(t->host) ? hl : 0);
	} else {
		hl = (size_t)(colon - arg);
		if (memchr(arg, ':', hl)) /* an IPv6 address needs its brackets */
			return -1;
		memcpy(t->host, arg, hl < sizeof(t->host) ? hl : 0);
	}
	if (!hl || hl >= sizeof(t->host))
		return -1;
	t->host[hl] = 0;
	snprintf(t->port, sizeof(t->port), "%s", colon + 1);
	char *end;
	long p = strtol(t->port, &end, 10);
	if (*end || p < 1 || p > 65535)
		return -1;
	int e = getaddrinfo(t->host, t->port, &hints, &res);
	if (e) {
		fprintf(stderr, "usmc check: %s: %s\n", t->host, gai_strerror(e));
		return -1;
	}
	memcpy(&t->ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	struct addr a;
	addr_from_sockaddr(&a, (struct sockaddr *)&t->ss);
	addr_format(&a, t->numeric, sizeof(t->numeric));
	return 0;
}

static unsigned long my_netns(void)
{
	struct stat st;
	return stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
}

/* Whether anything at all listens on the port in our network namespace. */
static int port_listened(unsigned port)
{
	struct tcp_table t;
	int found = 0;

	if (tcp_table_read(0, &t) < 0)
		return 0;
	for (size_t i = 0; i < t.n && !found; i++) {
		struct addr a;
		addr_from_sockaddr(&a, (struct sockaddr *)&t.e[i].local);
		found = t.e[i].state == 10 /* TCP_LISTEN */ && a.port == port;
	}
	tcp_table_free(&t);
	return found;
}

/* The client's side of the policy in USMC_POLICY (usmc(7)), judged for a
 * plain TCP socket of a program under `usmc run` connecting to the target. A
 * rule on the process name matches either way: the program is not known here.
 * The server applies its own policy when it accepts; the probe shows that. */
static int policy_excludes(const struct target *t, struct reg_report *r)
{
	static struct policy pol;
	const char *v = getenv("USMC_POLICY");
	char err[2048];
	struct policy_sock q = {.known = POLICY_K_PEER};

	if (!v || !*v)
		return 0;
	if (policy_parse_setting(&pol, v, err, sizeof(err)) < 0) {
		r->verdict = "policy";
		snprintf(r->detail, sizeof(r->detail),
			 "USMC_POLICY is not valid, so the library keeps every socket on TCP: %.500s",
			 err);
		return 1;
	}
	addr_from_sockaddr(&q.peer, (const struct sockaddr *)&t->ss);
	if (policy_admits(&pol, &q, POLICY_ALL))
		return 0;
	q.smc = 1;
	r->verdict = "policy";
	snprintf(r->detail, sizeof(r->detail),
		 "USMC_POLICY keeps TCP sockets to %s port %s on TCP%s", t->numeric, t->port,
		 policy_admits(&pol, &q, POLICY_ALL) ? " (IPPROTO_SMC sockets are admitted)" : "");
	return 1;
}

static void ask_registry(const struct target *t, struct reg_report *r)
{
	char lp[4200], target[REGENTRY_LIST_MAX + 600], sock[4500], why[sizeof(cfg.rundir) + 128];
	struct regentry e;
	struct addr d;
	struct stat st;
	unsigned port = addr_port((const struct sockaddr *)&t->ss);

	r->ok = 0;
	if (config_rundir_check(0, why, sizeof(why)) < 0) {
		r->verdict = "rundir_unusable";
		snprintf(r->detail, sizeof(r->detail), "%s: nothing is accelerated in it", why);
		return;
	}
	if (policy_excludes(t, r))
		return;
	snprintf(lp, sizeof(lp), "%s/l-%u", cfg.rundir, port);
	ssize_t n = readlink(lp, target, sizeof(target) - 1);
	if (n <= 0) {
		r->verdict = "not_registered";
		snprintf(r->detail, sizeof(r->detail),
			 port_listened(port)
				 ? "something listens on port %u here, but not under usmc in this "
				   "runtime directory (it runs without usmc, or in another trust domain)"
				 : "no listener under usmc on port %u in this runtime directory, and "
				   "none at all in this network namespace",
			 port);
		return;
	}
	target[n] = 0;
	addr_from_sockaddr(&d, (const struct sockaddr *)&t->ss);
	addr_reached(&d);
	switch (regentry_judge(target, &d, my_netns(), &e)) {
	case REG_AMBIGUOUS:
		r->verdict = "ambiguous";
		snprintf(r->detail, sizeof(r->detail),
			 "several processes listen on port %u: the kernel may hand a connection "
			 "to either, so none is accelerated", port);
		return;
	case REG_MALFORMED:
		r->verdict = "malformed";
		snprintf(r->detail, sizeof(r->detail), "the entry for port %u names no listener",
			 port);
		return;
	case REG_NETNS:
		r->verdict = "other_netns";
		snprintf(r->detail, sizeof(r->detail),
			 "the listener on port %u is in another network namespace: %s reaches "
			 "this namespace's own loopback", port, t->numeric);
		return;
	case REG_ADDRESS:
		r->verdict = "other_address";
		snprintf(r->detail, sizeof(r->detail),
			 "the listener on port %u accepts on %.400s, not on %s (another address, or "
			 "address translation between here and there)", port, e.list, t->numeric);
		return;
	case REG_OK:
		break;
	}
	snprintf(sock, sizeof(sock), "%s/%s", cfg.rundir, e.name);
	if (lstat(sock, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		r->verdict = "stale";
		snprintf(r->detail, sizeof(r->detail),
			 "the listener registered on port %u is gone (no control socket %s)", port,
			 e.name);
		return;
	}
	r->ok = 1;
	r->verdict = "registered";
	snprintf(r->detail, sizeof(r->detail),
		 "a listener under usmc accepts on port %u (control socket %s)", port, e.name);
}

/* ------------------------------------------------------------ the probe */

struct own_slot {
	int fd;
	struct socktab_slot sl;
	int found;
};

static int find_own(struct procfile *f, void *arg)
{
	struct own_slot *o = arg;
	const struct socktab_hdr *h = socks_table(f);

	if (h && f->alive && socks_pid(h) == getpid() && socks_slot(h, (uint32_t)o->fd, &o->sl))
		o->found = 1;
	return o->found;
}

/* Runs under the library (`usmc run`): connects, waits until the connection is
 * decided, and prints the outcome as the library published it. */
static int probe(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV}, *res;
	int err = 0;
	socklen_t el = sizeof(err);

	if (config_load() < 0 || getaddrinfo(host, port, &hints, &res))
		return 2;
	/* A plain TCP socket, as an unmodified program under `usmc run` makes. */
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || (connect(fd, res->ai_addr, res->ai_addrlen) < 0 && errno != EINPROGRESS)) {
		printf("error %s\n", strerror(errno));
		return 0;
	}
	freeaddrinfo(res);
	struct pollfd pf = {fd, POLLOUT, 0};
	if (poll(&pf, 1, 10000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
		printf("error %s\n", err ? strerror(err) : "connection timed out");
		return 0;
	}
	/* A pending connection is decided when the server attaches, declines or
	 * lets the handshake time out; polling the socket moves it along. */
	struct own_slot o = {.fd = fd};
	for (unsigned waited = 0; waited <= cfg.handshake_ms + 2000; waited += 10) {
		o.found = 0;
		procfile_each("socks", sizeof(struct socktab_hdr), 0, find_own, &o);
		if (!o.found || o.sl.state != SOCKTAB_PENDING)
			break;
		pf = (struct pollfd){fd, POLLIN, 0};
		poll(&pf, 1, 10);
	}
	if (!o.found)
		printf("error the library published nothing for the connection (USMC_DISABLE, or "
		       "a runtime directory it cannot write in)\n");
	else if (o.sl.state == SOCKTAB_SHM)
		printf("accelerated\n");
	else if (o.sl.state == SOCKTAB_TCP)
		printf("fallback %u\n", o.sl.decline);
	else
		printf("pending\n");
	close(fd);
	return 0;
}

static void connect_for_real(const struct target *t, struct conn_report *c)
{
	char line[256] = "", me[4200];
	int p[2];
	unsigned d;

	c->result = "error";
	c->decline = -1;
	snprintf(c->detail, sizeof(c->detail), "the probe did not run");
	ssize_t n = readlink("/proc/self/exe", me, sizeof(me) - 1);
	if (n <= 0 || pipe(p) < 0)
		return;
	me[n] = 0;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl(me, "usmc", "run", "--rundir", cfg.rundir, "--", me, "check", "--probe",
		      t->numeric, t->port, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	FILE *f = pid > 0 ? fdopen(p[0], "r") : NULL;
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		fclose(f);
	} else {
		close(p[0]);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	line[strcspn(line, "\n")] = 0;
	if (!strcmp(line, "accelerated") || !strcmp(line, "pending")) {
		c->result = line[0] == 'a' ? "accelerated" : "pending";
		c->detail[0] = 0;
	} else if (sscanf(line, "fallback %u", &d) == 1 && d < DECL_MAX) {
		c->result = "fallback";
		c->decline = (int)d;
		c->detail[0] = 0;
	} else if (!strncmp(line, "error ", 6)) {
		snprintf(c->detail, sizeof(c->detail), "%s", line + 6);
	}
}

/* ------------------------------------------------------------ report */

static void print_text(const struct target *t, const struct reg_report *r,
		       const struct conn_report *c, int accel)
{
	printf("target:     %s (%s port %s)\n", t->host, t->numeric, t->port);
	printf("rundir:     %s\n", cfg.rundir);
	printf("registry:   %s: %s\n", r->verdict, r->detail);
	if (c) {
		printf("connection: %s", c->result);
		if (c->decline >= 0)
			printf(": TCP 0x%08x %s", decline_code((enum decline)c->decline),
			       decline_name((enum decline)c->decline));
		if (c->detail[0])
			printf(": %s", c->detail);
		printf("\n");
	}
	printf("verdict:    %s\n", accel ? "accelerated" : "not accelerated");
}

static void print_json(const struct target *t, const struct reg_report *r,
		       const struct conn_report *c, int accel)
{
	printf("{\"target\": ");
	json_string(stdout, t->host);
	printf(", \"address\": \"%s\", \"port\": %s, \"rundir\": ", t->numeric, t->port);
	json_string(stdout, cfg.rundir);
	printf(",\n \"registry\": {\"verdict\": \"%s\", \"detail\": ", r->verdict);
	json_string(stdout, r->detail);
	printf("},\n \"connection\": ");
	if (c) {
		printf("{\"result\": \"%s\", \"decline\": ", c->result);
		if (c->decline >= 0)
			printf("{\"code\": \"0x%08x\", \"name\": \"%s\"}",
			       decline_code((enum decline)c->decline),
			       decline_name((enum decline)c->decline));
		else
			printf("null");
		printf(", \"detail\": ");
		json_string(stdout, c->detail);
		printf("}");
	} else {
		printf("null");
	}
	printf(",\n \"accelerated\": %s}\n", accel ? "true" : "false");
}

int cmd_check(int argc, char **argv)
{
	int json = 0, no_connect = 0;
	const char *dest = NULL;
	struct target t;
	struct reg_report r;
	struct conn_report c;

	if (argc == 4 && !strcmp(argv[1], "--probe"))
		return probe(argv[2], argv[3]);
	for (int i = 1; i < argc; i++) {
		if (opt_rundir(argc, argv, &i))
			continue;
		if (is_help(argv[i]))
			help_exit();
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--no-connect"))
			no_connect = 1;
		else if (argv[i][0] != '-' && !dest)
			dest = argv[i];
		else
			die_usage();
	}
	memset(&t, 0, sizeof(t));
	if (!dest || parse_target(dest, &t) < 0)
		die_usage();
	if (config_load() < 0)
		return 2;
	ask_registry(&t, &r);
	if (!no_connect && !strcmp(r.verdict, "rundir_unusable"))
		c = (struct conn_report){"error", -1,
					 "not tried: the library would not use the runtime directory"};
	else if (!no_connect)
		connect_for_real(&t, &c);
	int accel = no_connect ? r.ok : !strcmp(c.result, "accelerated");
	if (json)
		print_json(&t, &r, no_connect ? NULL : &c, accel);
	else
		print_text(&t, &r, no_connect ? NULL : &c, accel);
	return accel ? 0 : 1;
}
