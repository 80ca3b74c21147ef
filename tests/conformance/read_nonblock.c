/* Nonblocking read: EAGAIN when empty, the bytes once they arrived, EAGAIN again, 0 at EOF.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char buf[100];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    cf_fill(buf, sizeof buf, 0, 1);
    cf_write_all(fd, buf, sizeof buf);
    cf_post();
    cf_wait();
    close(fd);
    cf_post();
}

int main(void)
{
    char buf[4096];
    cf_start();
    int s = cf_serve(client);
    cf_set_nonblock(s, true);
    EXPECT_ERR("read empty", read(s, buf, sizeof buf), EAGAIN);
    EXPECT_ERR("recv empty", recv(s, buf, sizeof buf, 0), EAGAIN);
    cf_post();
    cf_wait();
    struct pollfd p = {.fd = s, .events = POLLIN};
    EXPECT_RET("poll", poll(&p, 1, -1), 1);
    long n = EXPECT_RET("read data", read(s, buf, sizeof buf), 100);
    CHECK(cf_verify(buf, (size_t)n, 0, 1));
    EXPECT_ERR("read drained", read(s, buf, sizeof buf), EAGAIN);
    cf_post();
    cf_wait();
    EXPECT_RET("read at EOF", read(s, buf, sizeof buf), 0);
    close(s);
    cf_join();
    return 0;
}
