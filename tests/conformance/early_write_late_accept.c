/* The client writes 1 MiB right after connect() while the server accepts only 2 seconds
 * later: every byte arrives, in order, and the reply reaches the client.
 * usmc-expect: accelerated data */
#include "common.h"

#define TOTAL (1u << 20)

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_send_pattern(fd, TOTAL, 1 << 16, 47);
    cf_expect_ok(fd);
}

int main(void)
{
    cf_start();
    int s = cf_serve_late(client, 2000);
    uint64_t n = cf_recv_pattern(s, 1 << 16, 47);
    printf("server received %llu\n", (unsigned long long)n);
    CHECK(n == TOTAL);
    cf_write_all(s, "ok", 2);
    close(s);
    cf_join();
    return 0;
}
