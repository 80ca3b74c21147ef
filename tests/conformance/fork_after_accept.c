/* Fork per connection: the listener process accepts, forks a worker that serves the
 * connection, and closes its own copy; the client gets its 2 MiB echoed back, then EOF once
 * the worker is done.
 * usmc-expect: accelerated data */
#include "common.h"

#define TOTAL (2u << 20)

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    uint64_t n = cf_echo_client(fd, TOTAL, 53);
    printf("client got back %llu\n", (unsigned long long)n);
    CHECK(n == TOTAL);
    close(fd);
}

int main(void)
{
    cf_start();
    int l = cf_listen_spawn(client);
    int s = cf_accept(l);
    pid_t worker = cf_fork();
    if (worker == 0) {
        close(l);
        _exit(cf_echo_after_eof(s) == TOTAL ? 0 : 1);
    }
    EXPECT_RET("listener closes its copy", close(s), 0);
    printf("worker exit status: %d\n", cf_wait_child(worker));
    cf_join();
    return 0;
}
