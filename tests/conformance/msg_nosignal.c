/* send(MSG_NOSIGNAL) to a closed peer fails with EPIPE without raising SIGPIPE, whose default
 * action would kill the process; a plain write afterwards does raise it.
 * usmc-expect: accelerated data */
#include "common.h"

static void server(void *arg)
{
    char buf[8];
    int s = cf_accept(*(int *)arg);
    cf_read_exact(s, buf, 5);
    close(s);
    cf_post();
}

int main(void)
{
    sigset_t block, pending;
    cf_start();
    int l = cf_listen(AF_INET);
    cf_spawn(server, &l);
    int fd = cf_connect(AF_INET, cf_port(l));
    cf_write_all(fd, "hello", 5);
    cf_wait();
    int err = cf_send_until_error(fd, MSG_NOSIGNAL, 3);
    printf("MSG_NOSIGNAL sends end with: %s\n", cf_errname(err));
    CHECK(err == EPIPE);
    EXPECT_ERR("send MSG_NOSIGNAL again", send(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
    printf("still alive\n");
    /* With SIGPIPE blocked, the signal a plain send raises stays pending where we can see it. */
    sigemptyset(&block);
    sigaddset(&block, SIGPIPE);
    CHECK(sigprocmask(SIG_BLOCK, &block, NULL) == 0);
    CHECK(sigpending(&pending) == 0);
    printf("SIGPIPE pending before plain send: %d\n", sigismember(&pending, SIGPIPE));
    EXPECT_ERR("plain send", send(fd, "x", 1, 0), EPIPE);
    CHECK(sigpending(&pending) == 0);
    printf("SIGPIPE pending after plain send: %d\n", sigismember(&pending, SIGPIPE));
    CHECK(sigismember(&pending, SIGPIPE) == 1);
    close(fd);
    cf_join();
    return 0;
}
