/* link: src/core/shortlived.c src/core/addr.c */
/* The short-connection policy's learning, on a clock of the test's own: a
 * destination is held on TCP only after SHORT_STREAK short connections in a row
 * whose peer ran on our core, one long connection (or one across cores) undoes
 * any of it, a hold lasts its time and then lets connections through again,
 * doubles while those are short again up to its limit, and each destination
 * learns alone. */
#include "check.h"
#include "shortlived.h"

#include <netinet/in.h>
#include <string.h>

#define MS 1000000ull

static struct addr dest(uint16_t port)
{
	struct addr a;

	memset(&a, 0, sizeof(a));
	a.family = AF_INET;
	a.ip[0] = 127;
	a.ip[3] = 1;
	a.port = port;
	return a;
}

/* n connections to d, each of bytes and lived ns, its peer on our core, ending
 * at now. */
static void ends(const struct addr *d, unsigned n, uint64_t bytes, uint64_t lived, uint64_t now)
{
	for (unsigned i = 0; i < n; i++)
		shortlived_ended(d, bytes, lived, 1, now);
}

static void test_streak(void)
{
	struct addr d = dest(1000);

	CHECK(!shortlived_hold(&d, 0));
	ends(&d, SHORT_STREAK - 1, 100, MS, 0);
	CHECK(!shortlived_hold(&d, 0));
	ends(&d, 1, 100, MS, 0);
	CHECK(shortlived_hold(&d, 1));
	CHECK(shortlived_hold(&d, SHORT_HOLD_MIN_NS - 1));
	CHECK(!shortlived_hold(&d, SHORT_HOLD_MIN_NS));
}

static void test_long_breaks_streak(void)
{
	struct addr d = dest(1001);

	ends(&d, SHORT_STREAK - 1, 100, MS, 0);
	ends(&d, 1, SHORT_BYTES, MS, 0);     /* enough bytes */
	ends(&d, SHORT_STREAK - 1, 100, MS, 0);
	CHECK(!shortlived_hold(&d, 0));
	ends(&d, 1, 100, SHORT_LIFE_NS, 0);  /* lived long enough */
	ends(&d, SHORT_STREAK - 1, 100, MS, 0);
	CHECK(!shortlived_hold(&d, 0));
	shortlived_ended(&d, 100, MS, 0, 0); /* its peer on another core */
	ends(&d, SHORT_STREAK - 1, 100, MS, 0);
	CHECK(!shortlived_hold(&d, 0));
	ends(&d, 1, 100, MS, 0);
	CHECK(shortlived_hold(&d, 0));
	/* A long one during the hold ends it at once. */
	ends(&d, 1, 1 << 20, MS, 1);
	CHECK(!shortlived_hold(&d, 2));
}

static void test_hold_doubles(void)
{
	struct addr d = dest(1002);
	uint64_t now = 0, hold = SHORT_HOLD_MIN_NS;

	ends(&d, SHORT_STREAK, 100, MS, now);
	for (int i = 0; i < 12; i++) {
		CHECK(shortlived_hold(&d, now + hold - 1));
		/* Stragglers made before the hold say nothing new. */
		ends(&d, 3, 100, MS, now + hold / 2);
		CHECK(!shortlived_hold(&d, now + hold));
		/* The first connection tried after it is short again. */
		now += hold;
		ends(&d, 1, 100, MS, now);
		hold = hold * 2 < SHORT_HOLD_MAX_NS ? hold * 2 : SHORT_HOLD_MAX_NS;
	}
	CHECK_EQ(hold, SHORT_HOLD_MAX_NS);
	CHECK(shortlived_hold(&d, now + SHORT_HOLD_MAX_NS - 1));
	CHECK(!shortlived_hold(&d, now + SHORT_HOLD_MAX_NS));
	/* Tried after the hold and long: accelerated again, and learning anew. */
	ends(&d, 1, 1 << 20, 10 * MS, now + SHORT_HOLD_MAX_NS);
	ends(&d, SHORT_STREAK - 1, 100, MS, now + SHORT_HOLD_MAX_NS);
	CHECK(!shortlived_hold(&d, now + SHORT_HOLD_MAX_NS));
}

static void test_destinations_apart(void)
{
	struct addr a = dest(2000), b = dest(2001);

	ends(&a, SHORT_STREAK, 100, MS, 0);
	CHECK(shortlived_hold(&a, 0));
	CHECK(!shortlived_hold(&b, 0));
	b.ip[3] = 2;
	b.port = 2000;
	CHECK(!shortlived_hold(&b, 0));
}

int main(void)
{
	RUN(test_streak);
	RUN(test_long_breaks_streak);
	RUN(test_hold_doubles);
	RUN(test_destinations_apart);
	return check_report();
}
