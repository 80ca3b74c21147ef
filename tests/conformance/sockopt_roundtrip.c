/* Socket options read back on an accelerated connection as on TCP: type, domain, protocol,
 * TCP_NODELAY, SO_KEEPALIVE, SO_RCVBUF (doubled by the kernel), TCP_INFO state.
 * usmc-expect: accelerated data */
#include "common.h"

static int get_int(int fd, int level, int name)
{
    int v = -1;
    socklen_t len = sizeof v;
    if (getsockopt(fd, level, name, &v, &len) < 0)
        FAIL("getsockopt %d/%d: %s", level, name, cf_errname(errno));
    return v;
}

static void set_int(int fd, int level, int name, int v)
{
    if (setsockopt(fd, level, name, &v, sizeof v) < 0)
        FAIL("setsockopt %d/%d: %s", level, name, cf_errname(errno));
}

static void client(void *arg)
{
    char c;
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "q", 1);
    cf_read_exact(fd, &c, 1);
    close(fd);
}

int main(void)
{
    struct tcp_info info;
    socklen_t len = sizeof info;
    char c;
    cf_start();
    int l = cf_listen_spawn(client);
    int s = cf_accept(l);
    printf("SO_ACCEPTCONN listener %d, connection %d\n", get_int(l, SOL_SOCKET, SO_ACCEPTCONN),
           get_int(s, SOL_SOCKET, SO_ACCEPTCONN));
    printf("SO_TYPE stream: %d\n", get_int(s, SOL_SOCKET, SO_TYPE) == SOCK_STREAM);
    printf("SO_DOMAIN inet: %d\n", get_int(s, SOL_SOCKET, SO_DOMAIN) == AF_INET);
    printf("SO_PROTOCOL tcp: %d\n", get_int(s, SOL_SOCKET, SO_PROTOCOL) == IPPROTO_TCP);
    printf("TCP_NODELAY %d", get_int(s, IPPROTO_TCP, TCP_NODELAY));
    set_int(s, IPPROTO_TCP, TCP_NODELAY, 1);
    printf(" -> %d\n", !!get_int(s, IPPROTO_TCP, TCP_NODELAY));
    printf("SO_KEEPALIVE %d", get_int(s, SOL_SOCKET, SO_KEEPALIVE));
    set_int(s, SOL_SOCKET, SO_KEEPALIVE, 1);
    printf(" -> %d\n", !!get_int(s, SOL_SOCKET, SO_KEEPALIVE));
    set_int(s, SOL_SOCKET, SO_RCVBUF, 65536);
    printf("SO_RCVBUF after setting 65536: %d\n", get_int(s, SOL_SOCKET, SO_RCVBUF));
    set_int(s, SOL_SOCKET, SO_SNDBUF, 65536);
    printf("SO_SNDBUF after setting 65536: %d\n", get_int(s, SOL_SOCKET, SO_SNDBUF));
    CHECK(getsockopt(s, IPPROTO_TCP, TCP_INFO, &info, &len) == 0);
    printf("TCP_INFO state established: %d\n", info.tcpi_state == 1);
    printf("SO_ERROR %d\n", get_int(s, SOL_SOCKET, SO_ERROR));
    cf_read_exact(s, &c, 1);
    cf_write_all(s, &c, 1);
    close(s);
    cf_join();
    return 0;
}
