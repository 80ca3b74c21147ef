/* link: src/dev/region.c src/dev/slots.c src/dev/heap.c src/dev/chan.c src/dev/listeners.c src/core/addr.c src/core/sys.c */
/* threads */
/* The region's format and its tables: a layout that holds together for every
 * size and is refused as soon as one word of its header lies; a heap whose runs
 * never overlap, even when threads allocate at once, and whose dead owner's
 * granules all come back; slots taken, renewed and judged dead in the
 * observer's clock, a dead slot's memory freed only once no live server uses
 * its channels; message rings and doorbell queues in order, full, overflowing
 * and with cursors a peer broke; listeners published, read consistently,
 * matched by prefix, and kept to their kernel for loopback. */
#include "../../src/dev/chan.h"
#include "../../src/dev/heap.h"
#include "../../src/dev/listeners.h"
#include "../../src/dev/region.h"
#include "../../src/dev/slots.h"
#include "check.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (16u << 20)

/* A fresh formatted region in anonymous memory. */
static struct region fresh(uint64_t size, uint32_t lease_ms)
{
	struct region r = {0};
	struct region_hdr layout;
	unsigned char *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	CHECK(base != MAP_FAILED);
	CHECK_EQ(region_layout_default(&layout, size, lease_ms), 0);
	region_format(base, &layout, 42);
	CHECK_EQ(region_attach(&r, base, size), REGION_OK);
	return r;
}

static void gone(struct region *r)
{
	munmap(r->base, r->mapped);
}

static void test_layout_sizes(void)
{
	for (uint64_t size = REGION_MIN_SIZE; size <= (1ull << 30); size *= 2) {
		struct region_hdr h;
		CHECK_EQ(region_layout_default(&h, size, 2000), 0);
		atomic_store(&h.state, REGION_READY);
		CHECK_EQ(region_check(&h, size), REGION_OK);
		CHECK(h.heap_off + h.heap_granules * REGION_PAGE <= size);
		/* Most of it is heap. */
		CHECK(h.heap_granules * REGION_PAGE * 10 > size * 8 || size < (16u << 20));
	}
	struct region_hdr h;
	CHECK(region_layout_default(&h, REGION_MIN_SIZE - 1, 2000) < 0);
	CHECK(region_layout(&h, SIZE, 1, 8, 8, 2000) < 0);
	CHECK(region_layout(&h, SIZE, 64, 8, 8, 10) < 0);
}

static void test_check_refuses(void)
{
	struct region r = fresh(SIZE, 2000);
	struct region_hdr good = r.h, h;

	CHECK_EQ(region_check(&good, SIZE - 1), REGION_ESMALL);
	h = good, h.magic ^= 1;
	CHECK_EQ(region_check(&h, SIZE), REGION_EMAGIC);
	h = good, h.version = 2;
	CHECK_EQ(region_check(&h, SIZE), REGION_EVERSION);
	uint64_t *fields[] = {&h.slots_off, &h.chans_off, &h.listeners_off, &h.ports_off,
			      &h.heap_desc_off, &h.heap_off, &h.heap_granules};
	for (unsigned i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		h = good;
		*fields[i] += REGION_PAGE * 7;
		CHECK(region_check(&h, SIZE) != REGION_OK);
		h = good;
		*fields[i] = UINT64_MAX - REGION_PAGE + 1;
		CHECK(region_check(&h, SIZE) != REGION_OK);
	}
	h = good, h.nslots = 256;
	CHECK(region_check(&h, SIZE) != REGION_OK);
	h = good, h.lease_ms = 1;
	CHECK(region_check(&h, SIZE) != REGION_OK);
	/* Formatted again under us. */
	CHECK(!region_changed(&r));
	((struct region_hdr *)r.base)->format_id++;
	CHECK(region_changed(&r));
	gone(&r);
}

static void test_blank_claim(void)
{
	unsigned char *base = calloc(1, REGION_PAGE);
	struct region r;

	CHECK_EQ(region_attach(&r, base, REGION_PAGE), REGION_EBLANK);
	CHECK_EQ(region_claim_format(base, 7, 0), 1);
	CHECK_EQ(region_claim_format(base, 8, 0), 0);
	/* 8 saw 7 at work long enough: it takes over. */
	CHECK_EQ(region_claim_format(base, 8, 7), 1);
	CHECK_EQ(region_claim_format(base, 9, 7), 0);
	free(base);
}

static void test_heap(void)
{
	struct region r = fresh(SIZE, 2000);
	uint64_t hint = 0, a, b, c, used;

	a = heap_alloc(&r, 0x101, 3 * REGION_PAGE, &hint);
	b = heap_alloc(&r, 0x202, 1, &hint);
	CHECK(a && b && a != b);
	CHECK(heap_owned(&r, 0x101, a, 3 * REGION_PAGE));
	CHECK(!heap_owned(&r, 0x202, a, REGION_PAGE));
	CHECK(!heap_owned(&r, 0x101, a, 4 * REGION_PAGE));
	CHECK(!heap_owned(&r, 0x101, a + 1, REGION_PAGE));
	CHECK(!heap_owned(&r, 0x101, 0, REGION_PAGE));
	heap_usage(&r, &used, NULL);
	CHECK_EQ(used, 4);
	heap_free(&r, 0x202, a, 3 * REGION_PAGE); /* not its own: nothing happens */
	heap_usage(&r, &used, NULL);
	CHECK_EQ(used, 4);
	heap_free(&r, 0x101, a, 3 * REGION_PAGE);
	hint = 0;
	c = heap_alloc(&r, 0x303, 2 * REGION_PAGE, &hint);
	CHECK_EQ(c, a);
	CHECK_EQ(heap_free_owner(&r, 0x303), 2);
	CHECK_EQ(heap_free_owner(&r, 0x202), 1);
	heap_usage(&r, &used, NULL);
	CHECK_EQ(used, 0);
	/* All of it, then nothing more. */
	hint = 0;
	uint64_t all = heap_alloc(&r, 0x101, r.h.heap_granules * REGION_PAGE, &hint);
	CHECK_EQ(all, r.h.heap_off);
	CHECK_EQ(heap_alloc(&r, 0x202, 1, &hint), 0);
	gone(&r);
}

struct racer {
	struct region *r;
	uint64_t owner;
	uint64_t got[64];
	int n;
};

static void *race(void *arg)
{
	struct racer *x = arg;
	uint64_t hint = 0;

	for (int i = 0; i < 64; i++) {
		uint64_t off = heap_alloc(x->r, x->owner, 5 * REGION_PAGE, &hint);
		if (off)
			x->got[x->n++] = off;
	}
	return NULL;
}

static void test_heap_race(void)
{
	struct region r = fresh(SIZE, 2000);
	struct racer x[4];
	pthread_t t[4];

	for (int i = 0; i < 4; i++) {
		x[i] = (struct racer){.r = &r, .owner = (uint64_t)(i + 1) << 8 | 1};
		pthread_create(&t[i], NULL, race, &x[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < x[i].n; k++)
			CHECK(heap_owned(&r, x[i].owner, x[i].got[k], 5 * REGION_PAGE));
	uint64_t used;
	heap_usage(&r, &used, NULL);
	CHECK_EQ(used, 5u * (uint64_t)(x[0].n + x[1].n + x[2].n + x[3].n));
	gone(&r);
}

static void test_slots(void)
{
	struct region r = fresh(SIZE, 200);
	struct slot_self me, other;
	struct slot_seen seen = {0};

	slot_self_init(&me);
	other = me;
	memset(other.boot_id, 0x5a, sizeof(other.boot_id)); /* another kernel */
	uint64_t a = slot_claim(&r, &other), b = slot_claim(&r, &me);
	CHECK(a && b && a != b);
	CHECK(slot_key_valid(&r, a));
	CHECK(!slot_key_valid(&r, 0));
	CHECK(!slot_key_valid(&r, (1ull << 8) | 0xff));
	CHECK(slot_alive(&r, a, &seen, 1000, &me));
	CHECK_EQ(slot_renew(&r, a), 0);
	/* Moving: alive, whenever seen. */
	CHECK(slot_alive(&r, a, &seen, 1000 + 300000000ull, &me));
	/* Silent for less than the lease: alive; for more: dead. */
	CHECK(slot_alive(&r, a, &seen, 1000 + 400000000ull, &me));
	CHECK(!slot_alive(&r, a, &seen, 1000 + 600000000ull, &me));
	CHECK_EQ(slot_declare_dead(&r, a), 1);
	CHECK_EQ(slot_declare_dead(&r, a), 0);
	CHECK_EQ(slot_renew(&r, a), -1);
	CHECK(!slot_alive(&r, a, &seen, 0, &me));
	/* Taken again, with a new generation: the old key is dead for good. */
	CHECK(slot_reclaim(&r, slot_of_key(a), NULL, NULL));
	uint64_t a2 = slot_claim(&r, &other);
	CHECK_EQ(slot_of_key(a2), slot_of_key(a));
	CHECK(a2 != a);
	CHECK_EQ(slot_renew(&r, a), -1);
	/* Ours, on this kernel, held by a process that exited: dead at the next question. */
	pid_t child = fork();
	if (!child)
		_exit(0);
	waitpid(child, NULL, 0);
	me.pid = child;
	uint64_t c = slot_claim(&r, &me);
	struct slot_seen s2 = {0};
	slot_alive(&r, c, &s2, 5, &me);
	/* Its processes are asked after once per SLOT_EXIT_ASK_NS. */
	CHECK(slot_alive(&r, c, &s2, 6, &me));
	CHECK(!slot_alive(&r, c, &s2, 5 + SLOT_EXIT_ASK_NS, &me));
	slot_add_pid(&r, c, getpid());
	CHECK(slot_alive(&r, c, &s2, 5 + 2 * SLOT_EXIT_ASK_NS, &me));
	gone(&r);
}

static int alive_if(void *arg, uint64_t key)
{
	return key == *(uint64_t *)arg;
}

static void test_reclaim_waits_for_server(void)
{
	struct region r = fresh(SIZE, 2000);
	struct slot_self me;
	uint64_t hint = 0, word, used;

	slot_self_init(&me);
	uint64_t client = slot_claim(&r, &me), server = slot_claim(&r, &me);
	uint64_t mem = heap_alloc(&r, client, CHAN_MEM_SIZE, &hint);
	int ch = chan_open(&r, client, server, mem, &word);
	CHECK(ch >= 0);
	atomic_store(&chan_at(&r, (uint32_t)ch)->server, server);
	heap_alloc(&r, client, 9 * REGION_PAGE, &hint);
	struct listener l = {.owner = client, .port = 80, .naddr = 1,
			     .addr = {{.family = 4, .prefix = 32, .ip = {10, 0, 0, 1}}}};
	CHECK(listeners_add(&r, &l) >= 0);
	CHECK_EQ(slot_declare_dead(&r, client), 1);
	/* The server lives and holds the channel: nothing of the client's goes. */
	CHECK_EQ(slot_reclaim(&r, slot_of_key(client), alive_if, &server), 0);
	heap_usage(&r, &used, NULL);
	CHECK(used > 9);
	/* Its listener went at once. */
	CHECK_EQ(atomic_load(&ports_of(&r)->count[80]), 0);
	/* The server let go. */
	atomic_store(&chan_at(&r, (uint32_t)ch)->server, CHAN_LET_GO);
	CHECK_EQ(slot_reclaim(&r, slot_of_key(client), alive_if, &server), 1);
	heap_usage(&r, &used, NULL);
	CHECK_EQ(used, 0);
	CHECK_EQ(atomic_load(&chan_at(&r, (uint32_t)ch)->word) & 0xff, CHAN_FREE);
	gone(&r);
}

static void test_messages(void)
{
	struct chan_mem *m = calloc(1, sizeof(*m));
	struct chan_end tx = {.m = m}, rx = {.m = m};
	char buf[CHAN_MSG_MAX];

	CHECK_EQ(chan_recv(&rx, CHAN_DOWN, buf, sizeof(buf)), -EAGAIN);
	for (uint32_t i = 0; i < CHAN_DOWN_SLOTS; i++)
		CHECK_EQ(chan_send(&tx, CHAN_DOWN, &i, sizeof(i)), 0);
	CHECK_EQ(chan_send(&tx, CHAN_DOWN, "x", 1), -EAGAIN);
	CHECK(chan_pending(&rx, CHAN_DOWN));
	for (uint32_t i = 0; i < CHAN_DOWN_SLOTS; i++) {
		uint32_t v = 0;
		CHECK_EQ(chan_recv(&rx, CHAN_DOWN, &v, sizeof(v)), sizeof(v));
		CHECK_EQ(v, i);
	}
	CHECK_EQ(chan_send(&tx, CHAN_DOWN, buf, CHAN_MSG_MAX + 1), -EMSGSIZE);
	/* A producer cursor past a ring ahead, or behind ours, breaks it. */
	struct chan_end tx2 = {.m = m}, rx2 = {.m = m};
	atomic_store(&m->msg_tail[CHAN_UP].v, CHAN_UP_SLOTS + 1);
	CHECK_EQ(chan_recv(&rx2, CHAN_UP, buf, sizeof(buf)), -EPROTO);
	/* A slot whose length lies. */
	atomic_store(&m->msg_tail[CHAN_UP].v, 0);
	CHECK_EQ(chan_send(&tx2, CHAN_UP, "abc", 3), 0);
	m->up[0].len = CHAN_MSG_MAX + 5;
	CHECK_EQ(chan_recv(&rx2, CHAN_UP, buf, sizeof(buf)), -EPROTO);
	/* A consumer cursor ahead of the producer. */
	atomic_store(&m->msg_head[CHAN_UP].v, 100);
	CHECK_EQ(chan_send(&tx2, CHAN_UP, "abc", 3), -EPROTO);
	free(m);
}

static uint32_t rung[4 * CHAN_BELLS];
static int nrung;

static void note(void *arg, uint32_t page)
{
	(void)arg;
	rung[nrung++] = page;
}

static void test_bells(void)
{
	struct chan_mem *m = calloc(1, sizeof(*m));
	struct chan_end rx = {.m = m};

	nrung = 0;
	chan_bell_push(m, CHAN_UP, 5);
	chan_bell_push(m, CHAN_UP, 9);
	CHECK_EQ(chan_bell_pop(&rx, CHAN_UP, note, NULL), 2);
	CHECK_EQ(nrung, 2);
	CHECK_EQ(rung[0], 5);
	CHECK_EQ(rung[1], 9);
	CHECK_EQ(chan_bell_pop(&rx, CHAN_UP, note, NULL), 0);
	/* Past a queue's worth: one "everything" and a fresh start. */
	nrung = 0;
	for (uint32_t i = 0; i < CHAN_BELLS + 3; i++)
		chan_bell_push(m, CHAN_UP, 7);
	CHECK_EQ(chan_bell_pop(&rx, CHAN_UP, note, NULL), 1);
	CHECK_EQ(nrung, 1);
	CHECK_EQ(rung[0], 0);
	nrung = 0;
	chan_bell_push(m, CHAN_UP, 11);
	CHECK_EQ(chan_bell_pop(&rx, CHAN_UP, note, NULL), 1);
	CHECK_EQ(rung[0], 11);
	/* A producer that took a place and died before writing it: the queue
	 * waits, then starts over once a queue's worth came after. */
	atomic_fetch_add(&m->bell_tail[CHAN_UP].v, 1);
	chan_bell_push(m, CHAN_UP, 12);
	nrung = 0;
	CHECK_EQ(chan_bell_pop(&rx, CHAN_UP, note, NULL), 0);
	for (uint32_t i = 0; i < CHAN_BELLS; i++)
		chan_bell_push(m, CHAN_UP, 13);
	CHECK_EQ(chan_bell_pop(&rx, CHAN_UP, note, NULL), 1);
	CHECK_EQ(rung[0], 0);
	free(m);
}

static void test_listeners(void)
{
	struct region r = fresh(SIZE, 2000);
	struct slot_self me;
	struct listener l = {.port = 8080, .naddr = 2,
			     .addr = {{.family = 4, .prefix = 32, .ip = {10, 0, 0, 1}},
				      {.family = 4, .prefix = 8, .ip = {127}}}},
			out;

	slot_self_init(&me);
	l.owner = slot_claim(&r, &me);
	memcpy(l.boot_id, me.boot_id, 16);
	l.netns = 77;
	int i = listeners_add(&r, &l);
	CHECK(i >= 0);
	CHECK_EQ(atomic_load(&ports_of(&r)->count[8080]), 1);
	CHECK_EQ(listeners_read(&r, (uint32_t)i, &out), 0);
	CHECK_EQ(out.owner, l.owner);
	struct addr a = {.family = AF_INET, .ip = {10, 0, 0, 1}, .port = 8080};
	CHECK(listener_accepts(&out, &a, me.boot_id, 1));
	a.ip[3] = 2;
	CHECK(!listener_accepts(&out, &a, me.boot_id, 1));
	struct addr lo = {.family = AF_INET, .ip = {127, 0, 0, 9}, .port = 8080};
	CHECK(listener_accepts(&out, &lo, me.boot_id, 77));
	CHECK(!listener_accepts(&out, &lo, me.boot_id, 78));
	/* Being written: not read. */
	struct listener_entry *e = (struct listener_entry *)region_at(&r, r.h.listeners_off) + i;
	atomic_fetch_add(&e->seq, 1);
	CHECK_EQ(listeners_read(&r, (uint32_t)i, &out), -1);
	atomic_fetch_add(&e->seq, 1);
	/* Lies: too many addresses, a prefix too long, a family unknown. */
	e->naddr = 9;
	CHECK_EQ(listeners_read(&r, (uint32_t)i, &out), -1);
	e->naddr = 2;
	e->addr[1].prefix = 33;
	CHECK_EQ(listeners_read(&r, (uint32_t)i, &out), -1);
	e->addr[1].prefix = 8;
	e->addr[0].family = 5;
	CHECK_EQ(listeners_read(&r, (uint32_t)i, &out), -1);
	e->addr[0].family = 4;
	uint32_t before = atomic_load(&ports_of(&r)->changes[8080]);
	listeners_remove(&r, l.owner, 8080);
	CHECK_EQ(atomic_load(&ports_of(&r)->count[8080]), 0);
	CHECK(atomic_load(&ports_of(&r)->changes[8080]) != before);
	CHECK_EQ(listeners_read(&r, (uint32_t)i, &out), -1);
	gone(&r);
}

int main(void)
{
	RUN(test_layout_sizes);
	RUN(test_check_refuses);
	RUN(test_blank_claim);
	RUN(test_heap);
	RUN(test_heap_race);
	RUN(test_slots);
	RUN(test_reclaim_waits_for_server);
	RUN(test_messages);
	RUN(test_bells);
	RUN(test_listeners);
	return check_report();
}
