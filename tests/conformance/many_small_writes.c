/* 100 000 writes of 7 bytes read back with 1000-byte reads: nothing lost, merged in order.
 * usmc-expect: accelerated data */
#include "common.h"

#define WRITES 100000
#define SIZE 7

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_send_pattern(fd, (uint64_t)WRITES * SIZE, SIZE, 73);
    close(fd);
}

int main(void)
{
    cf_start();
    int s = cf_serve(client);
    uint64_t n = cf_recv_pattern(s, 1000, 73);
    printf("received %llu\n", (unsigned long long)n);
    CHECK(n == (uint64_t)WRITES * SIZE);
    close(s);
    cf_join();
    return 0;
}
