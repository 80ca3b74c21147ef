/* SO_LINGER {1, 0} makes close() abort the connection: the peer still reads what had arrived
 * before, then ECONNRESET.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char buf[16];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP};
    EXPECT_RET("poll", poll(&p, 1, 0), 1);
    printf("revents: %s\n", cf_poll_str(p.revents));
    long n = EXPECT_RET("read", read(fd, buf, sizeof buf), 3);
    printf("data: %.*s\n", (int)n, buf);
    EXPECT_ERR("read after the data", read(fd, buf, sizeof buf), ECONNRESET);
    EXPECT_RET("read again", read(fd, buf, sizeof buf), 0);
    close(fd);
}

int main(void)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    cf_start();
    int s = cf_serve(client);
    EXPECT_RET("setsockopt SO_LINGER", setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    EXPECT_RET("write", write(s, "bye", 3), 3);
    EXPECT_RET("close", close(s), 0);
    cf_post();
    cf_join();
    return 0;
}
