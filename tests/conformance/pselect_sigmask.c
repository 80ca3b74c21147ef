/* pselect and ppoll with a signal mask: SIGUSR1, blocked otherwise, is let through only while
 * they wait on an idle connection and interrupts them (EINTR); data then wakes them normally.
 * usmc-expect: accelerated data */
#include "common.h"

#include <sys/select.h>

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
    cf_interrupt_parent();
    cf_wait();
    cf_write_all(fd, "data", 4);
    close(fd);
}

int main(void)
{
    sigset_t block, empty;
    fd_set rd;
    char buf[8];
    cf_start();
    cf_on_signal(SIGUSR1, on_usr1, SA_RESTART);
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigemptyset(&empty);
    CHECK(sigprocmask(SIG_BLOCK, &block, NULL) == 0);
    int s = cf_serve(client);
    FD_ZERO(&rd);
    FD_SET(s, &rd);
    EXPECT_ERR("pselect", pselect(s + 1, &rd, NULL, NULL, NULL, &empty), EINTR);
    struct pollfd p = {.fd = s, .events = POLLIN};
    EXPECT_ERR("ppoll", ppoll(&p, 1, NULL, &empty), EINTR);
    printf("handler ran %d times\n", (int)handled);
    cf_post();
    FD_SET(s, &rd);
    EXPECT_RET("pselect with data", pselect(s + 1, &rd, NULL, NULL, NULL, &empty), 1);
    EXPECT_RET("ppoll with data", ppoll(&p, 1, NULL, &empty), 1);
    printf("revents %s\n", cf_poll_str(p.revents));
    EXPECT_RET("read", cf_read_full(s, buf, sizeof buf), 4);
    close(s);
    cf_join();
    return 0;
}
