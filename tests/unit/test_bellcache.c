/* link: src/core/bellcache.c src/core/sys.c */
/* The server's table of kept doorbell ends: every key finds what was put under it
 * (descriptor and unread count) through growth and removals (the probe runs
 * close up behind a removal), a replaced or dropped entry's descriptor is
 * closed, announced to epoll first while still open, and nothing leaks. */
#include "bellcache.h"
#include "check.h"
#include "hooks.h"

#include <fcntl.h>
#include <unistd.h>

static int is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* epoll's hook: how many ends were announced before their close, and how many
 * of those were still open then (a parked watch is removed by descriptor). */
static int announced, announced_open;

void epoll_bell_gone(int fd)
{
	announced++;
	announced_open += is_open(fd);
}

/* A fresh descriptor standing for one segment's doorbell end. */
static int new_fd(void)
{
	return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void test_put_take(void)
{
	struct bellcache c = {0};
	int in = new_fd();
	uint32_t unread = 0;

	CHECK_EQ(bellcache_take(&c, 7, NULL), -1);
	CHECK_EQ(bellcache_put(&c, bellcache_key(1, 4096), in, 5), 0);
	CHECK_EQ(bellcache_take(&c, bellcache_key(1, 0), &unread), -1);
	CHECK_EQ(unread, 0);
	CHECK_EQ(bellcache_take(&c, bellcache_key(1, 4096), &unread), in);
	CHECK_EQ(unread, 5);
	CHECK_EQ(bellcache_take(&c, bellcache_key(1, 4096), NULL), -1);
	CHECK_EQ(c.n, 0);
	CHECK(is_open(in));
	close(in);
	bellcache_clear(&c);
}

static void test_replace_closes(void)
{
	struct bellcache c = {0};
	int a = new_fd(), b = new_fd();

	uint32_t unread = 0;

	announced = announced_open = 0;
	CHECK_EQ(bellcache_put(&c, 3, a, 1), 0);
	CHECK_EQ(bellcache_put(&c, 3, b, 2), 0);
	CHECK(!is_open(a));
	CHECK_EQ(announced, 1);
	CHECK_EQ(announced_open, 1);
	CHECK_EQ(c.n, 1);
	CHECK_EQ(bellcache_take(&c, 3, &unread), b);
	CHECK_EQ(unread, 2);
	bellcache_put(&c, 3, b, 0);
	bellcache_drop(&c, 3);
	CHECK(!is_open(b));
	CHECK_EQ(announced, 2);
	CHECK_EQ(announced_open, 2);
	CHECK_EQ(c.n, 0);
	bellcache_clear(&c);
}

/* Many keys, removed in an order that punches holes into probe runs. */
static void test_many(void)
{
	enum { N = 600 }; /* inside the usual limit of 1024 descriptors */
	static int fds[N];
	struct bellcache c = {0};

	for (int i = 0; i < N; i++) {
		fds[i] = new_fd();
		CHECK_EQ(bellcache_put(&c, bellcache_key(1 + i % 3, (uint64_t)i << 12), fds[i],
				       (uint32_t)i), 0);
	}
	CHECK_EQ(c.n, N);
	for (int i = 0; i < N; i += 2) {
		uint32_t unread = 0;
		int fd = bellcache_take(&c, bellcache_key(1 + i % 3, (uint64_t)i << 12), &unread);
		CHECK_EQ(fd, fds[i]);
		CHECK_EQ(unread, (uint32_t)i);
		close(fd);
	}
	for (int i = 1; i < N; i += 2) {
		int fd = bellcache_take(&c, bellcache_key(1 + i % 3, (uint64_t)i << 12), NULL);
		CHECK_EQ(fd, fds[i]);
		bellcache_put(&c, bellcache_key(1 + i % 3, (uint64_t)i << 12), fd, 0);
	}
	CHECK_EQ(c.n, N / 2);
	announced = announced_open = 0;
	bellcache_clear(&c);
	CHECK_EQ(announced, N / 2);
	CHECK_EQ(announced_open, N / 2);
	for (int i = 1; i < N; i += 2)
		CHECK(!is_open(fds[i]));
	CHECK_EQ(c.n, 0);
}

int main(void)
{
	RUN(test_put_take);
	RUN(test_replace_closes);
	RUN(test_many);
	return check_report();
}
