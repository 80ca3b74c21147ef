/* shutdown(SHUT_WR): the peer reads the data then EOF (and sees POLLRDHUP) but can still
 * answer; the closed side's writes fail with EPIPE while its reads still work.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char buf[64];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_ignore_sigpipe();
    EXPECT_RET("write request", write(fd, "request", 7), 7);
    EXPECT_RET("shutdown SHUT_WR", shutdown(fd, SHUT_WR), 0);
    EXPECT_ERR("write after SHUT_WR", write(fd, "x", 1), EPIPE);
    size_t n = cf_read_full(fd, buf, sizeof buf);
    printf("client read %zu bytes: %.*s\n", n, (int)n, buf);
    CHECK(n == 8 && memcmp(buf, "response", 8) == 0);
    close(fd);
}

int main(void)
{
    char buf[64];
    cf_start();
    int s = cf_serve(client);
    size_t n = cf_read_full(s, buf, sizeof buf);
    printf("server read %zu bytes: %.*s\n", n, (int)n, buf);
    CHECK(n == 7);
    EXPECT_RET("read again", read(s, buf, sizeof buf), 0);
    struct pollfd p = {.fd = s, .events = POLLIN | POLLOUT | POLLRDHUP};
    EXPECT_RET("poll", poll(&p, 1, 0), 1);
    printf("revents: %s\n", cf_poll_str(p.revents));
    EXPECT_RET("write response", write(s, "response", 8), 8);
    close(s);
    cf_join();
    return 0;
}
