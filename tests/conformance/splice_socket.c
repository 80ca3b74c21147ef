/* splice moves bytes from a socket into a pipe (1 MiB received that way, read from the pipe
 * and verified) and from a pipe into a socket (1 MiB sent that way).
 * usmc-expect: accelerated data */
#include "common.h"

#define TOTAL (1u << 20)
#define STEP 65536

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_send_pattern(fd, TOTAL, STEP, 101);
    CHECK(shutdown(fd, SHUT_WR) == 0);
    uint64_t n = cf_recv_pattern(fd, STEP, 102);
    printf("client received %llu\n", (unsigned long long)n);
    CHECK(n == TOTAL);
    close(fd);
}

int main(void)
{
    static char buf[STEP];
    int p[2];
    uint64_t moved = 0;
    cf_start();
    int s = cf_serve(client);
    CHECK(pipe(p) == 0);
    for (;;) {
        ssize_t in = splice(s, NULL, p[1], NULL, STEP, SPLICE_F_MOVE);
        if (in < 0)
            FAIL("splice from socket: %s", cf_errname(errno));
        if (in == 0)
            break;
        cf_read_exact(p[0], buf, (size_t)in);
        CHECK(cf_verify(buf, (size_t)in, moved, 101));
        moved += (uint64_t)in;
    }
    printf("spliced from the socket %llu\n", (unsigned long long)moved);
    CHECK(moved == TOTAL);
    for (moved = 0; moved < TOTAL; moved += STEP) {
        cf_fill(buf, STEP, moved, 102);
        cf_write_all(p[1], buf, STEP);
        for (ssize_t left = STEP; left > 0;) {
            ssize_t out = splice(p[0], NULL, s, NULL, (size_t)left, SPLICE_F_MOVE);
            if (out <= 0)
                FAIL("splice to socket: %s", out < 0 ? cf_errname(errno) : "0");
            left -= out;
        }
    }
    printf("spliced into the socket %llu\n", (unsigned long long)moved);
    close(s);
    cf_join();
    return 0;
}
