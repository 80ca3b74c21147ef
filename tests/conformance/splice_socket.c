/* splice moves bytes from a socket into a pipe and from a pipe into a socket: 1 MiB relayed
 * through a pipe and back, intact.
 * usmc-expect: accelerated data */
#include "common.h"

#define TOTAL (1u << 20)

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_send_pattern(fd, TOTAL, 1 << 16, 101);
    CHECK(shutdown(fd, SHUT_WR) == 0);
    uint64_t n = cf_recv_pattern(fd, 1 << 16, 101);
    printf("client got back %llu\n", (unsigned long long)n);
    CHECK(n == TOTAL);
    close(fd);
}

int main(void)
{
    int p[2];
    uint64_t moved = 0;
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    cf_spawn(client, &port);
    int s = cf_accept(l);
    CHECK(pipe(p) == 0);
    for (;;) {
        ssize_t in = splice(s, NULL, p[1], NULL, 65536, SPLICE_F_MOVE);
        if (in < 0)
            FAIL("splice from socket: %s", cf_errname(errno));
        if (in == 0)
            break;
        for (ssize_t left = in; left > 0;) {
            ssize_t out = splice(p[0], NULL, s, NULL, (size_t)left, SPLICE_F_MOVE);
            if (out <= 0)
                FAIL("splice to socket: %s", out < 0 ? cf_errname(errno) : "0");
            left -= out;
        }
        moved += (uint64_t)in;
    }
    printf("spliced %llu\n", (unsigned long long)moved);
    CHECK(moved == TOTAL);
    close(s);
    cf_join();
    return 0;
}
