/* Connecting to a port nobody listens on: a nonblocking connect reports the refusal through
 * poll (POLLERR|POLLHUP) and SO_ERROR ECONNREFUSED, which reading clears; a blocking connect
 * fails with ECONNREFUSED. Plain TCP by nature: nothing to accelerate.
 * usmc-expect: none */
#include "common.h"

int main(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int err = -1;
    socklen_t elen = sizeof err;
    cf_start();
    /* A bound socket that does not listen keeps the port closed and ours. */
    int closed = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(closed >= 0);
    cf_loopback(AF_INET, 0, &ss, &len);
    CHECK(bind(closed, (struct sockaddr *)&ss, len) == 0);
    cf_loopback(AF_INET, cf_port(closed), &ss, &len);

    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(fd >= 0);
    int r = connect(fd, (struct sockaddr *)&ss, len), cerr = errno;
    printf("nonblocking connect: %s\n", r == 0 ? "0" : cf_errname(cerr));
    CHECK(r == -1 && (cerr == EINPROGRESS || cerr == ECONNREFUSED));
    struct pollfd p = {.fd = fd, .events = POLLOUT | POLLIN};
    EXPECT_RET("poll", poll(&p, 1, -1), 1);
    printf("revents: %s\n", cf_poll_str(p.revents));
    if (cerr == EINPROGRESS) {
        EXPECT_RET("SO_ERROR", getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen), 0);
        printf("error: %s\n", cf_errname(err));
        CHECK(err == ECONNREFUSED);
    }
    EXPECT_RET("SO_ERROR again", getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen), 0);
    printf("error: %d\n", err);
    close(fd);

    fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    EXPECT_ERR("blocking connect", connect(fd, (struct sockaddr *)&ss, len), ECONNREFUSED);
    close(fd);
    close(closed);
    return 0;
}
