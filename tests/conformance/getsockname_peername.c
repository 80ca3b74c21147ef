/* getsockname and getpeername on both ends mirror each other, and the server's local port is
 * the listening port (ports are compared, never printed).
 * usmc-expect: accelerated data */
#include "common.h"

static uint16_t endpoint(int fd, int (*get)(int, struct sockaddr *, socklen_t *), const char *what)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    CHECK(get(fd, (struct sockaddr *)&a, &len) == 0);
    printf("%s: family %s, length %u, address %s\n", what,
           a.sin_family == AF_INET ? "AF_INET" : "other", (unsigned)len, inet_ntoa(a.sin_addr));
    return ntohs(a.sin_port);
}

static void client(void *arg)
{
    char c;
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_post_u64(endpoint(fd, getsockname, "client name"));
    cf_post_u64(endpoint(fd, getpeername, "client peer"));
    cf_write_all(fd, "x", 1);
    cf_read_exact(fd, &c, 1);
    close(fd);
}

int main(void)
{
    char c;
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    cf_spawn(client, &port);
    int s = cf_accept(l);
    uint16_t name = endpoint(s, getsockname, "server name");
    uint16_t peer = endpoint(s, getpeername, "server peer");
    uint16_t client_name = (uint16_t)cf_wait_u64(), client_peer = (uint16_t)cf_wait_u64();
    printf("server port is the listening port: %d\n", name == port);
    printf("client name is server peer: %d\n", client_name == peer);
    printf("client peer is server name: %d\n", client_peer == name);
    CHECK(name == port && client_name == peer && client_peer == name);
    cf_read_exact(s, &c, 1);
    cf_write_all(s, &c, 1);
    close(s);
    cf_join();
    return 0;
}
