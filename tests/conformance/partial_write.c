/* A nonblocking write of 32 MiB to a peer that is not reading returns a short count (more than
 * 0, less than asked), and the rest can follow once the peer reads: all 32 MiB arrive intact.
 * usmc-expect: accelerated data */
#include "common.h"

#define TOTAL (32u << 20)

static void server(void *arg)
{
    int s = cf_accept(*(int *)arg);
    cf_wait();
    uint64_t n = cf_recv_pattern(s, 1 << 20, 11);
    printf("server received %llu bytes\n", (unsigned long long)n);
    CHECK(n == TOTAL);
    close(s);
}

int main(void)
{
    cf_start();
    int l = cf_listen(AF_INET);
    cf_spawn(server, &l);
    int fd = cf_connect(AF_INET, cf_port(l));
    char *buf = malloc(TOTAL);
    CHECK(buf);
    cf_fill(buf, TOTAL, 0, 11);
    cf_set_nonblock(fd, true);
    ssize_t r = write(fd, buf, TOTAL);
    printf("first write is short: %s\n", r > 0 && r < (ssize_t)TOTAL ? "yes" : "no");
    CHECK(r > 0 && r < (ssize_t)TOTAL);
    cf_post();
    size_t off = (size_t)r;
    while (off < TOTAL) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        CHECK(poll(&p, 1, -1) == 1);
        r = write(fd, buf + off, TOTAL - off);
        if (r < 0 && errno == EAGAIN)
            continue;
        CHECK(r > 0);
        off += (size_t)r;
    }
    close(fd);
    cf_join();
    free(buf);
    return 0;
}
