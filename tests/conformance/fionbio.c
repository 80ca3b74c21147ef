/* ioctl(FIONBIO) switches a socket to nonblocking (EAGAIN, O_NONBLOCK visible through fcntl)
 * and back (a read waits again, until data comes).
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    cf_wait_sleeping(getppid(), getppid());
    cf_write_all(fd, "late", 4);
    close(fd);
}

int main(void)
{
    char buf[8];
    int on = 1, off = 0;
    cf_start();
    int s = cf_serve(client);
    EXPECT_RET("FIONBIO 1", ioctl(s, FIONBIO, &on), 0);
    printf("O_NONBLOCK: %d\n", !!(fcntl(s, F_GETFL) & O_NONBLOCK));
    EXPECT_ERR("read", read(s, buf, sizeof buf), EAGAIN);
    EXPECT_RET("FIONBIO 0", ioctl(s, FIONBIO, &off), 0);
    printf("O_NONBLOCK: %d\n", !!(fcntl(s, F_GETFL) & O_NONBLOCK));
    cf_post();
    EXPECT_RET("blocking read", read(s, buf, sizeof buf), 4);
    close(s);
    cf_join();
    return 0;
}
