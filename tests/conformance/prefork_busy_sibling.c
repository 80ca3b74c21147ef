/* Prefork with blocking accept(): two workers forked from the listener process accept on the
 * one listening socket. The client opens two connections at once, each round: the first
 * keeps its worker busy for a moment, so the second goes to the other worker, while the
 * client's proposals all went to whichever worker took its link group. That worker must
 * hand the proposal over once it is back in accept(), where it sleeps: no connection may
 * fall back for want of it.
 * usmc-expect: accelerated data
 * usmc-fallbacks: 0 */
#include "common.h"

#include <signal.h>

/* Each worker answers 5 ms after the message came: long enough for the round's second
 * connection to find that worker busy, well within how long a sibling waits for an answer. */
#define DELAY_MS 5

static void client(void *arg)
{
    cf_echo_rounds(*(uint16_t *)arg, 20, 2, 100);
}

int main(void)
{
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    pid_t w[2];
    for (int k = 0; k < 2; k++)
        if ((w[k] = cf_fork()) == 0)
            cf_echo_worker(l, 100, DELAY_MS, -1);
    cf_spawn(client, &port);
    cf_join();
    for (int k = 0; k < 2; k++) {
        kill(w[k], SIGKILL);
        cf_wait_child(w[k]);
    }
    close(l);
    return 0;
}
