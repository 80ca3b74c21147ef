/* An event loop with many connections sleeps, the peer's byte on one of them wakes it, and
 * while it is awake the peer writes to all the others: every wait finds its bytes, and
 * nothing asks the peer to ring for the connections the sleep armed but no byte woke.
 * usmc-expect: accelerated data
 * usmc-doorbells-at-most: 8 */
#include "common.h"

#define CONNS 40

static void client(void *arg)
{
    int fd[CONNS];
    pid_t parent = getppid();

    for (int i = 0; i < CONNS; i++)
        fd[i] = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait(); /* the server waits now */
    cf_wait_sleeping(parent, parent);
    cf_write_all(fd[0], "w", 1);
    cf_wait(); /* the server is awake and not waiting */
    for (int i = 1; i < CONNS; i++)
        cf_write_all(fd[i], "a", 1);
    cf_post();
    cf_wait();
    for (int i = 0; i < CONNS; i++)
        close(fd[i]);
}

/* Reads every connection epoll_wait reports; returns how many. */
static int read_reported(int ep, int *fd)
{
    struct epoll_event ev[CONNS];
    int n = epoll_wait(ep, ev, CONNS, 10000);
    char c;

    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
        CHECK(ev[i].events == EPOLLIN);
        CHECK(read(fd[ev[i].data.u32], &c, 1) == 1);
    }
    return n;
}

int main(void)
{
    int fd[CONNS], ep, got = 0;

    cf_start();
    int l = cf_listen_spawn(client);
    CHECK((ep = epoll_create1(EPOLL_CLOEXEC)) >= 0);
    for (int i = 0; i < CONNS; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        fd[i] = cf_accept(l);
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd[i], &ev) == 0);
    }
    cf_post();
    printf("first wait reports: %d\n", read_reported(ep, fd));
    cf_post();
    cf_wait();
    while (got < CONNS - 1)
        got += read_reported(ep, fd);
    printf("then: %d\n", got);
    cf_post();
    for (int i = 0; i < CONNS; i++)
        close(fd[i]);
    close(l);
    cf_join();
    return 0;
}
