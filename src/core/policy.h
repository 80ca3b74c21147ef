/* Which TCP sockets may use shared memory: an ordered list of include/exclude
 * rules, the first that matches deciding, then a default. One parser for the
 * usmc command (which rejects a bad policy before the program starts) and for
 * the library (which reads USMC_POLICY when it loads). Syntax in man/usmc.7. */
#ifndef USMC_POLICY_H
#define USMC_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "addr.h"

#define POLICY_MAX_RULES 256
#define POLICY_NAME_MAX 64
/* A policy travels to the program in one environment variable. */
#define POLICY_TEXT_MAX (64 << 10)

/* What applies when no rule matches. */
enum policy_default {
	POLICY_UNSET,     /* the library chooses: all under `usmc run`, smc-only when linked */
	POLICY_ALL,       /* every TCP socket */
	POLICY_SMC_ONLY,  /* only sockets created with IPPROTO_SMC */
	POLICY_NONE,      /* none */
};

enum policy_cond {
	POLICY_C_LOCAL = 1,
	POLICY_C_PEER = 2,
	POLICY_C_PORT = 4,
	POLICY_C_COMM = 8,
	POLICY_C_PROTO = 16,
};

struct policy_prefix {
	int family;
	uint8_t ip[16];
	unsigned len;
};

struct policy_rule {
	int include;
	unsigned conds;                 /* POLICY_C_* */
	struct policy_prefix local, peer;
	uint16_t port_lo, port_hi;
	int smc;                        /* proto smc (1) or proto tcp (0) */
	char comm[POLICY_NAME_MAX];     /* a shell pattern */
};

struct policy {
	enum policy_default dflt;
	unsigned nrules;
	struct policy_rule rule[POLICY_MAX_RULES];
};

/* What is known of a socket when a decision is due. */
enum policy_known {
	POLICY_K_LOCAL_IP = 1,
	POLICY_K_LOCAL_PORT = 2,
	POLICY_K_PEER = 4,              /* address and port */
	POLICY_K_COMM = 8,
};

struct policy_sock {
	unsigned known;                 /* POLICY_K_* */
	int smc;                        /* created with IPPROTO_SMC */
	int server;                     /* listener or accepted: its port is the local one */
	struct addr local, peer;
	const char *comm, *prog;        /* kernel comm and argv[0]'s basename */
};

/* Appends the rules in text (separated by newlines or ';', '#' starts a comment)
 * to p. On error returns -1 with *line the line at fault and err the rule and
 * the problem; p then holds the rules before it. */
int policy_parse(struct policy *p, const char *text, unsigned *line, char *err, size_t errlen);
/* Reads a policy file (at most POLICY_TEXT_MAX bytes) into a new string; NULL
 * with err set when it cannot. */
char *policy_read_file(const char *path, char *err, size_t errlen);
/* Parses the value of USMC_POLICY: a file when it starts with '/' or '.', rules
 * otherwise. err names where the problem is ("FILE:LINE: ..."). */
int policy_parse_setting(struct policy *p, const char *value, char *err, size_t errlen);
/* Whether the first rule matching s includes it, else the default (dflt when p
 * leaves it unset). A condition on something s does not know yet may match or
 * not: the answer is 1 if either way could include the socket. */
int policy_admits(const struct policy *p, const struct policy_sock *s, enum policy_default dflt);
/* What the default alone answers for a socket (smc: made with IPPROTO_SMC). */
int policy_default_admits(const struct policy *p, int smc, enum policy_default dflt);
/* Whether some rule looks at the local address (worth a system call to learn). */
int policy_uses_local(const struct policy *p);

#endif
