/* A read blocked under SO_RCVTIMEO is never restarted: even with SA_RESTART the signal makes
 * it fail with EINTR (signal(7)).
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
    cf_write_all(fd, "x", 1);
    close(fd);
}

int main(void)
{
    char buf[16];
    struct timeval tv = {20, 0};
    cf_start();
    cf_on_signal(SIGUSR1, on_usr1, SA_RESTART);
    int s = cf_serve(client);
    CHECK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    EXPECT_ERR("blocked read", read(s, buf, sizeof buf), EINTR);
    printf("handler ran %d time(s)\n", (int)handled);
    cf_post();
    EXPECT_RET("read", cf_read_full(s, buf, sizeof buf), 1);
    close(s);
    cf_join();
    return 0;
}
