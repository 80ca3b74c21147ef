/* shutdown(SHUT_RD): reads return 0 at once, the socket still sends, and the peer, which is
 * not told, can still write; Linux keeps delivering such data to reads.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char buf[16];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_read_exact(fd, buf, 5);
    printf("client got %.5s\n", buf);
    CHECK(memcmp(buf, "still", 5) == 0);
    EXPECT_RET("client write", write(fd, "late", 4), 4);
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[16];
    cf_start();
    int s = cf_serve(client);
    EXPECT_RET("shutdown SHUT_RD", shutdown(s, SHUT_RD), 0);
    EXPECT_RET("read after SHUT_RD", read(s, buf, sizeof buf), 0);
    struct pollfd p = {.fd = s, .events = POLLIN | POLLOUT | POLLRDHUP};
    EXPECT_RET("poll", poll(&p, 1, 0), 1);
    printf("revents: %s\n", cf_poll_str(p.revents));
    EXPECT_RET("write after SHUT_RD", write(s, "still", 5), 5);
    cf_wait();
    long n = SHOW("read after the peer wrote", read(s, buf, sizeof buf));
    if (n > 0)
        printf("data: %.*s\n", (int)n, buf);
    cf_post();
    close(s);
    cf_join();
    return 0;
}
