/* Idle connections: does holding many open, idle connections slow an active one? The client
 * opens N connections (each does one 1-byte round trip, so it is fully set up), keeps them
 * idle, then measures the ping-pong latency of one more connection.
 *   idle server ENDPOINT              one epoll loop echoing every connection
 *   idle client ENDPOINT N SECONDS    prints the active connection's one-way latency in
 *                                     microseconds; on stderr, the memory per idle connection
 * The latency is the median over batches of round trips, each batch's mean: a difference of 5 %
 * is some 20 ns on shared memory, which one preempted batch in a run's mean would hide. */
#include "endpoint.h"
#include "measure.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define USAGE "idle server ENDPOINT | idle client ENDPOINT N SECONDS"
#define MSG 14
#define BATCH 100

/* Descriptors for n connections, with room for usmc's own (a doorbell each): above the
 * hard limit too where we may (root), else up to it. */
static void raise_nofile(unsigned long n)
{
    struct rlimit rl, want = {n * 2 + 256, n * 2 + 256};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want.rlim_cur) {
        if (want.rlim_max < rl.rlim_max)
            want.rlim_max = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &want) < 0) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
}

static void serve(const char *spec)
{
    int l = endpoint_listen(spec), ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = l}, out[64];

    raise_nofile(20000);
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) < 0) {
        perror("idle: epoll");
        exit(1);
    }
    for (;;) {
        int n = epoll_wait(ep, out, 64, -1);
        for (int i = 0; i < n; i++) {
            int fd = out[i].data.fd;
            if (fd == l) {
                int c = accept(l, NULL, NULL);
                struct epoll_event e = {.events = EPOLLIN, .data.fd = c};
                if (c >= 0)
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
                continue;
            }
            char buf[4096];
            ssize_t k = read(fd, buf, sizeof(buf));
            if (k <= 0 || write_all(fd, buf, (size_t)k) < 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
            }
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Resident and shared memory of this process, in KiB, from /proc/self/status. */
static void memory_kib(long *rss, long *shm)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "re");
    *rss = *shm = 0;
    while (f && fgets(line, sizeof(line), f)) {
        sscanf(line, "VmRSS: %ld", rss);
        sscanf(line, "RssShmem: %ld", shm);
    }
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "server") == 0) {
        serve(argv[2]);
        return 1;
    }
    if (argc != 5 || strcmp(argv[1], "client") != 0) {
        fprintf(stderr, "usage: %s\n", USAGE);
        return 2;
    }
    long n = strtol(argv[3], NULL, 10);
    double seconds = parse_positive(argv[4], USAGE);
    long rss0, shm0, rss1, shm1;
    char buf[MSG] = "idle";
    if (n < 0)
        return fprintf(stderr, "usage: %s\n", USAGE), 2;
    raise_nofile((unsigned long)n);
    memory_kib(&rss0, &shm0);
    for (long i = 0; i < n; i++) {
        int fd = endpoint_connect(argv[2]);
        if (fd < 0 || write_all(fd, buf, 1) < 0 || read_all(fd, buf, 1) < 0) {
            fprintf(stderr, "idle: connection %ld: %s\n", i, fd < 0 ? "connect failed" : "no echo");
            return 1;
        }
    }
    memory_kib(&rss1, &shm1);
    if (n)
        fprintf(stderr, "memory per idle connection: %.1f KiB resident, of which %.1f KiB shared\n",
                (double)(rss1 - rss0) / (double)n, (double)(shm1 - shm0) / (double)n);
    int fd = endpoint_connect(argv[2]);
    if (fd < 0)
        return perror("idle: connect"), 1;
    size_t batches = 0, room = 1024;
    double *lat = malloc(room * sizeof(*lat));
    double start = now_seconds(), t0 = start, t1;
    if (!lat)
        return perror("idle"), 1;
    do {
        for (int i = 0; i < BATCH; i++)
            if (write_all(fd, buf, MSG) < 0 || read_all(fd, buf, MSG) < 0)
                return fprintf(stderr, "idle: active connection broke\n"), 1;
        t1 = now_seconds();
        if (batches == room && !(lat = realloc(lat, (room *= 2) * sizeof(*lat))))
            return perror("idle"), 1;
        lat[batches++] = (t1 - t0) / BATCH / 2 * 1e6;
        t0 = t1;
    } while (t1 - start < seconds);
    qsort(lat, batches, sizeof(*lat), cmp_double);
    printf("%.3f\n", lat[batches / 2]);
    free(lat);
    return 0;
}
