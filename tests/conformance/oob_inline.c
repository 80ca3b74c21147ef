/* With SO_OOBINLINE the urgent byte stays in the stream at its place: recv(MSG_OOB) is
 * EINVAL, FIONREAD counts every byte, a read still stops at the mark and then reads through
 * it, and POLLPRI lasts until the byte is read.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    cf_write_all(fd, "ab", 2);
    EXPECT_RET("urgent send", send(fd, "c", 1, MSG_OOB), 1);
    cf_write_all(fd, "de", 2);
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[16];
    int on = 1;
    cf_start();
    int s = cf_serve(client);
    CHECK(setsockopt(s, SOL_SOCKET, SO_OOBINLINE, &on, sizeof on) == 0);
    cf_post();
    cf_wait();
    cf_show_urgent(s, "arrived");
    cf_recv_oob(s, "urgent read", 0);
    long n = EXPECT_RET("read", read(s, buf, sizeof buf), 2);
    printf("read '%.*s'\n", (int)n, buf);
    cf_show_urgent(s, "at the mark");
    n = EXPECT_RET("read through", read(s, buf, sizeof buf), 3);
    printf("read '%.*s'\n", (int)n, buf);
    cf_show_urgent(s, "past it");
    cf_post();
    close(s);
    cf_join();
    return 0;
}
