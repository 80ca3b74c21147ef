/* An accepted connection survives exec: a forked child execs this program again, which
 * finds the socket by number and serves it (1 MiB echoed).
 * usmc-expect: accelerated data */
#include "common.h"

#define TOTAL (1u << 20)

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    uint64_t n = cf_echo_client(fd, TOTAL, 59);
    printf("client got back %llu\n", (unsigned long long)n);
    CHECK(n == TOTAL);
    close(fd);
}

static int serve_after_exec(int fd)
{
    int type = 0;
    socklen_t len = sizeof type;
    CHECK(getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM);
    size_t n = cf_echo_after_eof(fd);
    printf("exec'd server echoed %zu\n", n);
    return n == TOTAL ? 0 : 1;
}

int main(int argc, char **argv)
{
    char num[16];
    cf_start();
    if (argc == 3 && strcmp(argv[1], "serve") == 0)
        return serve_after_exec(atoi(argv[2]));
    int l = cf_listen_spawn(client);
    int s = cf_accept(l);
    snprintf(num, sizeof num, "%d", s);
    pid_t child = cf_fork();
    if (child == 0) {
        close(l);
        execl("/proc/self/exe", argv[0], "serve", num, (char *)NULL);
        _exit(127);
    }
    close(s);
    printf("exec'd server exit status: %d\n", cf_wait_child(child));
    cf_join();
    return 0;
}
