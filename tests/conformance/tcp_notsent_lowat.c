/* TCP_NOTSENT_LOWAT: a writer whose reader does not read stops once that much is unsent
 * (beyond what the reader's buffer took), polls writable only when less than half of it is
 * unsent, and is writable again once the reader drains.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int lowat = 16384, got = 0;
    socklen_t len = sizeof got;
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    CHECK(setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat) == 0);
    CHECK(getsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &got, &len) == 0);
    printf("TCP_NOTSENT_LOWAT %d\n", got);
    uint64_t filled = cf_fill_until_full(fd, 0, 6);
    printf("stopped before 200 KB: %d\n", filled > 0 && filled < (200 << 10));
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    printf("writable when full: %d\n", poll(&p, 1, 0));
    cf_post_u64(filled);
    printf("writable once drained: %d\n", poll(&p, 1, 10000));
    cf_set_nonblock(fd, false);
    CHECK(shutdown(fd, SHUT_WR) == 0);
    EXPECT_RET("read to EOF", read(fd, &(char){0}, 1), 0);
    close(fd);
}

int main(void)
{
    cf_start();
    int s = cf_serve(client);
    cf_recv_filled(s, 6);
    return 0;
}
