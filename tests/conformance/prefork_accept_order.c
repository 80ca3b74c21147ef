/* Workers blocking in accept() on one inherited listener take connections in turn: the kernel
 * wakes the one that has waited longest. Three workers, and a client that makes 30 connections
 * one after the other; each worker answers with its number, and each must have served about a
 * third of them.
 * usmc-expect: accelerated */
#include "common.h"

#define WORKERS 3
#define CONNECTIONS 30

static void worker(int l, char id)
{
    for (;;) {
        char c;
        int s = accept(l, NULL, NULL);
        if (s < 0)
            _exit(1);
        cf_read_exact(s, &c, 1);
        cf_write_all(s, &id, 1);
        close(s);
    }
}

int main(void)
{
    pid_t w[WORKERS];
    int served[WORKERS] = {0};

    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    for (int i = 0; i < WORKERS; i++) {
        w[i] = cf_fork();
        if (w[i] == 0)
            worker(l, (char)i);
    }
    for (int i = 0; i < WORKERS; i++)
        cf_wait_sleeping(w[i], w[i]);
    for (int k = 0; k < CONNECTIONS; k++) {
        char id;
        int c = cf_connect(AF_INET, port);
        cf_write_all(c, "x", 1);
        cf_read_exact(c, &id, 1);
        close(c);
        CHECK(id >= 0 && id < WORKERS);
        served[(int)id]++;
        /* The worker goes back to accept() before the next connection comes. */
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    for (int i = 0; i < WORKERS; i++) {
        printf("worker %d served at least %d: %s\n", i, CONNECTIONS / WORKERS / 2,
               served[i] >= CONNECTIONS / WORKERS / 2 ? "yes" : "no");
        kill(w[i], SIGKILL);
        cf_wait_child(w[i]);
    }
    close(l);
    return 0;
}
