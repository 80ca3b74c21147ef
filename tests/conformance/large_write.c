/* Blocking writes bigger than any buffer (16 MiB + 3, and 5 MiB + 1 the other way) return
 * their full count and every byte arrives in order.
 * usmc-expect: accelerated data */
#include "common.h"

#define UP ((16u << 20) + 3)
#define DOWN ((5u << 20) + 1)

static void server(void *arg)
{
    int s = cf_accept(*(int *)arg);
    uint64_t n = cf_recv_pattern(s, 1 << 20, 21);
    printf("server received %llu\n", (unsigned long long)n);
    CHECK(n == UP);
    char *buf = malloc(DOWN);
    CHECK(buf);
    cf_fill(buf, DOWN, 0, 22);
    EXPECT_RET("server send", send(s, buf, DOWN, 0), DOWN);
    free(buf);
    close(s);
}

int main(void)
{
    cf_start();
    int l = cf_listen(AF_INET);
    cf_spawn(server, &l);
    int fd = cf_connect(AF_INET, cf_port(l));
    char *buf = malloc(UP);
    CHECK(buf);
    cf_fill(buf, UP, 0, 21);
    EXPECT_RET("client write", write(fd, buf, UP), UP);
    EXPECT_RET("shutdown", shutdown(fd, SHUT_WR), 0);
    uint64_t n = cf_recv_pattern(fd, 1 << 16, 22);
    printf("client received %llu\n", (unsigned long long)n);
    CHECK(n == DOWN);
    free(buf);
    close(fd);
    cf_join();
    return 0;
}
