/* With SA_RESTART, a signal arriving during a blocked read runs its handler and the read keeps
 * waiting, then returns the data sent afterwards.
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
    /* The read must be blocked again before the data comes, or it proves nothing. */
    cf_wait_sleeping(getppid(), getppid());
    cf_write_all(fd, "after", 5);
    close(fd);
}

int main(void)
{
    char buf[16];
    cf_start();
    cf_on_signal(SIGUSR1, on_usr1, SA_RESTART);
    int s = cf_serve(client);
    EXPECT_RET("blocked read", read(s, buf, sizeof buf), 5);
    CHECK(memcmp(buf, "after", 5) == 0);
    printf("handler ran %d time(s)\n", (int)handled);
    CHECK(handled == 1);
    EXPECT_RET("read at EOF", read(s, buf, sizeof buf), 0);
    close(s);
    cf_join();
    return 0;
}
