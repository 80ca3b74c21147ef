/* Four threads wait in one epoll set while two others connect, register, exchange a byte,
 * modify, remove and close accelerated sockets, round after round: no wait ever returns an
 * event whose data the application did not register (the library's own, whatever the
 * interleaving of the waiters with the first registration, later ones and the closes).
 * (The registration while a connect is under way is epoll_wait_blocked's.)
 * usmc-expect: accelerated data */
/* threads */
#include "common.h"

#define POLLERS 4
#define CONNECTORS 2
#define ROUNDS 150
#define MAGIC 0xc0ffeeull

static int ep;
static _Atomic int stop;
static _Atomic long unknown, reported;

static void *echo_one(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char c;
    while (read(fd, &c, 1) == 1)
        cf_write_all(fd, &c, 1);
    close(fd);
    return NULL;
}

static void server(void *arg)
{
    int l = *(int *)arg;
    for (int i = 0; i < CONNECTORS * ROUNDS; i++) {
        pthread_t t;
        int fd = cf_accept(l);
        CHECK(pthread_create(&t, NULL, echo_one, (void *)(intptr_t)fd) == 0);
        CHECK(pthread_detach(t) == 0);
    }
    cf_wait();
}

static void *poller(void *arg)
{
    struct epoll_event ev[8];
    (void)arg;
    while (!stop) {
        int n = epoll_wait(ep, ev, 8, 20);
        CHECK(n >= 0 || errno == EINTR);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 >> 32 == MAGIC || ev[i].data.u64 == 1)
                reported++;
            else
                unknown++;
        }
    }
    return NULL;
}

static void *connector(void *arg)
{
    uint16_t port = *(uint16_t *)arg;
    struct sockaddr_storage ss;
    socklen_t sl;
    char c = 'x';

    cf_loopback(AF_INET, port, &ss, &sl);
    for (int r = 0; r < ROUNDS; r++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(s >= 0);
        uint64_t tag = MAGIC << 32 | (uint32_t)s;
        /* Registered before or after the connect, in turn; the connector's own calls block
         * (a blocking call and an epoll wait in another thread on one socket). */
        if (r % 2 == 0)
            cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLOUT | EPOLLET | EPOLLONESHOT, tag);
        CHECK(connect(s, (struct sockaddr *)&ss, sl) == 0);
        if (r % 2 == 1)
            cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLET | EPOLLONESHOT, tag);
        cf_write_all(s, &c, 1);
        cf_read_exact(s, &c, 1);
        cf_epoll_ctl(ep, EPOLL_CTL_MOD, s, EPOLLIN | EPOLLONESHOT, tag);
        if (r % 3 == 0)
            cf_epoll_ctl(ep, EPOLL_CTL_DEL, s, 0, 0);
        close(s);
    }
    return NULL;
}

int main(void)
{
    pthread_t p[POLLERS], c[CONNECTORS];
    int pp[2];

    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    cf_spawn(server, &l);
    CHECK((ep = epoll_create1(0)) >= 0 && pipe(pp) == 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, pp[0], EPOLLIN | EPOLLET, 1);
    for (int i = 0; i < POLLERS; i++)
        CHECK(pthread_create(&p[i], NULL, poller, NULL) == 0);
    for (int i = 0; i < CONNECTORS; i++)
        CHECK(pthread_create(&c[i], NULL, connector, &port) == 0);
    for (int i = 0; i < CONNECTORS; i++)
        CHECK(pthread_join(c[i], NULL) == 0);
    stop = 1;
    for (int i = 0; i < POLLERS; i++)
        CHECK(pthread_join(p[i], NULL) == 0);
    printf("%d rounds on %d threads, events reported: %s, unknown data: %ld\n", ROUNDS,
           CONNECTORS, reported ? "some" : "none", (long)unknown);
    CHECK(unknown == 0);
    cf_post();
    close(l);
    cf_join();
    return 0;
}
