/* One connected socket passed twice in one SCM_RIGHTS message: the receiver gets two
 * descriptors of it, reads the client's 256 KiB through the first, writes the first half
 * back through the first and the second half through the second, and closes both; the
 * client gets every byte in order, then EOF.
 * usmc-expect: accelerated data */
#include "common.h"

#define TOTAL (256u << 10)

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    uint64_t n = cf_echo_client(fd, TOTAL, 67);
    printf("client got back %llu\n", (unsigned long long)n);
    CHECK(n == TOTAL);
    close(fd);
}

static int serve_two(int unix_fd)
{
    static char buf[TOTAL];
    int fds[2];
    cf_recv_fds(unix_fd, fds, 2);
    CHECK(fds[0] != fds[1]);
    size_t n = cf_read_full(fds[0], buf, sizeof buf);
    CHECK(n == TOTAL);
    cf_write_all(fds[0], buf, TOTAL / 2);
    cf_write_all(fds[1], buf + TOTAL / 2, TOTAL / 2);
    close(fds[0]);
    close(fds[1]);
    return 0;
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
        _exit(serve_two(pair[1]));
    }
    close(pair[1]);
    cf_spawn(client, &port);
    int s = cf_accept(l);
    cf_send_fds(pair[0], (int[2]){s, s}, 2);
    EXPECT_RET("sender closes its copy", close(s), 0);
    printf("worker exit status: %d\n", cf_wait_child(worker));
    cf_join();
    return 0;
}
