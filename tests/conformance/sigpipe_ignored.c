/* Writing to a connection the peer closed, with SIGPIPE ignored: writes end in EPIPE, and keep
 * failing with EPIPE; reads still return 0.
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
    char buf[8];
    cf_start();
    cf_ignore_sigpipe();
    int l = cf_listen(AF_INET);
    cf_spawn(server, &l);
    int fd = cf_connect(AF_INET, cf_port(l));
    cf_write_all(fd, "hello", 5);
    cf_wait();
    EXPECT_RET("read after peer close", read(fd, buf, sizeof buf), 0);
    int err = cf_send_until_error(fd, 0, 3);
    printf("writes end with: %s\n", cf_errname(err));
    CHECK(err == EPIPE);
    EXPECT_ERR("write again", write(fd, "x", 1), EPIPE);
    EXPECT_RET("read", read(fd, buf, sizeof buf), 0);
    close(fd);
    cf_join();
    return 0;
}
