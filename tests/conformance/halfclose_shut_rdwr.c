/* shutdown(SHUT_RDWR): the peer reads EOF; locally reads return 0 and writes EPIPE. Data the
 * peer sends afterwards is refused with a reset: the peer sees POLLERR and its writes fail.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char buf[16];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_ignore_sigpipe();
    EXPECT_RET("write before shutdown", write(fd, "early", 5), 5);
    EXPECT_RET("shutdown SHUT_RDWR", shutdown(fd, SHUT_RDWR), 0);
    EXPECT_RET("read after shutdown", read(fd, buf, sizeof buf), 0);
    EXPECT_ERR("write after shutdown", write(fd, "x", 1), EPIPE);
    cf_post();
    cf_wait();
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[16];
    cf_start();
    cf_ignore_sigpipe();
    int s = cf_serve(client);
    cf_wait();
    EXPECT_RET("server read", read(s, buf, sizeof buf), 5);
    CHECK(memcmp(buf, "early", 5) == 0);
    EXPECT_RET("server read EOF", read(s, buf, sizeof buf), 0);
    EXPECT_RET("server write", write(s, "refused", 7), 7);
    cf_post();
    cf_wait();
    struct pollfd p = {.fd = s, .events = POLLIN | POLLOUT | POLLRDHUP};
    EXPECT_RET("poll after the reset", poll(&p, 1, 0), 1);
    printf("revents: %s\n", cf_poll_str(p.revents));
    CHECK(p.revents & POLLERR);
    EXPECT_RET("server read after the reset", read(s, buf, sizeof buf), 0);
    EXPECT_ERR("server write after the reset", write(s, "x", 1), EPIPE);
    EXPECT_ERR("server write again", write(s, "x", 1), EPIPE);
    cf_post();
    close(s);
    cf_join();
    return 0;
}
