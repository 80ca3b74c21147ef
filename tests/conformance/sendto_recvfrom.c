/* sendto and recvfrom on a connected stream: a NULL address works like send, and recvfrom
 * reports no source address (length 0).
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    EXPECT_RET("sendto NULL", sendto(fd, "abcdef", 6, 0, NULL, 0), 6);
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[16];
    struct sockaddr_storage from;
    socklen_t len = sizeof from;
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    memset(&from, 0xff, sizeof from);
    EXPECT_RET("recvfrom with address", recvfrom(s, buf, 3, 0, (struct sockaddr *)&from, &len), 3);
    printf("address length %u\n", (unsigned)len);
    EXPECT_RET("recvfrom NULL", recvfrom(s, buf + 3, sizeof buf - 3, 0, NULL, NULL), 3);
    CHECK(memcmp(buf, "abcdef", 6) == 0);
    cf_post();
    EXPECT_RET("recvfrom at EOF", recvfrom(s, buf, sizeof buf, 0, NULL, NULL), 0);
    close(s);
    cf_join();
    return 0;
}
