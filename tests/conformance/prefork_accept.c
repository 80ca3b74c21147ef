/* Prefork: two workers forked from the listener process accept on the one listening socket,
 * as nginx's do. The first worker alone serves the first connection; then both accept. Every
 * round trip must complete with the right bytes: no connection may wait for a proposal that
 * went to the other worker.
 * usmc-expect: accelerated data */
#include "common.h"

#include <signal.h>

static void client(void *arg)
{
    cf_echo_rounds(*(uint16_t *)arg, 40, 1, 100);
}

int main(void)
{
    int gate[2];

    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    CHECK(pipe(gate) == 0);
    pid_t w1 = cf_fork();
    if (w1 == 0) {
        close(gate[0]);
        cf_echo_worker(l, 100, 0, gate[1]);
    }
    close(gate[1]);
    pid_t w2 = cf_fork();
    if (w2 == 0) {
        char c;
        /* EOF once the first worker served a connection */
        while (read(gate[0], &c, 1) > 0)
            ;
        close(gate[0]);
        cf_echo_worker(l, 100, 0, -1);
    }
    close(gate[0]);
    cf_spawn(client, &port);
    cf_join();
    kill(w1, SIGKILL);
    kill(w2, SIGKILL);
    cf_wait_child(w1);
    cf_wait_child(w2);
    close(l);
    return 0;
}
