/* The peer is killed with bytes of ours unread: its kernel resets the connection, and the
 * read that follows gets ECONNRESET, not an end of file, and the socket is then done for.
 * usmc-expect: accelerated */
#include "common.h"

int main(void)
{
    char buf[8];
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    int go[2];
    CHECK(pipe(go) == 0);
    pid_t peer = cf_fork();
    if (peer == 0) {
        cf_connect(AF_INET, port);
        CHECK(read(go[0], buf, 1) == 1);
        raise(SIGKILL);
    }
    int s = cf_accept(l);
    cf_write_all(s, "unread", 6);
    CHECK(write(go[1], "k", 1) == 1);
    printf("peer exit status: %d\n", cf_wait_child(peer));
    struct pollfd p = {s, POLLIN | POLLRDHUP, 0};
    EXPECT_RET("poll", poll(&p, 1, 5000), 1);
    printf("revents: %s\n", cf_poll_str(p.revents));
    EXPECT_ERR("read", read(s, buf, sizeof buf), ECONNRESET);
    EXPECT_RET("read again", read(s, buf, sizeof buf), 0);
    EXPECT_ERR("send", send(s, "x", 1, MSG_NOSIGNAL), EPIPE);
    close(s);
    close(l);
    return 0;
}
