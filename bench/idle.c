/* Idle connections: does holding many open, idle connections slow an active one? The client
 * opens N connections (each does one 1-byte round trip, so it is fully set up), keeps them
 * idle, then measures the ping-pong latency of one more connection.
 *   idle server ENDPOINT              one epoll loop echoing every connection
 *   idle client ENDPOINT N SECONDS    prints the active connection's one-way latency in
 *                                     microseconds; on stderr, the memory per idle connection
 *   idle hold ENDPOINT N SECONDS PID  opens N connections, leaves them idle, and prints the CPU
 *                                     time it and the server (PID) spend meanwhile, together,
 *                                     in percent of one core; then each one's share
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

#define USAGE "idle server ENDPOINT | idle client ENDPOINT N SECONDS | idle hold ENDPOINT N SECONDS PID"
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

/* CPU time (user and system, every thread) process pid has used, in seconds; 0 for this
 * process; -1 when it cannot be read. */
static double cpu_seconds(long pid)
{
    char path[64], line[1024];
    unsigned long long user, sys;
    FILE *f;

    if (pid)
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    else
        snprintf(path, sizeof(path), "/proc/self/stat");
    f = fopen(path, "re");
    if (!f)
        return -1;
    char *got = fgets(line, sizeof(line), f);
    fclose(f);
    /* the fields after the command, which may hold spaces, from the state on */
    char *p = got ? strrchr(line, ')') : NULL;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &user, &sys) != 2)
        return -1;
    return (double)(user + sys) / (double)sysconf(_SC_CLK_TCK);
}

/* n connections, each through one round trip, so that each is fully set up */
static int open_idle(const char *spec, long n)
{
    char buf[1] = "i";
    for (long i = 0; i < n; i++) {
        int fd = endpoint_connect(spec);
        if (fd < 0 || write_all(fd, buf, 1) < 0 || read_all(fd, buf, 1) < 0) {
            fprintf(stderr, "idle: connection %ld: %s\n", i, fd < 0 ? "connect failed" : "no echo");
            return -1;
        }
    }
    return 0;
}

/* What n idle connections cost in CPU while they stay idle: after a second for what setting
 * them up left behind, this process's and the server's CPU time over the given seconds. */
static int hold(const char *spec, long n, double seconds, long server)
{
    raise_nofile((unsigned long)n);
    if (open_idle(spec, n) < 0)
        return 1;
    struct timespec settle = {1, 0};
    nanosleep(&settle, NULL);
    double c0 = cpu_seconds(0), s0 = cpu_seconds(server), t0 = now_seconds();
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) < 0)
        ;
    double c1 = cpu_seconds(0), s1 = cpu_seconds(server), t = now_seconds() - t0;
    if (c0 < 0 || s0 < 0 || c1 < 0 || s1 < 0)
        return fprintf(stderr, "idle: cannot read the CPU time of %ld\n", server), 1;
    printf("%.3f\n", (c1 - c0 + s1 - s0) / t * 100);
    printf("CPU of %ld idle connections: client %.3f %%, server %.3f %% of a core\n", n,
           (c1 - c0) / t * 100, (s1 - s0) / t * 100);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "server") == 0) {
        serve(argv[2]);
        return 1;
    }
    if (argc == 6 && strcmp(argv[1], "hold") == 0) {
        long n = strtol(argv[3], NULL, 10), pid = strtol(argv[5], NULL, 10);
        if (n < 0 || pid <= 0)
            return fprintf(stderr, "usage: %s\n", USAGE), 2;
        return hold(argv[2], n, parse_positive(argv[4], USAGE), pid);
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
    if (open_idle(argv[2], n) < 0)
        return 1;
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
