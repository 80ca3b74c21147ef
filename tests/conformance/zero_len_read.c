/* Zero-length read and recv consume nothing and return 0: at once when data is queued or the
 * socket is nonblocking, but a blocking one with nothing queued waits for data to arrive.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    cf_wait_sleeping(getppid(), getppid());
    cf_write_all(fd, "data", 4);
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[16];
    int avail = -1;
    cf_start();
    int s = cf_serve(client);
    cf_set_nonblock(s, true);
    EXPECT_RET("nonblocking read 0, nothing queued", read(s, buf, 0), 0);
    cf_set_nonblock(s, false);
    cf_post();
    EXPECT_RET("blocking recv 0, nothing queued", recv(s, buf, 0, 0), 0);
    EXPECT_RET("FIONREAD", ioctl(s, FIONREAD, &avail), 0);
    printf("queued when it returned: %d\n", avail);
    CHECK(avail == 4);
    cf_wait();
    EXPECT_RET("read 0, data queued", read(s, buf, 0), 0);
    EXPECT_RET("recv 0 MSG_PEEK, data queued", recv(s, buf, 0, MSG_PEEK), 0);
    EXPECT_RET("FIONREAD", ioctl(s, FIONREAD, &avail), 0);
    printf("queued: %d\n", avail);
    CHECK(avail == 4);
    EXPECT_RET("read", read(s, buf, sizeof buf), 4);
    CHECK(memcmp(buf, "data", 4) == 0);
    cf_post();
    EXPECT_RET("read at EOF", read(s, buf, sizeof buf), 0);
    EXPECT_RET("read 0 at EOF", read(s, buf, 0), 0);
    close(s);
    cf_join();
    return 0;
}
