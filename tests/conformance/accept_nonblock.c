/* Nonblocking accept: EAGAIN with no pending connection, POLLIN on the listener once a client
 * connected, and the accepted socket does not inherit O_NONBLOCK.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    cf_wait();
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_post();
    cf_write_all(fd, "abc", 3);
    close(fd);
}

int main(void)
{
    char buf[8];
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    cf_set_nonblock(l, true);
    cf_spawn(client, &port);
    EXPECT_ERR("accept before connect", accept(l, NULL, NULL), EAGAIN);
    struct pollfd p = {.fd = l, .events = POLLIN};
    EXPECT_RET("poll before connect", poll(&p, 1, 0), 0);
    cf_post();
    cf_wait();
    EXPECT_RET("poll after connect", poll(&p, 1, -1), 1);
    printf("listener revents: %s\n", cf_poll_str(p.revents));
    int s = accept(l, NULL, NULL);
    CHECK(s >= 0);
    printf("accepted O_NONBLOCK: %d\n", !!(fcntl(s, F_GETFL) & O_NONBLOCK));
    EXPECT_ERR("second accept", accept(l, NULL, NULL), EAGAIN);
    size_t n = cf_read_full(s, buf, sizeof buf);
    printf("read %zu bytes: %.*s\n", n, (int)n, buf);
    CHECK(n == 3 && memcmp(buf, "abc", 3) == 0);
    close(s);
    cf_join();
    return 0;
}
