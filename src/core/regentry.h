/* The text of a listener's entry in the run directory, the target of <rundir>/l-<port>:
 *
 *   "<control socket name> <network namespace inode> <address>[,<address>...]"
 *
 * where an address may be a prefix ADDR/LEN: a listener on the wildcard address
 * accepts on the whole of 127.0.0.0/8, which its interface list shows as 127.0.0.1.
 *
 * or "!ambiguous". Whoever can write the run directory can write it, so it is parsed
 * with suspicion: a name that could lead out of the run directory is refused. */
#ifndef USMC_REGENTRY_H
#define USMC_REGENTRY_H

#include "addr.h"

#define REGENTRY_NAME_MAX 256
#define REGENTRY_LIST_MAX 4000

struct regentry {
	char name[REGENTRY_NAME_MAX];  /* a file name in the run directory */
	unsigned long netns;
	char list[REGENTRY_LIST_MAX];  /* addresses, comma separated */
};

/* 0 with e filled when target names a control socket; -1 otherwise. */
int regentry_parse(const char *target, struct regentry *e);
/* Whether the listener accepts on dst's address (the port is not looked at). */
int regentry_accepts(const struct regentry *e, const struct addr *dst);

/* How an entry answers a client in network namespace netns connecting to dst
 * (the address it reaches: addr_reached()). */
enum reg_verdict {
	REG_OK,            /* e names the listener to propose to */
	REG_MALFORMED,     /* the text names no control socket */
	REG_AMBIGUOUS,     /* several processes listen on the port */
	REG_NETNS,         /* a loopback address, but the listener is in another namespace */
	REG_ADDRESS,       /* the listener does not accept on dst's address */
};
enum reg_verdict regentry_judge(const char *target, const struct addr *dst, unsigned long netns,
				struct regentry *e);

/* The same for an entry parsed already (regentry_parse() returned 0). */
enum reg_verdict regentry_verdict(const struct regentry *e, const struct addr *dst,
				  unsigned long netns);

#endif
