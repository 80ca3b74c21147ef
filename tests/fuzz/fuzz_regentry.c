/* link: src/core/regentry.c src/core/addr.c */
/* regentry_parse and regentry_accepts on arbitrary link targets (what readlink of
 * <rundir>/l-<port> can return: any bytes but NUL, at most 3999). Besides memory
 * safety: an accepted entry names a plain file name in the run directory, its fields fit
 * their buffers, and written back the way the registry writes entries it parses to the
 * same fields; an entry accepts an address only if its list spells one. */
#include "fuzz.h"
#include "regentry.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#define TARGET_MAX 4000

static void addr_v4(struct addr *a, const char *s)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(80)};

	inet_pton(AF_INET, s, &sin.sin_addr);
	addr_from_sockaddr(a, (struct sockaddr *)&sin);
}

static void addr_v6(struct addr *a, const char *s)
{
	struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_port = htons(80)};

	inet_pton(AF_INET6, s, &sin6.sin6_addr);
	addr_from_sockaddr(a, (struct sockaddr *)&sin6);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct regentry e, again;
	static char target[TARGET_MAX], back[REGENTRY_NAME_MAX + 32 + REGENTRY_LIST_MAX];
	size_t n = size < TARGET_MAX - 1 ? size : TARGET_MAX - 1;
	struct addr probes[4];

	memcpy(target, data, n);
	target[n] = 0;
	if (regentry_parse(target, &e) < 0)
		return 0;
	size_t nl = strlen(e.name), ll = strlen(e.list);
	FUZZ_ASSERT(nl > 0 && nl < REGENTRY_NAME_MAX && ll > 0 && ll < REGENTRY_LIST_MAX);
	FUZZ_ASSERT(!strchr(e.name, '/') && strcmp(e.name, ".") && strcmp(e.name, ".."));
	FUZZ_ASSERT(!strpbrk(e.name, " \t\n\v\f\r") && !strpbrk(e.list, " \t\n\v\f\r"));

	snprintf(back, sizeof(back), "%s %lu %s", e.name, e.netns, e.list);
	FUZZ_ASSERT(regentry_parse(back, &again) == 0);
	FUZZ_ASSERT(!strcmp(e.name, again.name) && e.netns == again.netns &&
		    !strcmp(e.list, again.list));

	addr_v4(&probes[0], "127.0.0.1");
	addr_v4(&probes[1], "10.1.2.3");
	addr_v6(&probes[2], "::1");
	addr_v6(&probes[3], "::ffff:127.0.0.1");
	for (int i = 0; i < 4; i++)
		if (regentry_accepts(&e, &probes[i]))
			FUZZ_ASSERT(strpbrk(e.list, ".:") != NULL);
	/* The same address reached through IPv4 or its mapped IPv6 form. */
	FUZZ_ASSERT(regentry_accepts(&e, &probes[0]) == regentry_accepts(&e, &probes[3]));
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	static const char *const seeds[] = {
		"c-123-0badf00d.sock 4026531840 127.0.0.1",
		"c-123-0badf00d.sock 4026531840 127.0.0.1,::1,10.0.0.7",
		"c-9-00000001.sock 1 ::ffff:127.0.0.1",
		"!ambiguous",
		"../c-1-1.sock 1 127.0.0.1",
		"c-1-1.sock -1 127.0.0.1,,",
	};

	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
		emit(seeds[i], strlen(seeds[i]));
}
