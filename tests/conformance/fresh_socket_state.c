/* What a client socket is told before connect() holds after it: a descriptor duplicated
 * before connect() and connected through the copy, O_NONBLOCK set with fcntl() or FIONBIO
 * or cleared after SOCK_NONBLOCK, a connect() refused and tried again. Every connection is
 * accelerated, and the blocking mode each was left in shows in its first read, made before
 * the server answers.
 * usmc-expect: accelerated data
 * usmc-fallbacks: 0
 * usmc-accelerated: 10 */
#include "common.h"

#define ROUNDS 5

/* Each connection: "ping", then "pong" a moment later, then EOF. */
static void server(void *arg)
{
    int l = *(int *)arg;
    char buf[4];

    for (int i = 0; i < ROUNDS; i++) {
        int s = cf_accept(l);
        cf_read_exact(s, buf, 4);
        CHECK(memcmp(buf, "ping", 4) == 0);
        usleep(100 * 1000);
        cf_write_all(s, "pong", 4);
        CHECK(cf_read_full(s, buf, sizeof(buf)) == 0);
        close(s);
    }
}

static void wait_for(int fd, short events)
{
    struct pollfd p = {.fd = fd, .events = events};
    EXPECT_RET("poll", poll(&p, 1, -1), 1);
}

/* Sends the ping, reads the pong (nonblocking: after an EAGAIN first) and closes. */
static void exchange(const char *label, int fd, bool nonblocking)
{
    char buf[4];

    printf("%s\n", label);
    if (nonblocking)
        wait_for(fd, POLLOUT);
    cf_write_all(fd, "ping", 4);
    if (nonblocking) {
        SHOW("early read", read(fd, buf, sizeof(buf)));
        wait_for(fd, POLLIN);
    }
    EXPECT_RET("read", read(fd, buf, sizeof(buf)), 4);
    CHECK(memcmp(buf, "pong", 4) == 0);
    close(fd);
}

static int tcp_socket(int flags)
{
    int fd = socket(AF_INET, SOCK_STREAM | flags, 0);
    CHECK(fd >= 0);
    return fd;
}

int main(void)
{
    struct sockaddr_storage ss, none;
    socklen_t len, nlen;
    int one = 1;

    cf_start();
    int l = cf_listen(AF_INET);
    cf_loopback(AF_INET, cf_port(l), &ss, &len);
    cf_spawn(server, &l);

    int fd = tcp_socket(0), d = dup(fd);
    CHECK(d >= 0);
    close(fd);
    EXPECT_RET("connect through a duplicate", connect(d, (struct sockaddr *)&ss, len), 0);
    exchange("duplicated before connect", d, false);

    fd = tcp_socket(0);
    EXPECT_RET("F_SETFL", fcntl(fd, F_SETFL, O_NONBLOCK), 0);
    SHOW("connect", connect(fd, (struct sockaddr *)&ss, len));
    exchange("O_NONBLOCK set before connect", fd, true);

    fd = tcp_socket(SOCK_NONBLOCK);
    EXPECT_RET("F_SETFL", fcntl(fd, F_SETFL, 0), 0);
    EXPECT_RET("connect", connect(fd, (struct sockaddr *)&ss, len), 0);
    exchange("SOCK_NONBLOCK cleared before connect", fd, false);

    fd = tcp_socket(0);
    EXPECT_RET("FIONBIO", ioctl(fd, FIONBIO, &one), 0);
    SHOW("connect", connect(fd, (struct sockaddr *)&ss, len));
    exchange("FIONBIO before connect", fd, true);

    /* A port bound but not listening refuses; the same socket may then connect elsewhere. */
    int b = tcp_socket(0);
    cf_loopback(AF_INET, 0, &none, &nlen);
    CHECK(bind(b, (struct sockaddr *)&none, nlen) == 0);
    cf_loopback(AF_INET, cf_port(b), &none, &nlen);
    fd = tcp_socket(0);
    EXPECT_RET("connect to a closed port", connect(fd, (struct sockaddr *)&none, nlen), -1);
    EXPECT_RET("connect again", connect(fd, (struct sockaddr *)&ss, len), 0);
    exchange("connected after a refusal", fd, false);
    close(b);

    cf_join();
    close(l);
    return 0;
}
