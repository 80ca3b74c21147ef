#include "regentry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int regentry_parse(const char *target, struct regentry *e)
{
	/* The widths match the buffers: one less, for the terminator. */
	if (sscanf(target, "%255s %lu %3999s", e->name, &e->netns, e->list) != 3)
		return -1;
	if (strchr(e->name, '/') || !strcmp(e->name, ".") || !strcmp(e->name, ".."))
		return -1;
	return 0;
}

/* Whether dst lies in ADDR/LEN, written into tok (which is cut at the '/'). */
static int in_prefix(char *tok, char *slash, const struct addr *dst)
{
	struct addr a;
	char *end;
	unsigned long len = strtoul(slash + 1, &end, 10);

	*slash = 0;
	if (*end || end == slash + 1 || addr_parse(&a, tok) < 0 || a.family != dst->family ||
	    len > (a.family == AF_INET ? 32u : 128u))
		return 0;
	unsigned full = (unsigned)len / 8, rest = (unsigned)len % 8;
	if (memcmp(a.ip, dst->ip, full))
		return 0;
	return !rest || !((a.ip[full] ^ dst->ip[full]) & (0xff00u >> rest));
}

int regentry_accepts(const struct regentry *e, const struct addr *dst)
{
	char buf[REGENTRY_LIST_MAX];
	char *save, *tok;

	memcpy(buf, e->list, sizeof(buf));
	buf[sizeof(buf) - 1] = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct addr a;
		char *slash = strchr(tok, '/');
		if (slash ? in_prefix(tok, slash, dst)
			  : addr_parse(&a, tok) == 0 && (a.port = dst->port, addr_equal(&a, dst)))
			return 1;
	}
	return 0;
}

enum reg_verdict regentry_verdict(const struct regentry *e, const struct addr *dst,
				  unsigned long netns)
{
	if (!regentry_accepts(e, dst))
		return REG_ADDRESS;
	/* Loopback addresses only reach listeners in the client's own namespace. */
	if (addr_is_loopback(dst) && e->netns != netns)
		return REG_NETNS;
	return REG_OK;
}

enum reg_verdict regentry_judge(const char *target, const struct addr *dst, unsigned long netns,
				struct regentry *e)
{
	if (target[0] == '!')
		return REG_AMBIGUOUS;
	if (regentry_parse(target, e) < 0)
		return REG_MALFORMED;
	return regentry_verdict(e, dst, netns);
}
