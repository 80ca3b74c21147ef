/* link: src/core/holders.c src/core/ring.c src/util/crc32c.c src/core/sys.c -ldl */
/* Two processes holding one end after fork(): one killed in the middle of an
 * operation leaves the other a state it can go on from, with the peer's checks
 * passing, wherever the kill landed: right after it published bytes that
 * rewound the ring, or after laps round the ring in one call while the
 * consumer kept up, in either direction, before it saved its state. */
#include "holders.h"
#include "check.h"
#include "sys.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (64u << 10)
#define CHUNK 4096u

/* A ring in shared memory, as in a segment, with both ends' private state there
 * too, so that the victim's moves show in the parent as the peer's would. */
struct pair {
	struct ring_end prod, cons;
	struct ring_shared sh;
};

static unsigned char chunk[CHUNK];
static struct iovec iov = {chunk, sizeof(chunk)};

static struct pair *pair_new(void)
{
	struct pair *p = mmap(NULL, sizeof(*p) + SIZE, PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	memset(p, 0, sizeof(*p));
	ring_end_init(&p->prod, &p->sh, (unsigned char *)(p + 1), SIZE);
	ring_end_init(&p->cons, &p->sh, (unsigned char *)(p + 1), SIZE);
	memset(chunk, 'x', sizeof(chunk));
	return p;
}

/* One chunk through, the consumer reading it at once. */
static void one_chunk(struct ring_end *prod, struct ring_end *cons)
{
	uint64_t space, avail;

	if (ring_room(prod) < CHUNK)
		CHECK_EQ(ring_space(prod, &space), RING_OK);
	CHECK(ring_room(prod) >= CHUNK);
	ring_write(prod, &iov, 1, 0, CHUNK);
	ring_publish(prod);
	CHECK_EQ(ring_avail(cons, &avail), RING_OK);
	CHECK_EQ(avail, CHUNK);
	ring_consume(cons, avail);
}

/* The victim runs in a child, which exits at once without unlocking. */
static void victim(void (*fn)(struct pair *, struct holders *), struct pair *p, struct holders *h)
{
	pid_t pid = fork();
	int st;

	CHECK(pid >= 0);
	if (pid == 0) {
		fn(p, h);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The heir of dir takes over and streams on, a full ring's worth and more, each
 * operation under the lock as a holder takes it. */
static void heir_streams(struct pair *p, struct holders *h, enum hold_dir dir)
{
	struct ring_end heir = dir == HOLD_TX ? p->prod : p->cons;
	struct ring_end *prod = dir == HOLD_TX ? &heir : &p->prod;
	struct ring_end *cons = dir == HOLD_TX ? &p->cons : &heir;

	for (int i = 0; i < 40; i++) {
		holders_lock(h, dir, &heir);
		/* What it knows of the consumer stays within a ring of its cursor,
		 * and the peer's cursor passes its checks. */
		if (dir == HOLD_TX)
			CHECK(heir.pos - heir.peer <= heir.limit);
		one_chunk(prod, cons);
		holders_unlock(h, dir, &heir);
	}
}

static struct holders *holders_of(struct pair *p)
{
	int fd = -1;
	struct holders *h = holders_new(&p->prod, &p->cons, &fd);

	CHECK(h != NULL);
	close(fd);
	return h;
}

/* Rewinds (the ring is empty), publishes, dies holding the lock. */
static void rewinds(struct pair *p, struct holders *h)
{
	struct ring_end mine = p->prod;

	holders_lock(h, HOLD_TX, &mine);
	mine.rewind_at = 0;
	ring_write(&mine, &iov, 1, 0, CHUNK);
	ring_publish(&mine);
	if (!p->sh.prod_skip)
		_exit(1);
}

static void test_killed_after_rewind(void)
{
	struct pair *p = pair_new();

	/* Stream with the consumer keeping up: the producer rewinds each time it
	 * reaches RING_REWIND_AT into the ring, and reads the consumer's cursor
	 * only then, so what it saved last is the start of this lap. */
	for (int i = 0; i < 12; i++)
		one_chunk(&p->prod, &p->cons);
	struct holders *h = holders_of(p);
	victim(rewinds, p, h);
	/* The consumer follows the rewind and reads it all. */
	uint64_t avail;
	CHECK_EQ(ring_avail(&p->cons, &avail), RING_OK);
	CHECK_EQ(avail, CHUNK);
	ring_consume(&p->cons, avail);
	heir_streams(p, h, HOLD_TX);
	holders_unmap(h);
	munmap(p, sizeof(*p) + SIZE);
}

/* Three laps round the ring in one operation of the producer, the consumer
 * keeping up, then death holding the lock. */
static void writes_laps(struct pair *p, struct holders *h)
{
	struct ring_end mine = p->prod;

	holders_lock(h, HOLD_TX, &mine);
	for (unsigned i = 0; i < 3 * SIZE / CHUNK + 1; i++)
		one_chunk(&mine, &p->cons);
}

/* The same of the consumer: one operation reads three laps. */
static void reads_laps(struct pair *p, struct holders *h)
{
	struct ring_end mine = p->cons;

	holders_lock(h, HOLD_RX, &mine);
	for (unsigned i = 0; i < 3 * SIZE / CHUNK + 1; i++)
		one_chunk(&p->prod, &mine);
}

static void test_killed_after_laps(void)
{
	enum hold_dir dirs[] = {HOLD_TX, HOLD_RX};

	for (int i = 0; i < 2; i++) {
		struct pair *p = pair_new();
		for (int j = 0; j < 5; j++)
			one_chunk(&p->prod, &p->cons);
		struct holders *h = holders_of(p);
		victim(dirs[i] == HOLD_TX ? writes_laps : reads_laps, p, h);
		heir_streams(p, h, dirs[i]);
		holders_unmap(h);
		munmap(p, sizeof(*p) + SIZE);
	}
}

int main(void)
{
	sys_init();
	RUN(test_killed_after_rewind);
	RUN(test_killed_after_laps);
	return check_report();
}
