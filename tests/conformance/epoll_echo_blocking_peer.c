/* An epoll event loop (level-triggered, blocking socket, one read per event) echoing a peer
 * that writes and then blocks in read(), many thousands of times: a message that arrives
 * while the loop asks to be woken must be reported by that very wait, never left for a
 * later one that would sleep for ever.
 * usmc-expect: accelerated data */
#include "common.h"

#define ROUNDS 30000
#define MSG 14

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    char buf[MSG];

    for (int i = 0; i < ROUNDS; i++) {
        cf_fill(buf, MSG, (uint64_t)i * MSG, 3);
        cf_write_all(fd, buf, MSG);
        cf_read_exact(fd, buf, MSG);
        if (!cf_verify(buf, MSG, (uint64_t)i * MSG, 3))
            FAIL("round %d: wrong echo", i);
    }
    printf("client: %d round trips\n", ROUNDS);
    close(fd);
}

int main(void)
{
    cf_start();
    int s = cf_serve(client), ep = epoll_create1(0), rounds = 0;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = s};

    CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0);
    for (;;) {
        char buf[4096];
        int n = epoll_wait(ep, &ev, 1, 20000);
        if (n != 1)
            FAIL("epoll_wait returned %d after %d echoes", n, rounds);
        ssize_t k = read(s, buf, sizeof(buf));
        if (k <= 0)
            break;
        cf_write_all(s, buf, (size_t)k);
        rounds++;
    }
    printf("server: echoed until EOF\n");
    cf_join();
    return 0;
}
