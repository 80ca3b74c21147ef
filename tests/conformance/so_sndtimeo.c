/* SO_SNDTIMEO: a blocking write that cannot finish because the peer does not read returns the
 * part it wrote when the timeout passes; once nothing more fits, a write fails with EAGAIN.
 * Every byte written arrives.
 * usmc-expect: accelerated data */
#include "common.h"

#define BIG (64u << 20)

static void server(void *arg)
{
    int s = cf_accept(*(int *)arg);
    cf_wait();
    uint64_t got = cf_recv_pattern(s, 1 << 20, 29);
    uint64_t sent = cf_wait_u64();
    printf("server received what was written: %s\n", got == sent ? "yes" : "no");
    CHECK(got == sent);
    close(s);
}

int main(void)
{
    struct timeval tv = {0, 100000};
    cf_start();
    int l = cf_listen(AF_INET);
    cf_spawn(server, &l);
    int fd = cf_connect(AF_INET, cf_port(l));
    char *buf = malloc(BIG);
    CHECK(buf);
    cf_fill(buf, BIG, 0, 29);
    EXPECT_RET("set SO_SNDTIMEO", setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), 0);
    ssize_t r = write(fd, buf, BIG);
    printf("first write is partial: %s\n", r > 0 && r < (ssize_t)BIG ? "yes" : "no");
    CHECK(r > 0 && r < (ssize_t)BIG);
    size_t off = (size_t)r;
    /* Buffers may still grow a little after the first timeout; they cannot grow forever. */
    for (int i = 0; i < 50 && r > 0; i++) {
        r = write(fd, buf + off, BIG - off);
        if (r > 0)
            off += (size_t)r;
    }
    printf("writes end with: %s\n", r < 0 ? cf_errname(errno) : "no error");
    CHECK(r == -1 && errno == EAGAIN);
    close(fd);
    cf_post();
    cf_post_u64(off);
    free(buf);
    cf_join();
    return 0;
}
