/* A listener on the wildcard address, and clients that connect to the wildcard address
 * (Linux takes 0.0.0.0 for 127.0.0.1 and :: for ::1, and sockperf's client does this by
 * default), and one to 127.0.0.2, which loopback also reaches: each gets its 64 KiB echoed
 * back, and both ends see loopback names.
 * usmc-expect: accelerated data
 * usmc-fallbacks: 0 */
#include "common.h"

#include <arpa/inet.h>

#define TOTAL (64u << 10)

static int listen_any(int family, uint16_t *port)
{
    struct sockaddr_storage ss = {0};
    socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    int fd = socket(family, SOCK_STREAM, 0);

    ss.ss_family = (sa_family_t)family;
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&ss, len) == 0 && listen(fd, 16) == 0);
    *port = cf_port(fd);
    return fd;
}

/* ipv4: the address, in host order, for an IPv4 connection (0: the wildcard). */
static int connect_any(int family, uint16_t port, uint32_t ipv4)
{
    struct sockaddr_storage ss = {0};
    socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    int fd = socket(family, SOCK_STREAM, 0);

    ss.ss_family = (sa_family_t)family;
    if (family == AF_INET) {
        ((struct sockaddr_in *)&ss)->sin_port = htons(port);
        ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(ipv4);
    } else {
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
    }
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&ss, len) == 0);
    return fd;
}

static void client(void *arg)
{
    uint16_t *ports = arg;

    for (int i = 0; i < 3; i++) {
        int fd = i == 1 ? connect_any(AF_INET6, ports[1], 0)
                        : connect_any(AF_INET, ports[0], i ? 0x7f000002 : 0);
        struct sockaddr_storage peer;
        socklen_t l = sizeof(peer);
        char name[64];
        CHECK(getpeername(fd, (struct sockaddr *)&peer, &l) == 0);
        inet_ntop(peer.ss_family,
                  peer.ss_family == AF_INET ? (void *)&((struct sockaddr_in *)&peer)->sin_addr
                                            : (void *)&((struct sockaddr_in6 *)&peer)->sin6_addr,
                  name, sizeof(name));
        uint64_t n = cf_echo_client(fd, TOTAL, 7u + (unsigned)i);
        printf("client %d: peer %s, got back %llu\n", i, name, (unsigned long long)n);
        CHECK(n == TOTAL);
        close(fd);
    }
}

int main(void)
{
    uint16_t ports[2];

    cf_start();
    int l4 = listen_any(AF_INET, &ports[0]);
    int l6 = listen_any(AF_INET6, &ports[1]);
    cf_spawn(client, ports);
    for (int i = 0; i < 3; i++) {
        int s = accept(i == 1 ? l6 : l4, NULL, NULL);
        CHECK(s >= 0);
        printf("server %d echoed %zu\n", i, cf_echo_after_eof(s));
        close(s);
    }
    cf_join();
    return 0;
}
