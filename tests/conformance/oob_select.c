/* select()'s exception set reports pending urgent data, and wakes a select() that waits in it
 * when urgent data arrives; it stays empty for normal data, and once the byte is read.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "n", 1);
    cf_post();
    cf_wait();
    usleep(50000);
    EXPECT_RET("urgent send", send(fd, "u", 1, MSG_OOB), 1);
    cf_wait();
    close(fd);
}

static void show(int s, const char *when, struct timeval *tv)
{
    fd_set r, x;
    FD_ZERO(&r);
    FD_ZERO(&x);
    FD_SET(s, &r);
    FD_SET(s, &x);
    int n = select(s + 1, &r, NULL, &x, tv);
    printf("%s: %d, readable %d, exception %d\n", when, n, FD_ISSET(s, &r) != 0,
           FD_ISSET(s, &x) != 0);
}

static void wait_exception(int s)
{
    fd_set x;
    struct timeval tv = {10, 0};
    FD_ZERO(&x);
    FD_SET(s, &x);
    int n = select(s + 1, NULL, NULL, &x, &tv);
    printf("waiting for urgent data: %d, exception %d\n", n, FD_ISSET(s, &x) != 0);
}

int main(void)
{
    char c;
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    show(s, "normal data", &(struct timeval){0, 0});
    EXPECT_RET("read", read(s, &c, 1), 1);
    cf_post();
    wait_exception(s);
    show(s, "urgent data", &(struct timeval){0, 0});
    cf_recv_oob(s, "urgent read", 0);
    show(s, "after it", &(struct timeval){0, 0});
    cf_post();
    close(s);
    cf_join();
    return 0;
}
