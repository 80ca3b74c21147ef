/* Connection setup rate: how many short connections (connect, one 1-byte round trip, close) a
 * client completes per second, the case where per-connection setup cost dominates.
 *   connrate server ENDPOINT          answer one byte per connection, then wait for the close
 *   connrate client ENDPOINT SECONDS  prints connections per second */
#include "endpoint.h"
#include "measure.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define USAGE "connrate server ENDPOINT | connrate client ENDPOINT SECONDS"

/* The client closes first, so TIME_WAIT stays on its side, as with HTTP clients. */
static void answer(int fd)
{
    char c;
    if (read_all(fd, &c, 1) == 0 && write_all(fd, &c, 1) == 0)
        while (read(fd, &c, 1) > 0)
            ;
    close(fd);
}

static int one_connection(const char *spec)
{
    char c = 'c';
    int fd = endpoint_connect(spec);
    if (fd < 0)
        return -1;
    int rc = write_all(fd, &c, 1) < 0 || read_all(fd, &c, 1) < 0 ? -1 : 0;
    close(fd);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "server") == 0) {
        endpoint_serve(argv[2], answer);
        return 1;
    }
    if (argc != 4 || strcmp(argv[1], "client") != 0) {
        fprintf(stderr, "usage: %s\n", USAGE);
        return 2;
    }
    double seconds = parse_positive(argv[3], USAGE);
    unsigned long count = 0;
    double start = now_seconds(), elapsed;
    do {
        if (one_connection(argv[2]) < 0) {
            perror("connrate: connection failed");
            return 1;
        }
        count++;
        elapsed = now_seconds() - start;
    } while (elapsed < seconds);
    printf("%.0f\n", (double)count / elapsed);
    return 0;
}
