#include "endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct endpoint {
    struct sockaddr_storage addr;
    socklen_t len;
    int tcp;
};

static void die(const char *what, const char *spec)
{
    fprintf(stderr, "%s %s: %s\n", what, spec, strerror(errno));
    exit(1);
}

static void parse(const char *spec, struct endpoint *ep)
{
    memset(ep, 0, sizeof(*ep));
    if (strncmp(spec, "unix:", 5) == 0) {
        struct sockaddr_un *un = (struct sockaddr_un *)&ep->addr;
        const char *path = spec + 5;
        if (strlen(path) >= sizeof(un->sun_path)) {
            fprintf(stderr, "socket path too long: %s\n", path);
            exit(2);
        }
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, path);
        ep->len = sizeof(*un);
        return;
    }
    char host[256];
    const char *port;
    if (strncmp(spec, "tcp:", 4) != 0 || !(port = strrchr(spec + 4, ':')) ||
        (size_t)(port - (spec + 4)) >= sizeof(host)) {
        fprintf(stderr, "endpoint must be tcp:HOST:PORT or unix:PATH, not %s\n", spec);
        exit(2);
    }
    memcpy(host, spec + 4, port - (spec + 4));
    host[port - (spec + 4)] = '\0';
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *res;
    int rc = getaddrinfo(host, port + 1, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", spec, gai_strerror(rc));
        exit(2);
    }
    memcpy(&ep->addr, res->ai_addr, res->ai_addrlen);
    ep->len = res->ai_addrlen;
    ep->tcp = 1;
    freeaddrinfo(res);
}

int endpoint_listen(const char *spec)
{
    struct endpoint ep;
    parse(spec, &ep);
    int fd = socket(ep.addr.ss_family, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket", spec);
    int one = 1;
    if (ep.tcp)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    else
        unlink(((struct sockaddr_un *)&ep.addr)->sun_path);
    if (bind(fd, (struct sockaddr *)&ep.addr, ep.len) < 0)
        die("bind", spec);
    if (listen(fd, 1024) < 0)
        die("listen", spec);
    return fd;
}

void endpoint_serve(const char *spec, void (*handle)(int fd))
{
    int lfd = endpoint_listen(spec);
    /* a client that stops mid-exchange ends its connection, never the server */
    signal(SIGPIPE, SIG_IGN);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            die("accept", spec);
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        handle(fd);
    }
}

/* Linux reuses a local port for the same 4-tuple at most once a second (TIME_WAIT
 * reuse on loopback), and connect() draws from half the ephemeral range first: a
 * loop of short connections to one port stalls near 14 000 a second on the default
 * range, whatever carries the bytes, and a connection-rate figure would measure
 * that. A loopback client spreads its connections over eight source addresses
 * (IP_BIND_ADDRESS_NO_PORT: the port is still chosen at connect()), each with
 * its own 4-tuples. */
#define SOURCES 8

static int spread_source(int fd, const struct endpoint *ep)
{
    static unsigned next;
    const struct sockaddr_in *to = (const struct sockaddr_in *)&ep->addr;
    if (!ep->tcp || to->sin_family != AF_INET || (ntohl(to->sin_addr.s_addr) >> 24) != 127)
        return 0;
    int one = 1;
    struct sockaddr_in from = { .sin_family = AF_INET };
    from.sin_addr.s_addr = htonl(0x7f000001u + next++ % SOURCES);
    if (setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one)) < 0)
        return -1;
    return bind(fd, (struct sockaddr *)&from, sizeof(from));
}

int endpoint_connect(const char *spec)
{
    /* parsed once: connection-rate loops must not measure name resolution */
    static struct endpoint ep;
    static const char *parsed;
    if (parsed != spec) {
        parse(spec, &ep);
        parsed = spec;
    }
    int fd = socket(ep.addr.ss_family, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (spread_source(fd, &ep) < 0 || connect(fd, (struct sockaddr *)&ep.addr, ep.len) < 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    int one = 1;
    if (ep.tcp)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}
