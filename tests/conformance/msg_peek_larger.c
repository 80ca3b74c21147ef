/* A peek asking for more than is queued returns what is queued without waiting; a blocking
 * peek on an empty socket waits for data and still consumes nothing.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "0123456789", 10);
    cf_post();
    cf_wait();
    cf_wait_sleeping(getppid(), getppid());
    cf_write_all(fd, "abc", 3);
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[4096];
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    EXPECT_RET("peek 4096", recv(s, buf, sizeof buf, MSG_PEEK), 10);
    CHECK(memcmp(buf, "0123456789", 10) == 0);
    EXPECT_RET("read 4096", read(s, buf, sizeof buf), 10);
    cf_post();
    EXPECT_RET("blocking peek on empty socket", recv(s, buf, sizeof buf, MSG_PEEK), 3);
    EXPECT_RET("read", read(s, buf, sizeof buf), 3);
    CHECK(memcmp(buf, "abc", 3) == 0);
    cf_post();
    EXPECT_RET("read at EOF", read(s, buf, sizeof buf), 0);
    close(s);
    cf_join();
    return 0;
}
