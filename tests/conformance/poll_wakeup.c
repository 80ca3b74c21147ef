/* A poll blocked with no timeout on an idle connection wakes when data arrives, with POLLIN.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    cf_wait_sleeping(getppid(), getppid());
    cf_write_all(fd, "wake", 4);
    close(fd);
}

int main(void)
{
    char buf[8];
    cf_start();
    int s = cf_serve(client);
    struct pollfd p = {.fd = s, .events = POLLIN};
    cf_post();
    EXPECT_RET("blocked poll", poll(&p, 1, -1), 1);
    printf("revents: %s\n", cf_poll_str(p.revents));
    EXPECT_RET("read", cf_read_full(s, buf, sizeof buf), 4);
    close(s);
    cf_join();
    return 0;
}
