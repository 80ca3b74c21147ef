/* The peer process is killed (SIGKILL) while this one is blocked reading: everything it wrote
 * arrives, then EOF.
 * usmc-expect: accelerated data */
#include "common.h"

int main(void)
{
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    pid_t parent = getpid();
    pid_t peer = cf_fork();
    if (peer == 0) {
        int fd = cf_connect(AF_INET, port);
        cf_send_pattern(fd, 300000, 4096, 97);
        cf_wait_sleeping(parent, parent);
        raise(SIGKILL);
    }
    int s = cf_accept(l);
    uint64_t n = cf_recv_pattern(s, 1 << 16, 97);
    printf("received %llu, then EOF\n", (unsigned long long)n);
    CHECK(n == 300000);
    printf("peer exit status: %d\n", cf_wait_child(peer));
    close(s);
    return 0;
}
