/* A connected socket passed to another process with SCM_RIGHTS over a Unix socket keeps
 * working there (2 MiB echoed) after the sender closed its copy.
 * usmc-expect: accelerated data */
#include "common.h"

#define TOTAL (2u << 20)

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    uint64_t n = cf_echo_client(fd, TOTAL, 61);
    printf("client got back %llu\n", (unsigned long long)n);
    CHECK(n == TOTAL);
    close(fd);
}

int main(void)
{
    int pair[2];
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
    pid_t worker = cf_fork();
    if (worker == 0) {
        close(l);
        close(pair[0]);
        int fd;
        cf_recv_fds(pair[1], &fd, 1);
        _exit(cf_echo_after_eof(fd) == TOTAL ? 0 : 1);
    }
    close(pair[1]);
    cf_spawn(client, &port);
    int s = cf_accept(l);
    cf_send_fds(pair[0], &s, 1);
    EXPECT_RET("sender closes its copy", close(s), 0);
    printf("worker exit status: %d\n", cf_wait_child(worker));
    cf_join();
    return 0;
}
