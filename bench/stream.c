/* Streams through event loops whose consumer works on what it reads (a checksum, a decoder, a
 * pause for garbage collection), as runtimes do: one thread on each side serves every
 * connection through epoll, non-blocking, so the producer is stopped whenever the transport's
 * buffering between the two runs out while the consumer is busy elsewhere.
 *   stream server ENDPOINT           reads each connection into 1 MiB buffers and works on
 *                                    them as its client asks: "hash" checksums each full MiB,
 *                                    "pause" sleeps 100 us after every 64 KiB read
 *   stream client ENDPOINT SECONDS N WORK
 *                                    writes 64 KiB pieces to N connections until each takes
 *                                    no more, then waits for room; prints MBps (2^20 bytes/s)
 *                                    over all */
#include "endpoint.h"
#include "measure.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define USAGE "stream server ENDPOINT | stream client ENDPOINT SECONDS N hash|pause"
#define CHUNK (1u << 20)
#define PIECE (64u << 10)
#define PAUSE_NS 100000L
#define MAX_STREAMS 64

static void nonblocking(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* A checksum over the MiB, about as costly per byte as a fast hash. */
static uint64_t hash(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    return h;
}

struct reader {
    int fd, work; /* 0 until the client's first byte says: 'h' hash, 'p' pause */
    size_t fill;
    unsigned char *buf;
};

static void serve(const char *spec)
{
    int lfd = endpoint_listen(spec), ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}, out[MAX_STREAMS + 1];
    uint64_t sum = 0;

    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
        die("epoll");
    for (;;) {
        int n = epoll_wait(ep, out, MAX_STREAMS + 1, -1);
        for (int i = 0; i < n; i++) {
            struct reader *r = out[i].data.ptr;
            if (!r) {
                int fd = accept(lfd, NULL, NULL);
                if (fd < 0)
                    continue;
                nonblocking(fd);
                r = calloc(1, sizeof(*r));
                if (!r || !(r->buf = malloc(CHUNK)))
                    die("malloc");
                r->fd = fd;
                ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = r};
                epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
                continue;
            }
            if (!r->work) {
                char w;
                if (read(r->fd, &w, 1) == 1)
                    r->work = w;
                continue;
            }
            int pause = r->work == 'p';
            /* One piece per turn, as an event loop shares itself among its channels. */
            ssize_t k = read(r->fd, r->buf + r->fill, PIECE < CHUNK - r->fill ? PIECE : CHUNK - r->fill);
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                close(r->fd);
                free(r->buf);
                free(r);
                continue;
            }
            if (k < 0)
                continue;
            r->fill += (size_t)k;
            if (pause)
                nanosleep(&(struct timespec){0, PAUSE_NS * k / PIECE}, NULL);
            if (r->fill == CHUNK) {
                if (!pause)
                    sum += hash(r->buf, CHUNK);
                r->fill = 0;
            }
        }
        if (sum == 1) /* never: keeps the checksum */
            puts("");
    }
}

static double produce(const char *spec, double seconds, int n, char work)
{
    static char piece[PIECE];
    int ep = epoll_create1(0);
    uint64_t bytes = 0;

    if (ep < 0)
        die("epoll");
    for (int i = 0; i < n; i++) {
        int fd = endpoint_connect(spec);
        if (fd < 0 || write_all(fd, &work, 1) < 0)
            die("connect");
        nonblocking(fd);
        struct epoll_event ev = {.events = EPOLLOUT | EPOLLET, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    double start = now_seconds(), end = start + seconds;
    struct epoll_event out[MAX_STREAMS];
    while (now_seconds() < end) {
        int k = epoll_wait(ep, out, MAX_STREAMS, 100);
        /* As a runtime flushes: until the connection takes no more, then
         * wait until it has room (edge-triggered). */
        for (int i = 0; i < k; i++) {
            ssize_t w;
            while ((w = write(out[i].data.fd, piece, sizeof(piece))) > 0)
                bytes += (uint64_t)w;
            if (w < 0 && errno != EAGAIN)
                die("write");
        }
    }
    return (double)bytes / (now_seconds() - start) / (1 << 20);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "server") == 0) {
        serve(argv[2]);
        return 1;
    }
    if (argc != 6 || strcmp(argv[1], "client") != 0 ||
        (strcmp(argv[5], "hash") != 0 && strcmp(argv[5], "pause") != 0)) {
        fprintf(stderr, "usage: %s\n", USAGE);
        return 2;
    }
    double seconds = parse_positive(argv[3], USAGE);
    int n = (int)parse_positive(argv[4], USAGE);
    if (n > MAX_STREAMS) {
        fprintf(stderr, "usage: %s\n", USAGE);
        return 2;
    }
    printf("%.1f\n", produce(argv[2], seconds, n, argv[5][0]));
    return 0;
}
