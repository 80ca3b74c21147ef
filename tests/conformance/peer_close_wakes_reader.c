/* A read blocked on an idle connection returns 0 when the peer closes.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char c;
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_read_exact(fd, &c, 1);
    cf_wait_sleeping(getppid(), getppid());
    close(fd);
}

int main(void)
{
    char buf[8];
    cf_start();
    int s = cf_serve(client);
    cf_write_all(s, "!", 1);
    EXPECT_RET("blocked read", read(s, buf, sizeof buf), 0);
    close(s);
    cf_join();
    return 0;
}
