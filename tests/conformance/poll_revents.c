/* poll revents through a connection's life: POLLOUT when idle, POLLIN with data, POLLRDHUP
 * after the peer's FIN, POLLHUP once both directions are shut, POLLNVAL for a closed fd.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    cf_write_all(fd, "x", 1);
    cf_post();
    cf_wait();
    CHECK(shutdown(fd, SHUT_WR) == 0);
    cf_post();
    cf_wait();
    close(fd);
}

static void show(int fd, const char *when)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP | POLLPRI};
    int n = poll(&p, 1, 0);
    CHECK(n >= 0);
    printf("%s: %d %s\n", when, n, cf_poll_str(p.revents));
}

int main(void)
{
    char c;
    cf_start();
    int s = cf_serve(client);
    show(s, "idle");
    cf_post();
    cf_wait();
    show(s, "data");
    cf_post();
    cf_wait();
    show(s, "data and peer FIN");
    EXPECT_RET("read", read(s, &c, 1), 1);
    show(s, "only FIN");
    CHECK(shutdown(s, SHUT_WR) == 0);
    show(s, "both shut");
    cf_post();
    int d = dup(s);
    close(d);
    show(d, "closed fd");
    struct pollfd neg = {.fd = -1, .events = POLLIN};
    EXPECT_RET("poll on fd -1", poll(&neg, 1, 0), 0);
    close(s);
    cf_join();
    return 0;
}
