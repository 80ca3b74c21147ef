/* The peer is killed with bytes of ours unread while this side is blocked reading: the read
 * wakes with ECONNRESET, not an end of file.
 * usmc-expect: accelerated */
#include "common.h"

int main(void)
{
    char buf[8];
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    pid_t parent = getpid();
    pid_t peer = cf_fork();
    if (peer == 0) {
        cf_connect(AF_INET, port);
        cf_wait_sleeping(parent, parent);
        raise(SIGKILL);
    }
    int s = cf_accept(l);
    cf_write_all(s, "unread", 6);
    EXPECT_ERR("read", read(s, buf, sizeof buf), ECONNRESET);
    printf("peer exit status: %d\n", cf_wait_child(peer));
    EXPECT_RET("read again", read(s, buf, sizeof buf), 0);
    close(s);
    close(l);
    return 0;
}
