/* An IPv6 listener on :: accepts an IPv4 client; the server sees ::ffff:127.0.0.1 and the
 * client sees an IPv4 peer. Data flows both ways.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    char buf[4];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    CHECK(getpeername(fd, (struct sockaddr *)&a, &len) == 0);
    printf("client peer family %s, %s\n", a.sin_family == AF_INET ? "AF_INET" : "other",
           inet_ntoa(a.sin_addr));
    cf_write_all(fd, "ping", 4);
    cf_read_exact(fd, buf, 4);
    CHECK(memcmp(buf, "pong", 4) == 0);
    close(fd);
}

int main(void)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
    socklen_t len = sizeof a;
    char text[INET6_ADDRSTRLEN], buf[4];
    int off = 0;
    cf_start();
    int l = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(l >= 0);
    CHECK(setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) == 0);
    CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 16) == 0);
    uint16_t port = cf_port(l);
    cf_spawn(client, &port);
    int s = cf_accept(l);
    CHECK(getpeername(s, (struct sockaddr *)&a, &len) == 0);
    printf("server peer family %s, %s\n", a.sin6_family == AF_INET6 ? "AF_INET6" : "other",
           inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text));
    CHECK(IN6_IS_ADDR_V4MAPPED(&a.sin6_addr));
    cf_read_exact(s, buf, 4);
    CHECK(memcmp(buf, "ping", 4) == 0);
    cf_write_all(s, "pong", 4);
    close(s);
    cf_join();
    return 0;
}
