/* Nonblocking connect: EINPROGRESS, POLLOUT when established, SO_ERROR 0, then data flows.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int err = -1;
    socklen_t elen = sizeof err;
    char buf[8];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(fd >= 0);
    cf_loopback(AF_INET, *(uint16_t *)arg, &ss, &len);
    int r = connect(fd, (struct sockaddr *)&ss, len);
    printf("connect: %s\n", r == 0 ? "done" : cf_errname(errno));
    CHECK(r == 0 || errno == EINPROGRESS);
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    EXPECT_RET("poll", poll(&p, 1, -1), 1);
    printf("revents: %s\n", cf_poll_str(p.revents));
    EXPECT_RET("getsockopt SO_ERROR", getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen), 0);
    printf("SO_ERROR: %d\n", err);
    CHECK(err == 0);
    SHOW("connect after completion", connect(fd, (struct sockaddr *)&ss, len));
    EXPECT_ERR("connect when connected", connect(fd, (struct sockaddr *)&ss, len), EISCONN);
    EXPECT_RET("write", write(fd, "ping", 4), 4);
    cf_set_nonblock(fd, false);
    cf_read_exact(fd, buf, 4);
    CHECK(memcmp(buf, "pong", 4) == 0);
    printf("client got pong\n");
    close(fd);
}

int main(void)
{
    char buf[4];
    cf_start();
    int s = cf_serve(client);
    cf_read_exact(s, buf, 4);
    CHECK(memcmp(buf, "ping", 4) == 0);
    cf_write_all(s, "pong", 4);
    close(s);
    cf_join();
    return 0;
}
