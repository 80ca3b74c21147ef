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
#include <time.h>

#define ROUNDS 20
#define MSG 100

static void client(void *arg)
{
    uint16_t port = *(uint16_t *)arg;
    int ok = 0;

    for (int i = 0; i < ROUNDS; i++) {
        unsigned char buf[2][MSG];
        int fd[2];
        for (int k = 0; k < 2; k++) {
            fd[k] = cf_connect(AF_INET, port);
            cf_fill(buf[k], MSG, 0, (unsigned)(2 * i + k));
            cf_write_all(fd[k], buf[k], MSG);
        }
        for (int k = 0; k < 2; k++) {
            memset(buf[k], 0, MSG);
            cf_read_exact(fd[k], buf[k], MSG);
            ok += cf_verify(buf[k], MSG, 0, (unsigned)(2 * i + k));
            close(fd[k]);
        }
    }
    printf("client: %d of %d round trips intact\n", ok, 2 * ROUNDS);
    CHECK(ok == 2 * ROUNDS);
}

/* Echoes one message per connection, forever, 5 ms after it came: long enough for the
 * round's second connection to find this worker busy, well within how long a sibling
 * waits for an answer. */
static void worker(int l)
{
    for (;;) {
        unsigned char buf[MSG];
        int s = accept(l, NULL, NULL);
        if (s < 0)
            _exit(1);
        cf_read_exact(s, buf, MSG);
        nanosleep(&(struct timespec){0, 5000000}, NULL);
        cf_write_all(s, buf, MSG);
        close(s);
    }
}

int main(void)
{
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    pid_t w[2];
    for (int k = 0; k < 2; k++)
        if ((w[k] = cf_fork()) == 0)
            worker(l);
    cf_spawn(client, &port);
    cf_join();
    for (int k = 0; k < 2; k++) {
        kill(w[k], SIGKILL);
        cf_wait_child(w[k]);
    }
    close(l);
    return 0;
}
