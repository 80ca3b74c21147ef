/* A blocking write of 8 MiB that has to wait for the peer (which reads only once the writer
 * sleeps) completes with its full count and every byte arrives.
 * usmc-expect: accelerated data */
#include "common.h"

#define TOTAL (8u << 20)

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    char *buf = malloc(TOTAL);
    CHECK(buf);
    cf_fill(buf, TOTAL, 0, 103);
    cf_post();
    EXPECT_RET("client write", write(fd, buf, TOTAL), TOTAL);
    free(buf);
    close(fd);
}

int main(void)
{
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    cf_wait_sleeping(cf_peer_pid(), cf_peer_pid());
    uint64_t n = cf_recv_pattern(s, 1 << 16, 103);
    printf("server received %llu\n", (unsigned long long)n);
    CHECK(n == TOTAL);
    close(s);
    cf_join();
    return 0;
}
