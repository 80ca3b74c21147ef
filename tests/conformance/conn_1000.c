/* 1000 connections open at the same time, each with its own echo round trip.
 * usmc-expect: accelerated data */
#include "common.h"

#define N 1000

struct msg {
    uint32_t index, check;
};

static void client(void *arg)
{
    static int fds[N];
    cf_raise_nofile(8192);
    for (int i = 0; i < N; i++)
        fds[i] = cf_connect(AF_INET, *(uint16_t *)arg);
    for (int i = 0; i < N; i++) {
        struct msg m = {(uint32_t)i, (uint32_t)i * 2654435761u};
        cf_write_all(fds[i], &m, sizeof m);
    }
    int good = 0;
    for (int i = 0; i < N; i++) {
        struct msg m;
        cf_read_exact(fds[i], &m, sizeof m);
        good += m.index == (uint32_t)i && m.check == ~((uint32_t)i * 2654435761u);
    }
    printf("client: %d of %d echoes right\n", good, N);
    CHECK(good == N);
    for (int i = 0; i < N; i++)
        close(fds[i]);
}

int main(void)
{
    static int fds[N];
    cf_start();
    cf_raise_nofile(8192);
    int l = cf_listen_spawn(client);
    for (int i = 0; i < N; i++)
        fds[i] = cf_accept(l);
    printf("server accepted %d\n", N);
    for (int i = 0; i < N; i++) {
        struct msg m;
        cf_read_exact(fds[i], &m, sizeof m);
        CHECK(m.check == m.index * 2654435761u);
        m.check = ~m.check;
        cf_write_all(fds[i], &m, sizeof m);
    }
    int eofs = 0;
    for (int i = 0; i < N; i++) {
        char c;
        eofs += read(fds[i], &c, 1) == 0;
        close(fds[i]);
    }
    printf("server saw %d EOFs\n", eofs);
    CHECK(eofs == N);
    cf_join();
    return 0;
}
