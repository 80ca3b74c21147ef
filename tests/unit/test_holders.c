/* link: src/core/holders.c src/core/ring.c src/util/crc32c.c src/core/sys.c -ldl */
/* Two processes holding one end after fork(): one killed in the middle of a
 * send leaves the other a state it can go on from, with the peer's checks
 * passing, wherever the kill landed; here right after it published bytes that
 * rewound the ring, before it saved its state. */
#include "holders.h"
#include "check.h"
#include "sys.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (64u << 10)

static void test_killed_after_rewind(void)
{
	/* The ring lives in shared memory, as in a segment. */
	struct ring_shared *sh = mmap(NULL, sizeof(*sh) + SIZE, PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	unsigned char *data = (unsigned char *)(sh + 1), buf[4096];
	struct ring_end prod, cons, heir;
	ring_end_init(&prod, sh, data, SIZE);
	ring_end_init(&cons, sh, data, SIZE);
	memset(buf, 'x', sizeof(buf));
	struct iovec iov = {buf, sizeof(buf)};

	/* Stream with the consumer keeping up: the producer rewinds each time it
	 * reaches RING_REWIND_AT into the ring, and reads the consumer's cursor
	 * only then, so what it saved last is the start of this lap. */
	uint64_t avail;
	for (int i = 0; i < 12; i++) {
		uint64_t space;
		if (ring_room(&prod) < sizeof(buf))
			CHECK_EQ(ring_space(&prod, &space), RING_OK);
		ring_write(&prod, &iov, 1, 0, sizeof(buf));
		ring_publish(&prod);
		CHECK_EQ(ring_avail(&cons, &avail), RING_OK);
		ring_consume(&cons, avail);
	}
	int fd = -1;
	struct holders *h = holders_new(&prod, &cons, &fd);
	CHECK(h != NULL);
	close(fd);

	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* The victim: rewinds (the ring is empty), publishes, dies holding
		 * the lock, its state unsaved. */
		struct ring_end mine;
		memcpy(&mine, &prod, sizeof(mine));
		holders_lock(h, HOLD_TX, &mine);
		mine.rewind_at = 0;
		ring_write(&mine, &iov, 1, 0, sizeof(buf));
		ring_publish(&mine);
		_exit(sh->prod_skip ? 0 : 1);
	}
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* it did rewind */

	/* The consumer follows the rewind and reads it all. */
	CHECK_EQ(ring_avail(&cons, &avail), RING_OK);
	CHECK_EQ(avail, sizeof(buf));
	ring_consume(&cons, avail);

	/* The heir takes over and streams on: a full ring's worth and more. */
	memcpy(&heir, &prod, sizeof(heir));
	for (int i = 0; i < 40; i++) {
		uint64_t space;
		holders_lock(h, HOLD_TX, &heir);
		/* What it knows of the consumer stays within a ring of its cursor,
		 * and the consumer's cursor passes its checks (a poll reads it). */
		CHECK(heir.pos - heir.peer <= heir.limit);
		CHECK_EQ(ring_space(&heir, &space), RING_OK);
		CHECK(ring_room(&heir) >= sizeof(buf));
		ring_write(&heir, &iov, 1, 0, sizeof(buf));
		ring_publish(&heir);
		holders_unlock(h, HOLD_TX, &heir);
		CHECK_EQ(ring_avail(&cons, &avail), RING_OK);
		CHECK_EQ(avail, sizeof(buf));
		ring_consume(&cons, avail);
	}
	holders_unmap(h);
	munmap(sh, sizeof(*sh) + SIZE);
}

int main(void)
{
	sys_init();
	RUN(test_killed_after_rewind);
	return check_report();
}
