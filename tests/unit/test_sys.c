/* link: src/core/sys.c -ldl */
/* The descriptors usmc keeps for itself go to the top quarter of the descriptor
 * limit, also after the application lowered the limit (as nginx's workers do
 * with worker_rlimit_nofile): a descriptor is moved below the new limit, not
 * left where the application's own go. */
#include "sys.h"
#include "check.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

static int open_low(void)
{
	return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void test_moves_high(void)
{
	struct rlimit rl;

	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rlim_t lim = rl.rlim_cur < (1u << 20) ? rl.rlim_cur : (1u << 20);
	int fd = sys_fd_high(open_low());
	CHECK(fd >= (int)(lim - lim / 4));
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
}

static void test_limit_lowered(void)
{
	struct rlimit rl, low;

	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	close(sys_fd_high(open_low())); /* the first call learns the limit */
	low = rl;
	low.rlim_cur = 512;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
	int fd = sys_fd_high(open_low());
	CHECK(fd >= 512 - 512 / 4);
	CHECK(fd < 512);
	close(fd);
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

int main(void)
{
	sys_init();
	RUN(test_moves_high);
	RUN(test_limit_lowered);
	return check_report();
}
