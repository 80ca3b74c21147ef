/* A client that closes its connection before the server accepts it sends its FIN at once,
 * as TCP does: its socket leaves ESTABLISHED (read from /proc/net/tcp) while the server
 * has still to accept, and so to read the proposal that carries a copy of the socket.
 * The server, accepting a second later, reads EOF.
 * usmc-expect: accelerated */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>

/* The state (/proc/net/tcp's st column) of the socket from local port `from` to `to`. */
static unsigned tcp_state(uint16_t from, uint16_t to)
{
    char line[512];
    unsigned st = 0;
    FILE *f = fopen("/proc/net/tcp", "re");

    CHECK(f != NULL);
    while (fgets(line, sizeof line, f)) {
        unsigned lport, rport, s;
        if (sscanf(line, " %*d: %*8x:%4x %*8x:%4x %2x", &lport, &rport, &s) == 3 &&
            lport == from && rport == to)
            st = s;
    }
    fclose(f);
    return st;
}

static void client(void *arg)
{
    uint16_t port = *(uint16_t *)arg;
    int fd = cf_connect(AF_INET, port);
    struct sockaddr_in me;
    socklen_t len = sizeof me;

    CHECK(getsockname(fd, (struct sockaddr *)&me, &len) == 0);
    close(fd);
    unsigned st = TCP_ESTABLISHED;
    for (int i = 0; i < 50 && st == TCP_ESTABLISHED; i++) {
        usleep(10000);
        st = tcp_state(ntohs(me.sin_port), port);
    }
    printf("client socket state after close: %u\n", st);
    CHECK(st != TCP_ESTABLISHED);
}

int main(void)
{
    cf_start();
    int s = cf_serve_late(client, 1000);
    char c;
    CHECK(read(s, &c, 1) == 0);
    printf("server read EOF\n");
    close(s);
    cf_join();
    return 0;
}
