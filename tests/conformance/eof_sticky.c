/* After the peer wrote and closed: the data, then 0 on every read, and poll keeps reporting
 * POLLIN|POLLRDHUP.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_send_pattern(fd, 100000, 4096, 5);
    close(fd);
    cf_post();
}

int main(void)
{
    char buf[16];
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    struct pollfd p = {.fd = s, .events = POLLIN | POLLRDHUP};
    EXPECT_RET("poll with data", poll(&p, 1, 0), 1);
    printf("revents: %s\n", cf_poll_str(p.revents));
    printf("received %llu\n", (unsigned long long)cf_recv_pattern(s, 777, 5));
    for (int i = 0; i < 3; i++)
        EXPECT_RET("read at EOF", read(s, buf, sizeof buf), 0);
    EXPECT_RET("poll at EOF", poll(&p, 1, 0), 1);
    printf("revents: %s\n", cf_poll_str(p.revents));
    close(s);
    cf_join();
    return 0;
}
