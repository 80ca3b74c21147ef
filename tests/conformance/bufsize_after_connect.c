/* SO_SNDBUF and SO_RCVBUF set once the connection exists bound what a writer may have in
 * flight: small buffers on both ends fill long before the default ones would, and everything
 * written still arrives, in order.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int small = 1024;
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    cf_wait();
    uint64_t filled = cf_fill_until_full(fd, 0, 9);
    printf("full before 128 KB: %d\n", filled > 0 && filled < (128 << 10));
    cf_post_u64(filled);
    cf_set_nonblock(fd, false);
    CHECK(shutdown(fd, SHUT_WR) == 0);
    char c;
    EXPECT_RET("read to EOF", read(fd, &c, 1), 0);
    close(fd);
}

int main(void)
{
    int small = 1024;
    cf_start();
    int s = cf_serve(client);
    CHECK(setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0);
    cf_post();
    cf_recv_filled(s, 9);
    return 0;
}
