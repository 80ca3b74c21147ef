/* Closing a socket with unread received data resets the connection: the peer's next read
 * fails with ECONNRESET, later reads return 0 and writes fail with EPIPE. The bytes are never
 * read, so only the connection can be shown accelerated.
 * usmc-expect: accelerated */
#include "common.h"

static void client(void *arg)
{
    char buf[16];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_ignore_sigpipe();
    EXPECT_RET("client write", write(fd, "unread", 6), 6);
    cf_post();
    cf_wait();
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP};
    EXPECT_RET("poll", poll(&p, 1, 0), 1);
    printf("revents: %s\n", cf_poll_str(p.revents));
    EXPECT_ERR("read after reset", read(fd, buf, sizeof buf), ECONNRESET);
    EXPECT_RET("read again", read(fd, buf, sizeof buf), 0);
    EXPECT_ERR("write after reset", write(fd, "x", 1), EPIPE);
    close(fd);
}

int main(void)
{
    int avail = -1;
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    EXPECT_RET("FIONREAD", ioctl(s, FIONREAD, &avail), 0);
    printf("unread bytes at close: %d\n", avail);
    CHECK(avail == 6);
    close(s);
    cf_post();
    cf_join();
    return 0;
}
