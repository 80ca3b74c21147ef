/* Message rate: ping-pong round trips per second of small messages over one connection, the
 * figure that IPC benchmarks report.
 *   msgrate server ENDPOINT               echo every byte back, one connection at a time
 *   msgrate client ENDPOINT SECONDS [SIZE] send SIZE bytes (100), read them back, repeat;
 *                                          prints round trips per second */
#include "endpoint.h"
#include "measure.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define USAGE "msgrate server ENDPOINT | msgrate client ENDPOINT SECONDS [SIZE]"
#define MAX_SIZE 65536
/* round trips between clock readings, and before timing starts (handshakes, cold caches) */
#define BATCH 256
#define WARMUP 1000

static void echo(int fd)
{
    char buf[MAX_SIZE];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        if (write_all(fd, buf, (size_t)n) < 0)
            break;
    close(fd);
}

static int round_trip(int fd, char *buf, size_t size)
{
    return write_all(fd, buf, size) < 0 || read_all(fd, buf, size) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "server") == 0) {
        endpoint_serve(argv[2], echo);
        return 1;
    }
    if ((argc != 4 && argc != 5) || strcmp(argv[1], "client") != 0) {
        fprintf(stderr, "usage: %s\n", USAGE);
        return 2;
    }
    double seconds = parse_positive(argv[3], USAGE);
    size_t size = argc == 5 ? (size_t)parse_positive(argv[4], USAGE) : 100;
    if (size > MAX_SIZE) {
        fprintf(stderr, "msgrate: SIZE is at most %d\n", MAX_SIZE);
        return 2;
    }
    int fd = endpoint_connect(argv[2]);
    if (fd < 0) {
        perror("msgrate: connect");
        return 1;
    }
    static char buf[MAX_SIZE];
    memset(buf, 'm', size);
    for (int i = 0; i < WARMUP; i++)
        if (round_trip(fd, buf, size) < 0)
            goto broken;
    unsigned long count = 0;
    double start = now_seconds(), elapsed;
    do {
        for (int i = 0; i < BATCH; i++)
            if (round_trip(fd, buf, size) < 0)
                goto broken;
        count += BATCH;
        elapsed = now_seconds() - start;
    } while (elapsed < seconds);
    close(fd);
    printf("%.0f\n", (double)count / elapsed);
    return 0;
broken:
    perror("msgrate: connection lost");
    return 1;
}
