/* The bare limit: what two processes on this machine reach when they share a memfd ring and do
 * nothing else: single producer, single consumer, 64-bit monotonic cursors on separate cache
 * lines, one memcpy per side, spinning instead of sleeping. No socket, no library, no
 * validation: the ceiling that every transport in the benchmark is compared with. The producer
 * copies in as usmc's rings do (src/core/streamcopy.h), the consumer copies out with memcpy.
 *   bare_ring latency SIZE SECONDS     ping-pong; prints the average one-way latency in usec
 *                                      (half the round trip, as sockperf reports it)
 *   bare_ring throughput SIZE SECONDS  one-way stream; prints MBps (2^20 bytes/s, as sockperf)
 * With a fourth argument `sleep`, a side that must wait sleeps on a futex instead of spinning,
 * woken by the other after it publishes: the least any transport that sleeps pays per message
 * (one wake-up, one sleep), to compare usmc's sleeping mode and TCP with.
 * The consumer (the "server") runs on the first CPU the process may use, the producer on the
 * second: run it under `taskset -c 0,1`. */
#include "measure.h"
#include "../src/core/streamcopy.h"

#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define USAGE "bare_ring latency|throughput SIZE SECONDS [sleep]"
/* the same ring size as usmc's default, so the ceiling is for the same cache footprint */
#define RING_SIZE (256 * 1024)
#define WARMUP 1000

/* A sleeper's flag and the futex word it sleeps on, which its waker bumps before waking it, so
 * that a wake-up landing before the sleep is not lost. */
struct bell {
    alignas(64) _Atomic uint32_t asleep;
    _Atomic uint32_t kick;
};

struct ring {
    alignas(64) _Atomic uint64_t head; /* bytes ever produced: written by the producer only */
    alignas(64) _Atomic uint64_t tail; /* bytes ever consumed: written by the consumer only */
    struct bell filled, drained;       /* the consumer sleeps for data, the producer for room */
    alignas(64) unsigned char data[RING_SIZE];
};

struct shared {
    struct ring ring[2]; /* [0] producer to consumer, [1] back, for ping-pong */
    alignas(64) _Atomic int stop;
};

/* One side's view of a ring: its own cursor, and the last value it saw of the peer's, re-read
 * only when that is not enough, so that the peer's cache line moves only when it must. */
struct end {
    struct ring *ring;
    uint64_t mine, peer;
};

static atomic_int *stop_flag;
static int same_cpu, sleeping;

static void futex(_Atomic uint32_t *word, int op, uint32_t val)
{
    syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

/* Sleeps until `cursor` leaves `seen` (or the run stops), Dekker-style: raise the flag, look
 * again, sleep. */
static void doze(struct bell *b, _Atomic uint64_t *cursor, uint64_t seen)
{
    uint32_t k = atomic_load(&b->kick);
    atomic_store(&b->asleep, 1);
    if (atomic_load(cursor) == seen && !atomic_load(stop_flag))
        futex(&b->kick, FUTEX_WAIT, k);
    atomic_store(&b->asleep, 0);
}

/* After publishing: wakes the other side if it said it sleeps. */
static void ring_bell(struct bell *b)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&b->asleep, memory_order_relaxed)) {
        atomic_fetch_add(&b->kick, 1);
        futex(&b->kick, FUTEX_WAKE, 1);
    }
}

static inline void relax(void)
{
    /* spinning against a peer on our own CPU only delays it */
    if (same_cpu)
        sched_yield();
#if defined(__x86_64__) || defined(__i386__)
    else
        __builtin_ia32_pause();
#endif
}

/* 0 once the ring has `len` bytes of room, -1 if told to stop while waiting */
static int produce(struct end *e, const void *buf, size_t len)
{
    while (RING_SIZE - (e->mine - e->peer) < len) {
        e->peer = atomic_load_explicit(&e->ring->tail, memory_order_acquire);
        if (RING_SIZE - (e->mine - e->peer) >= len)
            break;
        if (atomic_load_explicit(stop_flag, memory_order_relaxed))
            return -1;
        if (sleeping)
            doze(&e->ring->drained, &e->ring->tail, e->peer);
        else
            relax();
    }
    size_t at = e->mine % RING_SIZE, first = len < RING_SIZE - at ? len : RING_SIZE - at;
    stream_copy(e->ring->data + at, buf, first);
    stream_copy(e->ring->data, (const char *)buf + first, len - first);
    e->mine += len;
    atomic_store_explicit(&e->ring->head, e->mine, memory_order_release);
    if (sleeping)
        ring_bell(&e->ring->filled);
    return 0;
}

static int consume(struct end *e, void *buf, size_t len)
{
    while (e->peer - e->mine < len) {
        e->peer = atomic_load_explicit(&e->ring->head, memory_order_acquire);
        if (e->peer - e->mine >= len)
            break;
        if (atomic_load_explicit(stop_flag, memory_order_relaxed))
            return -1;
        if (sleeping)
            doze(&e->ring->filled, &e->ring->head, e->peer);
        else
            relax();
    }
    size_t at = e->mine % RING_SIZE, first = len < RING_SIZE - at ? len : RING_SIZE - at;
    memcpy(buf, e->ring->data + at, first);
    memcpy((char *)buf + first, e->ring->data, len - first);
    e->mine += len;
    atomic_store_explicit(&e->ring->tail, e->mine, memory_order_release);
    if (sleeping)
        ring_bell(&e->ring->drained);
    return 0;
}

/* Pins the calling process to the index-th CPU it may run on (the last one if fewer). */
static void pin(int index)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
        return;
    same_cpu = CPU_COUNT(&allowed) < 2;
    int cpu = -1;
    for (int c = 0, seen = 0; c < CPU_SETSIZE && seen <= index; c++)
        if (CPU_ISSET(c, &allowed)) {
            cpu = c;
            seen++;
        }
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof(one), &one);
}

static void server(struct shared *sh, int latency, size_t size, void *buf)
{
    struct end in = { &sh->ring[0], 0, 0 }, out = { &sh->ring[1], 0, 0 };
    pin(0);
    while (consume(&in, buf, size) == 0)
        if (latency && produce(&out, buf, size) < 0)
            break;
}

/* Returns messages (round trips for latency) completed in the timed part and its duration. */
static unsigned long client(struct shared *sh, int latency, size_t size, void *buf,
                            double seconds, double *elapsed)
{
    struct end out = { &sh->ring[0], 0, 0 }, in = { &sh->ring[1], 0, 0 };
    unsigned long count = 0;
    double start = 0;
    pin(1);
    memset(buf, 'b', size);
    for (unsigned long i = 0;; i++) {
        if (i == WARMUP)
            start = now_seconds();
        if (produce(&out, buf, size) < 0 || (latency && consume(&in, buf, size) < 0))
            abort(); /* only the client sets stop */
        if (i >= WARMUP && ++count % 64 == 0 && (*elapsed = now_seconds() - start) >= seconds)
            break;
    }
    return count;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5 || (strcmp(argv[1], "latency") != 0 && strcmp(argv[1], "throughput") != 0) ||
        (argc == 5 && strcmp(argv[4], "sleep") != 0)) {
        fprintf(stderr, "usage: %s\n", USAGE);
        return 2;
    }
    int latency = strcmp(argv[1], "latency") == 0;
    sleeping = argc == 5;
    size_t size = (size_t)parse_positive(argv[2], USAGE);
    double seconds = parse_positive(argv[3], USAGE);
    if (size > RING_SIZE) {
        fprintf(stderr, "usage: %s (0 < SIZE <= %d)\n", USAGE, RING_SIZE);
        return 2;
    }
    int fd = memfd_create("bare_ring", 0);
    if (fd < 0 || ftruncate(fd, sizeof(struct shared)) < 0) {
        perror("bare_ring: memfd");
        return 1;
    }
    struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    void *buf = malloc(size);
    if (sh == MAP_FAILED || !buf) {
        perror("bare_ring: memory");
        return 1;
    }
    stop_flag = &sh->stop;
    pid_t pid = fork();
    if (pid < 0) {
        perror("bare_ring: fork");
        return 1;
    }
    if (pid == 0) {
        server(sh, latency, size, buf);
        _exit(0);
    }
    double elapsed = 0;
    unsigned long count = client(sh, latency, size, buf, seconds, &elapsed);
    atomic_store(&sh->stop, 1);
    for (int i = 0; i < 2; i++) {
        ring_bell(&sh->ring[i].filled);
        ring_bell(&sh->ring[i].drained);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bare_ring: the consumer failed\n");
        return 1;
    }
    if (latency)
        printf("%.3f\n", elapsed / (double)count / 2 * 1e6);
    else
        printf("%.3f\n", (double)count * (double)size / elapsed / (1 << 20));
    return 0;
}
