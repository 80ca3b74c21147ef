/* The same exchange over IPv6 on ::1: addresses as expected, 3 MiB each way intact.
 * usmc-expect: accelerated data */
#include "common.h"

static void show_addr(const char *what, int fd, int (*get)(int, struct sockaddr *, socklen_t *))
{
    struct sockaddr_in6 a;
    socklen_t len = sizeof a;
    char text[INET6_ADDRSTRLEN];
    CHECK(get(fd, (struct sockaddr *)&a, &len) == 0 && a.sin6_family == AF_INET6);
    printf("%s: %s\n", what, inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text));
}

static void client(void *arg)
{
    int fd = cf_connect(AF_INET6, *(uint16_t *)arg);
    show_addr("client peer", fd, getpeername);
    cf_send_pattern(fd, 3u << 20, 1 << 16, 43);
    CHECK(shutdown(fd, SHUT_WR) == 0);
    printf("client received %llu\n", (unsigned long long)cf_recv_pattern(fd, 1 << 16, 44));
    close(fd);
}

int main(void)
{
    cf_start();
    int l = cf_listen(AF_INET6);
    uint16_t port = cf_port(l);
    cf_spawn(client, &port);
    int s = cf_accept(l);
    show_addr("server name", s, getsockname);
    show_addr("server peer", s, getpeername);
    uint64_t n = cf_recv_pattern(s, 1 << 16, 43);
    printf("server received %llu\n", (unsigned long long)n);
    CHECK(n == 3u << 20);
    cf_send_pattern(s, 3u << 20, 1 << 16, 44);
    close(s);
    cf_join();
    return 0;
}
