/* Fork per connection: the listener process accepts, forks a worker that serves the
 * connection, and closes its own copy; the client gets its 2 MiB echoed back, then EOF once
 * the worker is done.
 * usmc-expect: accelerated data */
#include "common.h"

#define TOTAL (2u << 20)

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_send_pattern(fd, TOTAL, 1 << 16, 53);
    CHECK(shutdown(fd, SHUT_WR) == 0);
    uint64_t n = cf_recv_pattern(fd, 1 << 16, 53);
    printf("client got back %llu\n", (unsigned long long)n);
    CHECK(n == TOTAL);
    close(fd);
}

int main(void)
{
    static char buf[1 << 16];
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    cf_spawn(client, &port);
    int s = cf_accept(l);
    pid_t worker = cf_fork();
    if (worker == 0) {
        close(l);
        ssize_t r;
        while ((r = read(s, buf, sizeof buf)) > 0)
            cf_write_all(s, buf, (size_t)r);
        _exit(r == 0 ? 0 : 1);
    }
    EXPECT_RET("listener closes its copy", close(s), 0);
    printf("worker exit status: %d\n", cf_wait_child(worker));
    cf_join();
    return 0;
}
