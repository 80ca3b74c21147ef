/* An urgent byte still in the sender's send buffer is announced before it arrives: SIGURG
 * comes, but recv(MSG_OOB) is EAGAIN, poll shows no POLLPRI and the reader is not at the
 * mark; it reads up to the mark as the rest comes, and then the byte is there.
 * usmc-expect: accelerated data */
#include "common.h"

enum { BEFORE = 3000 };

static void client(void *arg)
{
    char buf[BEFORE];
    int small = 1024;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_storage ss;
    socklen_t len;
    CHECK(fd >= 0);
    CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    cf_loopback(AF_INET, *(uint16_t *)arg, &ss, &len);
    CHECK(connect(fd, (struct sockaddr *)&ss, len) == 0);
    cf_fill(buf, sizeof buf, 0, 5);
    cf_wait();
    /* More than the reader's buffer holds, then the urgent byte. */
    cf_write_all(fd, buf, sizeof buf);
    EXPECT_RET("urgent send", send(fd, "!", 1, MSG_OOB), 1);
    cf_wait();
    close(fd);
}

int main(void)
{
    static char buf[BEFORE];
    int small = 1024, mark = 0;
    cf_start();
    cf_catch_sigurg();
    int l = cf_listen(AF_INET);
    /* Before the connection exists: its window starts small too. */
    CHECK(setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0);
    uint16_t port = cf_port(l);
    cf_spawn(client, &port);
    int s = cf_accept(l);
    CHECK(fcntl(s, F_SETOWN, getpid()) == 0);
    cf_set_nonblock(s, true);
    cf_post();
    cf_wait_sigurg(1, 2000);
    printf("SIGURG: %d\n", cf_urgent_signals > 0);
    struct pollfd p = {.fd = s, .events = POLLIN | POLLPRI};
    CHECK(poll(&p, 1, 0) == 1);
    printf("announced: %s\n", cf_poll_str(p.revents));
    cf_recv_oob(s, "urgent read", 0);
    CHECK(ioctl(s, SIOCATMARK, &mark) == 0);
    printf("at mark: %d\n", mark);
    size_t got = 0;
    while (!mark) {
        long n = read(s, buf + got, sizeof buf - got);
        if (n > 0)
            got += (size_t)n;
        else if (n < 0 && errno == EAGAIN)
            CHECK(poll(&(struct pollfd){.fd = s, .events = POLLIN}, 1, 10000) == 1);
        else
            FAIL("read: %ld %s", n, cf_errname(errno));
        CHECK(ioctl(s, SIOCATMARK, &mark) == 0);
    }
    printf("read up to the mark: %zu, intact: %d\n", got, cf_verify(buf, got, 0, 5));
    /* (Whether POLLIN shows now depends on TCP's window, which shared memory has not.) */
    p.revents = 0;
    CHECK(poll(&p, 1, 0) == 1);
    printf("arrived: %s\n", p.revents & POLLPRI ? "POLLPRI" : "no POLLPRI");
    cf_recv_oob(s, "urgent read", 0);
    cf_post();
    close(s);
    cf_join();
    return 0;
}
