/* A server-speaks-first protocol: the server writes a greeting on accept, the client reads
 * before it writes anything, then a command and a reply, then the server closes.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char buf[64];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    long n = SHOW("client read greeting", read(fd, buf, sizeof buf));
    CHECK(n == 11 && memcmp(buf, "220 ready\r\n", 11) == 0);
    cf_write_all(fd, "QUIT\r\n", 6);
    n = (long)cf_read_full(fd, buf, sizeof buf);
    printf("client read until EOF: %ld bytes\n", n);
    CHECK(n == 9 && memcmp(buf, "221 bye\r\n", 9) == 0);
    close(fd);
}

int main(void)
{
    char buf[6];
    cf_start();
    int s = cf_serve(client);
    EXPECT_RET("server greets", write(s, "220 ready\r\n", 11), 11);
    cf_read_exact(s, buf, 6);
    CHECK(memcmp(buf, "QUIT\r\n", 6) == 0);
    EXPECT_RET("server replies", write(s, "221 bye\r\n", 9), 9);
    close(s);
    cf_join();
    return 0;
}
