/* A signal whose handler lacks SA_RESTART interrupts a read blocked on an empty socket: -1
 * EINTR, nothing lost, and the next read gets the data.
 * usmc-expect: accelerated data */
#include "common.h"

static volatile sig_atomic_t handled;

static void on_usr1(int sig)
{
    (void)sig;
    handled++;
    cf_post();
}

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_interrupt_parent();
    cf_wait();
    cf_write_all(fd, "after", 5);
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[16];
    cf_start();
    cf_on_signal(SIGUSR1, on_usr1, 0);
    int s = cf_serve(client);
    EXPECT_ERR("blocked read", read(s, buf, sizeof buf), EINTR);
    printf("handler ran %d time(s)\n", (int)handled);
    cf_post();
    EXPECT_RET("read again", read(s, buf, sizeof buf), 5);
    CHECK(memcmp(buf, "after", 5) == 0);
    cf_post();
    EXPECT_RET("read at EOF", read(s, buf, sizeof buf), 0);
    close(s);
    cf_join();
    return 0;
}
