/* One thread registers a new socket with epoll while another connects it, both let go at
 * the same moment, many times over: whichever comes first, the epoll set reports the
 * server's byte and the socket reads it.
 * usmc-expect: accelerated data
 * usmc-fallbacks: 0 */
/* threads */
#include "common.h"

#define ROUNDS 1000

static int ep, sock;
static pthread_barrier_t go;

/* Each connection: one byte, then EOF. */
static void server(void *arg)
{
    int l = *(int *)arg;
    char c;

    for (int i = 0; i < ROUNDS; i++) {
        int s = cf_accept(l);
        cf_write_all(s, "x", 1);
        CHECK(cf_read_full(s, &c, 1) == 0);
        close(s);
    }
}

static void *registrar(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_barrier_wait(&go);
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, sock, &ev) == 0);
        pthread_barrier_wait(&go);
    }
    return NULL;
}

int main(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    pthread_t t;
    int seen = 0;

    cf_start();
    int l = cf_listen(AF_INET);
    cf_loopback(AF_INET, cf_port(l), &ss, &len);
    cf_spawn(server, &l);
    ep = epoll_create1(0);
    CHECK(ep >= 0);
    CHECK(pthread_barrier_init(&go, NULL, 2) == 0);
    CHECK(pthread_create(&t, NULL, registrar, NULL) == 0);
    for (int i = 0; i < ROUNDS; i++) {
        struct epoll_event ev;
        char c;
        sock = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        CHECK(sock >= 0);
        pthread_barrier_wait(&go);
        int r = connect(sock, (struct sockaddr *)&ss, len);
        CHECK(r == 0 || errno == EINPROGRESS);
        pthread_barrier_wait(&go);
        CHECK(epoll_wait(ep, &ev, 1, 10000) == 1);
        CHECK(ev.data.u64 == (uint64_t)i && (ev.events & EPOLLIN));
        CHECK(read(sock, &c, 1) == 1 && c == 'x');
        close(sock);
        seen++;
    }
    pthread_join(t, NULL);
    printf("rounds seen: %d\n", seen);
    cf_join();
    close(l);
    return 0;
}
