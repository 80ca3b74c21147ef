/* link: src/core/policy.c src/core/addr.c */
/* Policy rules: what parses and what is refused with the line and the reason,
 * first match wins, prefixes of every length in both families, IPv4-mapped
 * peers, port ranges, process name patterns, the defaults, and decisions taken
 * while the local address or the peer is not known yet. */
#include "policy.h"
#include "check.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct policy pol;

static int parse(const char *text)
{
	char err[2048];
	unsigned line;

	memset(&pol, 0, sizeof(pol));
	return policy_parse(&pol, text, &line, err, sizeof(err));
}

/* Parsing fails at want_line with a message containing want. */
static void refused(const char *text, unsigned want_line, const char *want)
{
	char err[2048] = "";
	unsigned line = 0;

	memset(&pol, 0, sizeof(pol));
	if (!CHECK(policy_parse(&pol, text, &line, err, sizeof(err)) < 0))
		printf("    accepted: %s\n", text);
	CHECK_EQ(line, want_line);
	if (!CHECK(strstr(err, want)))
		printf("    '%s' lacks '%s'\n", err, want);
}

static struct addr ip(const char *s, unsigned port)
{
	struct addr a;

	if (addr_parse(&a, s) < 0)
		abort();
	a.port = (uint16_t)port;
	return a;
}

/* A client of this process connecting from local to peer. */
static int client(int smc, const char *local, const char *peer, unsigned port)
{
	struct policy_sock s = {
		.known = POLICY_K_PEER | POLICY_K_COMM | POLICY_K_LOCAL_IP,
		.smc = smc,
		.local = ip(local, 0),
		.peer = ip(peer, port),
		.comm = "redis-server",
		.prog = "redis-server",
	};
	return policy_admits(&pol, &s, POLICY_ALL);
}

static void test_syntax(void)
{
	CHECK_EQ(parse(""), 0);
	CHECK_EQ(pol.nrules, 0);
	CHECK_EQ(pol.dflt, POLICY_UNSET);
	CHECK_EQ(parse("# only a comment\n\n   \n"), 0);
	CHECK_EQ(parse("exclude peer 10.0.0.0/8 # trailing comment\n"
		       "include local ::1 port 80-90 comm nginx* proto tcp\n"
		       "exclude; include port 22;default smc-only\n"),
		 0);
	CHECK_EQ(pol.nrules, 4);
	CHECK_EQ(pol.dflt, POLICY_SMC_ONLY);
	CHECK_EQ(pol.rule[1].conds,
		 POLICY_C_LOCAL | POLICY_C_PORT | POLICY_C_COMM | POLICY_C_PROTO);
	CHECK_EQ(pol.rule[1].port_lo, 80);
	CHECK_EQ(pol.rule[1].port_hi, 90);
	CHECK_EQ(parse("none"), 0);
	CHECK_EQ(pol.dflt, POLICY_NONE);
	CHECK_EQ(parse("default all\r\n"), 0);
	CHECK_EQ(pol.dflt, POLICY_ALL);
	CHECK_EQ(parse("include local 1.2.3.4"), 0);
	CHECK(policy_uses_local(&pol));
	CHECK_EQ(parse("include peer 1.2.3.4"), 0);
	CHECK(!policy_uses_local(&pol));
}

static void test_refused(void)
{
	refused("deny all", 1, "unknown rule 'deny'");
	refused("\n\nexclude peer 10.0.0.0/33", 3, "prefix length above 32");
	refused("exclude peer ::1/129", 1, "prefix length above 128");
	refused("exclude peer 10.0.0.0/", 1, "not a number");
	refused("exclude peer 10.0.0.0/-1", 1, "not a number");
	refused("exclude peer 10.0.0", 1, "not an IPv4 or IPv6 address");
	refused("exclude peer example.com", 1, "not an IPv4 or IPv6 address");
	refused("exclude peer ::ffff:10.0.0.0/90", 1, "from 96 to 128");
	refused("exclude peer", 1, "peer needs a value");
	refused("exclude pear 1.2.3.4", 1, "unknown condition 'pear'");
	refused("exclude port 1 port 2", 1, "port given twice");
	refused("exclude port 0", 1, "from 1 to 65535");
	refused("exclude port 65536", 1, "from 1 to 65535");
	refused("exclude port 90-80", 1, "low to high");
	refused("exclude port 80-", 1, "not a port");
	refused("exclude port http", 1, "not a port");
	refused("exclude proto udp", 1, "expected smc or tcp");
	refused("include; default", 1, "expected default all, smc-only or none");
	refused("default sometimes", 1, "expected default all, smc-only or none");
	refused("smc-only now", 1, "unexpected 'now'");
	refused("include\ninclude\nexclude comm "
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		3, "too long");
	/* The rules before the bad one are kept. */
	CHECK_EQ(pol.nrules, 2);
}

static void test_too_many(void)
{
	char *text = malloc(24 * (POLICY_MAX_RULES + 1));
	size_t n = 0;

	for (int i = 0; i <= POLICY_MAX_RULES; i++)
		n += (size_t)sprintf(text + n, "include port %d\n", i + 1);
	refused(text, POLICY_MAX_RULES + 1, "more than");
	CHECK_EQ(pol.nrules, POLICY_MAX_RULES);
	free(text);
}

static void test_first_match(void)
{
	CHECK_EQ(parse("include peer 10.1.0.0/16\nexclude peer 10.0.0.0/8"), 0);
	CHECK(client(0, "10.9.9.9", "10.1.2.3", 80));
	CHECK(!client(0, "10.9.9.9", "10.2.2.3", 80));
	CHECK(client(0, "10.9.9.9", "11.0.0.1", 80));
	CHECK_EQ(parse("exclude peer 10.0.0.0/8\ninclude peer 10.1.0.0/16"), 0);
	CHECK(!client(0, "10.9.9.9", "10.1.2.3", 80));
	/* Every condition of a rule must hold. */
	CHECK_EQ(parse("exclude peer 10.0.0.0/8 port 80 comm redis*"), 0);
	CHECK(!client(0, "1.1.1.1", "10.0.0.1", 80));
	CHECK(client(0, "1.1.1.1", "10.0.0.1", 81));
	CHECK_EQ(parse("exclude peer 10.0.0.0/8 port 80 comm nginx"), 0);
	CHECK(client(0, "1.1.1.1", "10.0.0.1", 80));
	CHECK_EQ(parse("exclude local 192.168.0.0/16"), 0);
	CHECK(!client(0, "192.168.3.4", "10.0.0.1", 80));
	CHECK(client(0, "192.169.3.4", "10.0.0.1", 80));
}

/* Every prefix length decides exactly at its boundary, in both families. */
static void test_prefix_lengths(void)
{
	char text[128];

	for (unsigned len = 0; len <= 32; len++) {
		snprintf(text, sizeof(text), "exclude peer 172.16.128.1/%u", len);
		CHECK_EQ(parse(text), 0);
		uint32_t base = 0xac108001u, mask = len ? ~0u << (32 - len) : 0;
		struct in_addr in = {htonl(base & mask)}, out = {htonl((base & mask) ^ ~mask)};
		CHECK(!client(0, "1.1.1.1", inet_ntoa(in), 1));
		CHECK(!client(0, "1.1.1.1", inet_ntoa(out), 1));
		if (len) {
			struct in_addr flip = {htonl(base ^ (1u << (32 - len)))};
			CHECK(client(0, "1.1.1.1", inet_ntoa(flip), 1));
		}
	}
	for (unsigned len = 1; len <= 128; len++) {
		struct addr a = ip("2001:db8::", 0);
		char s[INET6_ADDRSTRLEN];
		snprintf(text, sizeof(text), "exclude peer 2001:db8::/%u", len);
		CHECK_EQ(parse(text), 0);
		CHECK(!client(0, "::1", "2001:db8::", 1));
		a.ip[(len - 1) / 8] ^= (uint8_t)(0x80 >> ((len - 1) % 8));
		inet_ntop(AF_INET6, a.ip, s, sizeof(s));
		CHECK(client(0, "::1", s, 1));
	}
	/* Families never match each other; IPv4-mapped addresses are IPv4. */
	CHECK_EQ(parse("exclude peer 0.0.0.0/0"), 0);
	CHECK(client(0, "::1", "::2", 1));
	CHECK(!client(0, "::1", "::ffff:10.0.0.1", 1));
	CHECK_EQ(parse("exclude peer ::ffff:10.0.0.0/104"), 0);
	CHECK(!client(0, "1.1.1.1", "10.2.3.4", 1));
	CHECK(client(0, "1.1.1.1", "11.2.3.4", 1));
}

static void test_ports_and_names(void)
{
	CHECK_EQ(parse("exclude port 6379-6380"), 0);
	CHECK(client(0, "1.1.1.1", "2.2.2.2", 6378));
	CHECK(!client(0, "1.1.1.1", "2.2.2.2", 6379));
	CHECK(!client(0, "1.1.1.1", "2.2.2.2", 6380));
	CHECK(client(0, "1.1.1.1", "2.2.2.2", 6381));
	/* A server's port is its own. */
	struct policy_sock srv = {.known = POLICY_K_LOCAL_PORT | POLICY_K_PEER,
				  .server = 1,
				  .local = ip("2.2.2.2", 6379),
				  .peer = ip("1.1.1.1", 40000)};
	CHECK(!policy_admits(&pol, &srv, POLICY_ALL));
	srv.local.port = 80, srv.peer.port = 6379;
	CHECK(policy_admits(&pol, &srv, POLICY_ALL));
	/* comm or argv[0]'s basename, as a shell pattern. */
	struct policy_sock s = {.known = POLICY_K_COMM, .comm = "python3", .prog = "app.py"};
	CHECK_EQ(parse("exclude comm app.p?"), 0);
	CHECK(!policy_admits(&pol, &s, POLICY_ALL));
	CHECK_EQ(parse("exclude comm pyth*"), 0);
	CHECK(!policy_admits(&pol, &s, POLICY_ALL));
	CHECK_EQ(parse("exclude comm perl"), 0);
	CHECK(policy_admits(&pol, &s, POLICY_ALL));
}

static void test_defaults(void)
{
	struct policy_sock tcp = {0}, smc = {.smc = 1};

	CHECK_EQ(parse(""), 0);
	CHECK(policy_admits(&pol, &tcp, POLICY_ALL));
	CHECK(!policy_admits(&pol, &tcp, POLICY_SMC_ONLY));
	CHECK(policy_admits(&pol, &smc, POLICY_SMC_ONLY));
	CHECK(!policy_admits(&pol, &smc, POLICY_NONE));
	/* The policy's own default wins over the caller's. */
	CHECK_EQ(parse("smc-only"), 0);
	CHECK(!policy_admits(&pol, &tcp, POLICY_ALL));
	CHECK(policy_admits(&pol, &smc, POLICY_ALL));
	CHECK_EQ(parse("none"), 0);
	CHECK(!policy_admits(&pol, &smc, POLICY_ALL));
	CHECK_EQ(parse("exclude proto smc"), 0);
	CHECK(!policy_admits(&pol, &smc, POLICY_ALL));
	CHECK(policy_admits(&pol, &tcp, POLICY_ALL));
}

/* Before the peer is known (socket(), listen()), a socket counts as admitted if
 * some peer could be; once everything is known, the answer is exact. */
static void test_unknown(void)
{
	struct policy_sock nothing = {0};

	CHECK_EQ(parse("exclude peer 10.0.0.0/8"), 0);
	CHECK(policy_admits(&pol, &nothing, POLICY_ALL));
	CHECK_EQ(parse("exclude peer 10.0.0.0/8\ndefault none"), 0);
	CHECK(!policy_admits(&pol, &nothing, POLICY_ALL));
	CHECK_EQ(parse("include peer 10.0.0.0/8\ndefault none"), 0);
	CHECK(policy_admits(&pol, &nothing, POLICY_ALL));
	/* A known condition that fails rules the rule out, unknown ones or not. */
	CHECK_EQ(parse("include peer 10.0.0.0/8 proto smc\ndefault none"), 0);
	CHECK(!policy_admits(&pol, &nothing, POLICY_ALL));
	/* A listener on port 22 under "exclude port 22" takes no one. */
	struct policy_sock l = {.known = POLICY_K_LOCAL_PORT, .server = 1, .local = ip("0.0.0.0", 22)};
	CHECK_EQ(parse("exclude port 22"), 0);
	CHECK(!policy_admits(&pol, &l, POLICY_ALL));
	l.local.port = 23;
	CHECK(policy_admits(&pol, &l, POLICY_ALL));
	CHECK_EQ(parse("exclude comm sshd\nexclude local 127.0.0.0/8\ndefault all"), 0);
	CHECK(policy_admits(&pol, &l, POLICY_ALL));
}

static void test_setting(void)
{
	char err[4096], path[] = "/tmp/usmc-policy-test.XXXXXX";
	int fd = mkstemp(path);
	const char body[] = "include port 80\n# fine\nexclude peer 1.2.3.4/40\n";

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, body, sizeof(body) - 1), sizeof(body) - 1);
	close(fd);
	memset(&pol, 0, sizeof(pol));
	CHECK_EQ(policy_parse_setting(&pol, path, err, sizeof(err)), -1);
	char want[256];
	snprintf(want, sizeof(want), "%s:3: exclude peer 1.2.3.4/40: peer 1.2.3.4/40:", path);
	if (!CHECK(!strncmp(err, want, strlen(want))))
		printf("    got '%s'\n", err);
	unlink(path);
	memset(&pol, 0, sizeof(pol));
	CHECK_EQ(policy_parse_setting(&pol, path, err, sizeof(err)), -1);
	CHECK(strstr(err, "No such file"));
	memset(&pol, 0, sizeof(pol));
	CHECK_EQ(policy_parse_setting(&pol, "exclude port 22; smc-only", err, sizeof(err)), 0);
	CHECK_EQ(pol.nrules, 1);
	CHECK_EQ(policy_parse_setting(&pol, "include\nexclude port x", err, sizeof(err)), -1);
	if (!CHECK(!strncmp(err, "USMC_POLICY:2: exclude port x:", 30)))
		printf("    got '%s'\n", err);
	CHECK(!policy_read_file("/proc/self/mem", err, sizeof(err)));
}

int main(void)
{
	RUN(test_syntax);
	RUN(test_refused);
	RUN(test_too_many);
	RUN(test_first_match);
	RUN(test_prefix_lengths);
	RUN(test_ports_and_names);
	RUN(test_defaults);
	RUN(test_unknown);
	RUN(test_setting);
	return check_report();
}
