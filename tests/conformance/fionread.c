/* FIONREAD (SIOCINQ) counts the unread bytes: 0, everything that arrived, less after a
 * partial read, unchanged by a peek and by the peer's FIN.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    cf_send_pattern(fd, 5000, 5000, 23);
    cf_post();
    cf_wait();
    close(fd);
    cf_post();
}

static void show_queued(int fd, const char *when)
{
    int n = -1;
    if (ioctl(fd, FIONREAD, &n) < 0)
        FAIL("FIONREAD: %s", cf_errname(errno));
    printf("queued %s: %d\n", when, n);
}

int main(void)
{
    char buf[5000];
    cf_start();
    int s = cf_serve(client);
    show_queued(s, "initially");
    cf_post();
    cf_wait();
    show_queued(s, "after 5000 sent");
    EXPECT_RET("read 1000", read(s, buf, 1000), 1000);
    show_queued(s, "after reading 1000");
    EXPECT_RET("peek 10", recv(s, buf, 10, MSG_PEEK), 10);
    show_queued(s, "after a peek");
    cf_post();
    cf_wait();
    show_queued(s, "after the peer closed");
    EXPECT_RET("read rest", cf_read_full(s, buf, sizeof buf), 4000);
    CHECK(cf_verify(buf, 4000, 1000, 23));
    show_queued(s, "at EOF");
    close(s);
    cf_join();
    return 0;
}
