/* A reader thread and a writer thread on the same socket at once, on both ends: 24 MiB each
 * way, both streams verified.
 * usmc-expect: accelerated data */
/* threads */
#include "common.h"

#define TOTAL (24u << 20)

struct side {
    int fd;
    unsigned send_seed, recv_seed;
    uint64_t received;
};

static void *writer(void *arg)
{
    struct side *s = arg;
    cf_send_pattern(s->fd, TOTAL, 100000, s->send_seed);
    CHECK(shutdown(s->fd, SHUT_WR) == 0);
    return NULL;
}

static void *reader(void *arg)
{
    struct side *s = arg;
    s->received = cf_recv_pattern(s->fd, 70000, s->recv_seed);
    return NULL;
}

static void run_duplex(struct side *s, const char *who)
{
    pthread_t w, r;
    CHECK(pthread_create(&r, NULL, reader, s) == 0);
    CHECK(pthread_create(&w, NULL, writer, s) == 0);
    CHECK(pthread_join(w, NULL) == 0 && pthread_join(r, NULL) == 0);
    printf("%s received %llu\n", who, (unsigned long long)s->received);
    CHECK(s->received == TOTAL);
}

static void client(void *arg)
{
    struct side s = {cf_connect(AF_INET, *(uint16_t *)arg), 1, 2, 0};
    run_duplex(&s, "client");
    close(s.fd);
}

int main(void)
{
    cf_start();
    int l = cf_listen_spawn(client);
    struct side s = {cf_accept(l), 2, 1, 0};
    run_duplex(&s, "server");
    close(s.fd);
    cf_join();
    return 0;
}
