#include "policy.h"

#include <errno.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define RULE_TEXT_MAX 1024

static const char *const default_names[] = {
	[POLICY_ALL] = "all",
	[POLICY_SMC_ONLY] = "smc-only",
	[POLICY_NONE] = "none",
};

static int fail(char *err, size_t errlen, const char *rule, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "%s: %s", rule, what);
	return -1;
}

static enum policy_default default_named(const char *s)
{
	for (int d = POLICY_ALL; d <= POLICY_NONE; d++)
		if (!strcmp(s, default_names[d]))
			return (enum policy_default)d;
	return POLICY_UNSET;
}

/* ADDR[/LEN], IPv4 or IPv6; an IPv4-mapped IPv6 prefix becomes the IPv4 one, as
 * peers' addresses do (addr.h). */
static const char *parse_prefix(struct policy_prefix *p, const char *s)
{
	char ip[INET6_ADDRSTRLEN + 8];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	struct addr a;

	if (n >= sizeof(ip))
		return "not an IPv4 or IPv6 address";
	memcpy(ip, s, n);
	ip[n] = 0;
	if (addr_parse(&a, ip) < 0)
		return "not an IPv4 or IPv6 address";
	unsigned max = a.family == AF_INET ? 32 : 128, len = max;
	if (slash) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(slash + 1, &end, 10);
		if (!slash[1] || *end || errno || slash[1] == '-' || slash[1] == '+')
			return "prefix length is not a number";
		/* ::ffff:a.b.c.d/len names IPv4 addresses once len covers the mapping. */
		int mapped = a.family == AF_INET && strchr(ip, ':');
		if (mapped && (v < 96 || v > 128))
			return "an IPv4-mapped prefix needs a length from 96 to 128";
		if (mapped)
			v -= 96;
		if (v > max)
			return a.family == AF_INET ? "prefix length above 32" : "prefix length above 128";
		len = (unsigned)v;
	}
	p->family = a.family;
	memcpy(p->ip, a.ip, sizeof(p->ip));
	p->len = len;
	return NULL;
}

static const char *parse_port(struct policy_rule *r, const char *s)
{
	char *end;
	unsigned long lo, hi;

	if (*s < '0' || *s > '9')
		return "not a port or a port range";
	lo = strtoul(s, &end, 10);
	hi = lo;
	if (*end == '-') {
		if (end[1] < '0' || end[1] > '9')
			return "not a port or a port range";
		hi = strtoul(end + 1, &end, 10);
	}
	if (*end)
		return "not a port or a port range";
	if (lo < 1 || hi > 65535 || lo > hi)
		return "ports go from 1 to 65535, low to high";
	r->port_lo = (uint16_t)lo;
	r->port_hi = (uint16_t)hi;
	return NULL;
}

static const struct {
	const char *name;
	enum policy_cond cond;
} conditions[] = {
	{"local", POLICY_C_LOCAL}, {"peer", POLICY_C_PEER}, {"port", POLICY_C_PORT},
	{"comm", POLICY_C_COMM},   {"proto", POLICY_C_PROTO},
};

/* One condition: its name and value. NULL, or what is wrong. */
static const char *parse_cond(struct policy_rule *r, enum policy_cond c, const char *v)
{
	switch (c) {
	case POLICY_C_LOCAL:
		return parse_prefix(&r->local, v);
	case POLICY_C_PEER:
		return parse_prefix(&r->peer, v);
	case POLICY_C_PORT:
		return parse_port(r, v);
	case POLICY_C_COMM:
		if (strlen(v) >= sizeof(r->comm))
			return "process name pattern too long";
		strcpy(r->comm, v);
		return NULL;
	case POLICY_C_PROTO:
		if (strcmp(v, "smc") && strcmp(v, "tcp"))
			return "expected smc or tcp";
		r->smc = !strcmp(v, "smc");
		return NULL;
	}
	return "unknown condition";
}

/* One rule, its text NUL-terminated and trimmed. */
static int parse_rule(struct policy *p, const char *text, char *err, size_t errlen)
{
	char copy[RULE_TEXT_MAX], *save, *w[2 * (sizeof(conditions) / sizeof(conditions[0])) + 2];
	unsigned n = 0;

	snprintf(copy, sizeof(copy), "%s", text);
	for (char *t = strtok_r(copy, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
		if (n == sizeof(w) / sizeof(w[0]))
			return fail(err, errlen, text, "too many words");
		w[n++] = t;
	}
	if (!n)
		return 0;
	/* "default MODE", or MODE alone */
	int keyword = !strcmp(w[0], "default");
	if (keyword || default_named(w[0]) != POLICY_UNSET) {
		unsigned words = keyword ? 2 : 1;
		enum policy_default d = n >= words ? default_named(w[words - 1]) : POLICY_UNSET;
		if (d == POLICY_UNSET)
			return fail(err, errlen, text, "expected default all, smc-only or none");
		if (n > words)
			return fail(err, errlen, text, "unexpected '%s'", w[words]);
		p->dflt = d;
		return 0;
	}
	if (strcmp(w[0], "include") && strcmp(w[0], "exclude"))
		return fail(err, errlen, text,
			    "unknown rule '%s' (expected include, exclude or default)", w[0]);
	if (p->nrules == POLICY_MAX_RULES)
		return fail(err, errlen, text, "more than %d rules", POLICY_MAX_RULES);
	struct policy_rule r = {.include = w[0][0] == 'i'};
	for (unsigned i = 1; i < n; i += 2) {
		enum policy_cond c = 0;
		for (size_t k = 0; k < sizeof(conditions) / sizeof(conditions[0]); k++)
			if (!strcmp(w[i], conditions[k].name))
				c = conditions[k].cond;
		if (!c)
			return fail(err, errlen, text,
				    "unknown condition '%s' (expected local, peer, port, comm or proto)",
				    w[i]);
		if (r.conds & c)
			return fail(err, errlen, text, "%s given twice", w[i]);
		if (i + 1 == n)
			return fail(err, errlen, text, "%s needs a value", w[i]);
		const char *why = parse_cond(&r, c, w[i + 1]);
		if (why)
			return fail(err, errlen, text, "%s %s: %s", w[i], w[i + 1], why);
		r.conds |= c;
	}
	p->rule[p->nrules++] = r;
	return 0;
}

int policy_parse(struct policy *p, const char *text, unsigned *line, char *err, size_t errlen)
{
	*line = 1;
	for (const char *l = text; *l; (*line)++) {
		size_t len = strcspn(l, "\n");
		char buf[RULE_TEXT_MAX];
		if (len >= sizeof(buf))
			return fail(err, errlen, "line", "longer than %d bytes", RULE_TEXT_MAX - 1);
		memcpy(buf, l, len);
		buf[len] = 0;
		buf[strcspn(buf, "#")] = 0;
		char *save;
		for (char *r = strtok_r(buf, ";", &save); r; r = strtok_r(NULL, ";", &save)) {
			r += strspn(r, " \t\r");
			size_t end = strlen(r);
			while (end && strchr(" \t\r", r[end - 1]))
				r[--end] = 0;
			if (*r && parse_rule(p, r, err, errlen) < 0)
				return -1;
		}
		l += len + (l[len] == '\n');
	}
	return 0;
}

/* stdio rather than read(): inside the library, read() is our own. */
char *policy_read_file(const char *path, char *err, size_t errlen)
{
	char *text = malloc(POLICY_TEXT_MAX + 1);
	FILE *f = fopen(path, "re");
	const char *why = NULL;
	size_t n = 0;

	if (!text || !f)
		why = strerror(text ? errno : ENOMEM);
	else if ((n = fread(text, 1, POLICY_TEXT_MAX + 1, f)), ferror(f))
		why = strerror(errno);
	else if (n > POLICY_TEXT_MAX)
		why = "larger than 64 KiB";
	else if (memchr(text, 0, n))
		why = "not a text file";
	if (f)
		fclose(f);
	if (why) {
		snprintf(err, errlen, "%s: %s", path, why);
		free(text);
		return NULL;
	}
	text[n] = 0;
	return text;
}

int policy_parse_setting(struct policy *p, const char *value, char *err, size_t errlen)
{
	char why[RULE_TEXT_MAX + 256];
	unsigned line;
	int r;

	if (value[0] != '/' && value[0] != '.') {
		r = policy_parse(p, value, &line, why, sizeof(why));
		if (r < 0)
			snprintf(err, errlen, "USMC_POLICY:%u: %s", line, why);
		return r;
	}
	char *text = policy_read_file(value, err, errlen);
	if (!text)
		return -1;
	r = policy_parse(p, text, &line, why, sizeof(why));
	if (r < 0)
		snprintf(err, errlen, "%s:%u: %s", value, line, why);
	free(text);
	return r;
}

/* ------------------------------------------------------------ matching */

enum match { NO, YES, UNKNOWN };

static int in_prefix(const struct policy_prefix *p, const struct addr *a)
{
	unsigned full = p->len / 8, rest = p->len % 8;

	if (a->family != p->family || memcmp(a->ip, p->ip, full))
		return 0;
	return !rest || !((a->ip[full] ^ p->ip[full]) & (0xff00 >> rest));
}

/* Combines one condition's verdict into the rule's so far. */
static enum match also(enum match so_far, int known, int holds)
{
	if (so_far == NO || (known && !holds))
		return NO;
	return known && so_far == YES ? YES : UNKNOWN;
}

static enum match rule_matches(const struct policy_rule *r, const struct policy_sock *s)
{
	enum match m = YES;
	unsigned k = s->known;

	if (r->conds & POLICY_C_PROTO)
		m = also(m, 1, r->smc == s->smc);
	if (r->conds & POLICY_C_LOCAL)
		m = also(m, k & POLICY_K_LOCAL_IP, in_prefix(&r->local, &s->local));
	if (r->conds & POLICY_C_PEER)
		m = also(m, k & POLICY_K_PEER, in_prefix(&r->peer, &s->peer));
	if (r->conds & POLICY_C_PORT) {
		unsigned port = s->server ? s->local.port : s->peer.port;
		int known = s->server ? k & POLICY_K_LOCAL_PORT : k & POLICY_K_PEER;
		m = also(m, known, port >= r->port_lo && port <= r->port_hi);
	}
	if (r->conds & POLICY_C_COMM)
		m = also(m, k & POLICY_K_COMM,
			 (s->comm && !fnmatch(r->comm, s->comm, 0)) ||
				 (s->prog && !fnmatch(r->comm, s->prog, 0)));
	return m;
}

int policy_admits(const struct policy *p, const struct policy_sock *s, enum policy_default dflt)
{
	for (unsigned i = 0; i < p->nrules; i++) {
		enum match m = rule_matches(&p->rule[i], s);
		/* An exclusion that may not apply lets later rules speak; an
		 * inclusion that may apply is enough. */
		if (m == YES || (m == UNKNOWN && p->rule[i].include))
			return p->rule[i].include;
	}
	return policy_default_admits(p, s->smc, dflt);
}

int policy_default_admits(const struct policy *p, int smc, enum policy_default dflt)
{
	if (p->dflt != POLICY_UNSET)
		dflt = p->dflt;
	return dflt == POLICY_ALL || (dflt == POLICY_SMC_ONLY && smc);
}

int policy_uses_local(const struct policy *p)
{
	for (unsigned i = 0; i < p->nrules; i++)
		if (p->rule[i].conds & POLICY_C_LOCAL)
			return 1;
	return 0;
}
