/* 10 000 request/response round trips of 1 to 200 bytes, each answer checked.
 * usmc-expect: accelerated data */
#include "common.h"

#define ROUNDS 10000

static size_t size_of(int i)
{
    return (size_t)(i * 37 % 200) + 1;
}

static void client(void *arg)
{
    char out[200], in[200];
    uint64_t off = 0;
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    for (int i = 0; i < ROUNDS; i++) {
        size_t n = size_of(i);
        cf_fill(out, n, off, 79);
        cf_write_all(fd, out, n);
        cf_read_exact(fd, in, n);
        for (size_t k = 0; k < n; k++)
            if (in[k] != (char)~out[k])
                FAIL("round %d: wrong answer", i);
        off += n;
    }
    printf("client: %d rounds, %llu bytes each way\n", ROUNDS, (unsigned long long)off);
    close(fd);
}

int main(void)
{
    char buf[200];
    cf_start();
    int s = cf_serve(client);
    int one = 1;
    CHECK(setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);
    for (int i = 0; i < ROUNDS; i++) {
        size_t n = size_of(i);
        cf_read_exact(s, buf, n);
        for (size_t k = 0; k < n; k++)
            buf[k] = (char)~buf[k];
        cf_write_all(s, buf, n);
    }
    EXPECT_RET("read at EOF", read(s, buf, sizeof buf), 0);
    close(s);
    cf_join();
    return 0;
}
