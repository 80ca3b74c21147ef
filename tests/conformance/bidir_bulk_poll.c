/* Both ends send 16 MiB to each other at the same time from a single thread, nonblocking,
 * driven by poll: neither direction starves or deadlocks, both streams intact.
 * usmc-expect: accelerated data */
#include "common.h"

#define TOTAL (16u << 20)

static void exchange(int fd, unsigned send_seed, unsigned recv_seed, const char *who)
{
    static char out[1 << 16], in[1 << 16];
    uint64_t sent = 0, got = 0;
    bool eof = false;
    cf_set_nonblock(fd, true);
    while (!eof || sent < TOTAL) {
        struct pollfd p = {.fd = fd, .events = (eof ? 0 : POLLIN) | (sent < TOTAL ? POLLOUT : 0)};
        CHECK(poll(&p, 1, -1) == 1);
        if (p.revents & POLLOUT) {
            size_t n = TOTAL - sent < sizeof out ? (size_t)(TOTAL - sent) : sizeof out;
            cf_fill(out, n, sent, send_seed);
            ssize_t r = write(fd, out, n);
            if (r < 0 && errno != EAGAIN)
                FAIL("write: %s", cf_errname(errno));
            sent += r > 0 ? (uint64_t)r : 0;
            if (sent == TOTAL)
                CHECK(shutdown(fd, SHUT_WR) == 0);
        }
        if (!eof && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t r = read(fd, in, sizeof in);
            if (r < 0 && errno != EAGAIN)
                FAIL("read: %s", cf_errname(errno));
            if (r == 0)
                eof = true;
            if (r > 0) {
                CHECK(cf_verify(in, (size_t)r, got, recv_seed));
                got += (uint64_t)r;
            }
        }
    }
    printf("%s sent %llu received %llu\n", who, (unsigned long long)sent,
           (unsigned long long)got);
    CHECK(sent == TOTAL && got == TOTAL);
}

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    exchange(fd, 83, 89, "client");
    close(fd);
}

int main(void)
{
    cf_start();
    int s = cf_serve(client);
    exchange(s, 89, 83, "server");
    close(s);
    cf_join();
    return 0;
}
