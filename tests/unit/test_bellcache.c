/* link: src/core/bellcache.c src/core/sys.c */
/* The server's table of kept doorbells: every key finds what was put under it
 * through growth and removals (the probe runs close up behind a removal), a
 * replaced or dropped entry's descriptors are closed, and nothing leaks. */
#include "bellcache.h"
#include "check.h"

#include <fcntl.h>
#include <unistd.h>

static int is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* Two fresh descriptors standing for one segment's doorbells. */
static void two_fds(int fds[CLC_NBELLS])
{
	if (pipe(fds) < 0)
		fds[0] = fds[1] = -1;
}

static void test_put_take(void)
{
	struct bellcache c = {0};
	int in[2], out[2] = {-1, -1};

	two_fds(in);
	CHECK_EQ(bellcache_take(&c, 7, out), -1);
	CHECK_EQ(bellcache_put(&c, bellcache_key(1, 4096), in), 0);
	CHECK_EQ(bellcache_take(&c, bellcache_key(1, 0), out), -1);
	CHECK_EQ(bellcache_take(&c, bellcache_key(1, 4096), out), 0);
	CHECK_EQ(out[0], in[0]);
	CHECK_EQ(out[1], in[1]);
	CHECK_EQ(bellcache_take(&c, bellcache_key(1, 4096), out), -1);
	CHECK_EQ(c.n, 0);
	close(in[0]);
	close(in[1]);
	bellcache_clear(&c);
}

static void test_replace_closes(void)
{
	struct bellcache c = {0};
	int a[2], b[2], out[2];

	two_fds(a);
	two_fds(b);
	CHECK_EQ(bellcache_put(&c, 3, a), 0);
	CHECK_EQ(bellcache_put(&c, 3, b), 0);
	CHECK(!is_open(a[0]) && !is_open(a[1]));
	CHECK_EQ(c.n, 1);
	CHECK_EQ(bellcache_take(&c, 3, out), 0);
	CHECK_EQ(out[0], b[0]);
	bellcache_put(&c, 3, out);
	bellcache_drop(&c, 3);
	CHECK(!is_open(b[0]) && !is_open(b[1]));
	bellcache_clear(&c);
}

/* Many keys, removed in an order that punches holes into probe runs. */
static void test_many(void)
{
	enum { N = 300 }; /* 600 descriptors: inside the usual limit of 1024 */
	static int fds[N][2];
	struct bellcache c = {0};
	int out[2];

	for (int i = 0; i < N; i++) {
		two_fds(fds[i]);
		CHECK_EQ(bellcache_put(&c, bellcache_key(1 + i % 3, (uint64_t)i << 12), fds[i]), 0);
	}
	CHECK_EQ(c.n, N);
	for (int i = 0; i < N; i += 2) {
		CHECK_EQ(bellcache_take(&c, bellcache_key(1 + i % 3, (uint64_t)i << 12), out), 0);
		CHECK_EQ(out[0], fds[i][0]);
		close(out[0]);
		close(out[1]);
	}
	for (int i = 1; i < N; i += 2) {
		CHECK_EQ(bellcache_take(&c, bellcache_key(1 + i % 3, (uint64_t)i << 12), out), 0);
		CHECK_EQ(out[1], fds[i][1]);
		bellcache_put(&c, bellcache_key(1 + i % 3, (uint64_t)i << 12), out);
	}
	CHECK_EQ(c.n, N / 2);
	bellcache_clear(&c);
	for (int i = 1; i < N; i += 2)
		CHECK(!is_open(fds[i][0]));
	CHECK_EQ(c.n, 0);
}

int main(void)
{
	RUN(test_put_take);
	RUN(test_replace_closes);
	RUN(test_many);
	return check_report();
}
