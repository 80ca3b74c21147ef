/* dup, then close the original: the duplicate still reads and writes, and the peer sees no
 * EOF until the last descriptor is closed.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char buf[16];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "one", 3);
    cf_wait();
    cf_read_exact(fd, buf, 3);
    CHECK(memcmp(buf, "two", 3) == 0);
    EXPECT_ERR("read before last close", recv(fd, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    cf_write_all(fd, "three", 5);
    cf_post();
    EXPECT_RET("read after last close", read(fd, buf, sizeof buf), 0);
    close(fd);
}

int main(void)
{
    char buf[16];
    cf_start();
    int s = cf_serve(client);
    int d = dup(s);
    CHECK(d >= 0 && d != s);
    EXPECT_RET("close original", close(s), 0);
    EXPECT_ERR("read closed fd", read(s, buf, sizeof buf), EBADF);
    cf_read_exact(d, buf, 3);
    printf("duplicate read %.3s\n", buf);
    CHECK(memcmp(buf, "one", 3) == 0);
    EXPECT_RET("duplicate write", write(d, "two", 3), 3);
    cf_post();
    cf_wait();
    cf_read_exact(d, buf, 5);
    CHECK(memcmp(buf, "three", 5) == 0);
    EXPECT_RET("close duplicate", close(d), 0);
    cf_join();
    return 0;
}
