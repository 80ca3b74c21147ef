/* 400 clients connect before the server accepts any of them (a burst against a busy
 * server), then each gets its echo: every one is accelerated, none falls back while
 * waiting in the backlog.
 * usmc-expect: accelerated data
 * usmc-fallbacks: 0 */
#include "common.h"

#define N 400

static int go[2];

static void client(void *arg)
{
    static int fds[N];
    cf_raise_nofile(4096);
    for (int i = 0; i < N; i++)
        fds[i] = cf_connect(AF_INET, *(uint16_t *)arg);
    CHECK(write(go[1], "g", 1) == 1);
    int good = 0;
    for (int i = 0; i < N; i++) {
        uint32_t v = (uint32_t)i * 2654435761u, back = 0;
        cf_write_all(fds[i], &v, sizeof v);
        cf_read_exact(fds[i], &back, sizeof back);
        good += back == ~v;
        close(fds[i]);
    }
    printf("client: %d of %d echoes right\n", good, N);
    CHECK(good == N);
}

int main(void)
{
    static int fds[N];
    char c;
    cf_start();
    cf_raise_nofile(4096);
    CHECK(pipe(go) == 0);
    int l = cf_listen_spawn(client);
    CHECK(read(go[0], &c, 1) == 1);
    for (int i = 0; i < N; i++)
        fds[i] = cf_accept(l);
    for (int i = 0; i < N; i++) {
        uint32_t v;
        cf_read_exact(fds[i], &v, sizeof v);
        v = ~v;
        cf_write_all(fds[i], &v, sizeof v);
        close(fds[i]);
    }
    printf("server answered %d\n", N);
    cf_join();
    return 0;
}
