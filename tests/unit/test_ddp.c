/* link: src/core/ddp.c */
/* Direct data placement's bookkeeping: tags registered and released, the
 * window a placement fills across a tag's buffers, and what it refuses (a tag
 * not set up, twice set up, out of range; a range past the buffers), each
 * counted as Linux's ulp_ddp counts it. */
#include "check.h"

#include <errno.h>
#include <string.h>

#include "ddp.h"
#include "stats.h"

static uint64_t counted[STAT_MAX];

void stat_add(enum stat_id id, uint64_t n)
{
	counted[id] += n;
}

static uint64_t ddp_count(enum ddp_stat k)
{
	return counted[STAT_DDP + k];
}

static void check_setup_teardown(void)
{
	struct usmc_ddp_config cfg = {USMC_DDP_NVME_TCP, 128};
	struct usmc_ddp *d = ddp_new(3, &cfg);
	char a[100], b[50];
	struct iovec iov[2] = {{a, sizeof(a)}, {b, sizeof(b)}};

	memset(counted, 0, sizeof(counted));
	CHECK(d != NULL);
	CHECK_EQ(ddp_setup(d, 5, iov, 2), 0);
	CHECK_EQ(ddp_count(DDP_SETUP), 1);
	CHECK_EQ(ddp_setup(d, 5, iov, 2), -1);
	CHECK_EQ(errno, EBUSY);
	CHECK_EQ(ddp_setup(d, 128, iov, 2), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(ddp_setup(d, 6, iov, 0), -1);
	CHECK_EQ(ddp_setup(d, 6, iov, USMC_DDP_IOV_MAX + 1), -1);
	CHECK_EQ(ddp_count(DDP_SETUP_FAIL), 4);
	ddp_teardown(d, 5);
	ddp_teardown(d, 5);   /* once only */
	ddp_teardown(d, 999); /* out of range: nothing */
	CHECK_EQ(ddp_count(DDP_TEARDOWN), 1);
	CHECK_EQ(ddp_setup(d, 5, iov, 1), 0);
	ddp_free(d);
	cfg.max_tags = 0;
	CHECK(ddp_new(3, &cfg) == NULL);
	cfg.max_tags = DDP_TAGS_MAX + 1;
	CHECK(ddp_new(3, &cfg) == NULL);
	cfg.max_tags = 4;
	cfg.ulp = (enum usmc_ddp_ulp)7;
	CHECK(ddp_new(3, &cfg) == NULL);
}

static void check_window(void)
{
	struct usmc_ddp_config cfg = {USMC_DDP_NVME_TCP, 4};
	struct usmc_ddp *d = ddp_new(3, &cfg);
	char a[100], b[50], c[10];
	struct iovec iov[3] = {{a, sizeof(a)}, {b, sizeof(b)}, {c, sizeof(c)}}, win[USMC_DDP_IOV_MAX];

	memset(counted, 0, sizeof(counted));
	CHECK_EQ(ddp_window(d, 1, 0, 1, win), -1);
	CHECK_EQ(errno, ERANGE);
	CHECK_EQ(ddp_count(DDP_DROP), 1);
	ddp_setup(d, 1, iov, 3);
	CHECK_EQ(ddp_window(d, 1, 0, 160, win), 3);
	CHECK(win[0].iov_base == a && win[0].iov_len == 100 && win[2].iov_len == 10);
	CHECK_EQ(ddp_window(d, 1, 99, 2, win), 2);
	CHECK(win[0].iov_base == a + 99 && win[0].iov_len == 1);
	CHECK(win[1].iov_base == b && win[1].iov_len == 1);
	CHECK_EQ(ddp_window(d, 1, 150, 10, win), 1);
	CHECK(win[0].iov_base == c && win[0].iov_len == 10);
	CHECK_EQ(ddp_window(d, 1, 160, 0, win), 0);
	CHECK_EQ(ddp_window(d, 1, 150, 11, win), -1);
	CHECK_EQ(ddp_window(d, 1, 161, 0, win), -1);
	CHECK_EQ(ddp_window(d, 1, SIZE_MAX, 2, win), -1);
	CHECK_EQ(ddp_count(DDP_DROP), 4);
	ddp_teardown(d, 1);
	CHECK_EQ(ddp_window(d, 1, 0, 1, win), -1);
	ddp_free(d);
}

int main(void)
{
	RUN(check_setup_teardown);
	RUN(check_window);
	return check_report();
}
