/* A client writes to a connection the server has not accepted yet until it takes no more, then
 * waits for room, edge-triggered: room comes back (under usmc when the server's attach widens
 * what a pending connection may hold, then as the server reads), and every byte arrives.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    struct epoll_event ev;
    int ep = epoll_create1(0), s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    uint64_t off = 0;

    CHECK(ep >= 0 && s >= 0);
    cf_loopback(AF_INET, *(uint16_t *)arg, &ss, &sl);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLOUT | EPOLLET, 1);
    int r = connect(s, (struct sockaddr *)&ss, sl);
    CHECK(r == 0 || errno == EINPROGRESS);
    CHECK(epoll_wait(ep, &ev, 1, 5000) == 1 && (ev.events & EPOLLOUT));
    /* Until it takes no more, twice: room must come back each time. */
    for (int round = 0; round < 2; round++) {
        char buf[4096];
        ssize_t w;
        do {
            cf_fill(buf, sizeof buf, off, 7);
            w = write(s, buf, sizeof buf);
            if (w > 0)
                off += (uint64_t)w;
        } while (w > 0);
        CHECK(errno == EAGAIN);
        if (round == 0)
            cf_post(); /* the server may accept now */
        int n = epoll_wait(ep, &ev, 1, 10000);
        printf("round %d: room came back: %d\n", round, n == 1 && (ev.events & EPOLLOUT) != 0);
    }
    cf_post_u64(off);
    close(s);
    close(ep);
}

int main(void)
{
    cf_start();
    int l = cf_listen_spawn(client);
    cf_wait();
    usleep(100000);
    int s = cf_accept(l);
    uint64_t got = cf_recv_pattern(s, 65536, 7), sent = cf_wait_u64();
    printf("all bytes arrived: %d\n", got == sent);
    close(s);
    close(l);
    cf_join();
    return 0;
}
