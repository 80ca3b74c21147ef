/* After close the descriptor is invalid (EBADF); a new connection that gets the same number
 * carries only its own data, untouched by the old connection's state.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char buf[8];
    for (int i = 0; i < 2; i++) {
        int fd = cf_connect(AF_INET, *(uint16_t *)arg);
        cf_write_all(fd, i ? "second" : "first!", 6);
        cf_wait();
        size_t n = cf_read_full(fd, buf, sizeof buf);
        printf("connection %d got %.*s\n", i, (int)n, buf);
        close(fd);
    }
}

int main(void)
{
    char buf[8];
    cf_start();
    int l = cf_listen_spawn(client);
    int s = cf_accept(l);
    cf_read_exact(s, buf, 6);
    CHECK(memcmp(buf, "first!", 6) == 0);
    cf_write_all(s, "one", 3);
    EXPECT_RET("close", close(s), 0);
    EXPECT_ERR("read closed fd", read(s, buf, sizeof buf), EBADF);
    EXPECT_ERR("write closed fd", write(s, "x", 1), EBADF);
    EXPECT_ERR("close again", close(s), EBADF);
    cf_post();
    int t = cf_accept(l);
    printf("same number: %d\n", t == s);
    CHECK(t == s);
    size_t n = cf_read_full(t, buf, 6);
    printf("new connection read %.*s\n", (int)n, buf);
    CHECK(n == 6 && memcmp(buf, "second", 6) == 0);
    cf_write_all(t, "two", 3);
    cf_post();
    close(t);
    cf_join();
    return 0;
}
