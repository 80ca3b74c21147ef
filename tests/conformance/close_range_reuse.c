/* close_range() and closefrom() close accelerated sockets too: the peer sees EOF, and a
 * pipe that gets the closed socket's descriptor number is a plain pipe.
 * usmc-expect: accelerated data */
#include "common.h"

#include <linux/close_range.h>

static void client(void *arg)
{
    char buf[16];
    for (int i = 0; i < 2; i++) {
        int fd = cf_connect(AF_INET, *(uint16_t *)arg);
        cf_write_all(fd, "ping", 4);
        size_t n = cf_read_full(fd, buf, sizeof buf);
        printf("client %d: %zu bytes then EOF\n", i, n);
        CHECK(n == 4 && memcmp(buf, "pong", 4) == 0);
        close(fd);
    }
}

/* Serves one connection, closes it with how (0: close_range, 1: closefrom), then
 * checks that a pipe reusing its number carries its own bytes. */
static void serve(int l, int how)
{
    char buf[8];
    int s = cf_accept(l);
    cf_read_exact(s, buf, 4);
    cf_write_all(s, "pong", 4);
    if (how == 0)
        CHECK(close_range((unsigned)s, (unsigned)s, 0) == 0);
    else
        closefrom(s);
    int p[2];
    CHECK(pipe(p) == 0);
    printf("%s: pipe reuses the number: %s\n", how ? "closefrom" : "close_range",
           p[0] == s || p[1] == s ? "yes" : "no");
    CHECK(write(p[1], "pipe", 4) == 4);
    CHECK(read(p[0], buf, sizeof buf) == 4 && memcmp(buf, "pipe", 4) == 0);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    cf_start();
    int l = cf_listen_spawn(client);
    serve(l, 0);
    serve(l, 1);
    cf_join();
    return 0;
}
