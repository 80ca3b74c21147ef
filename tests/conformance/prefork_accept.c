/* Prefork: two workers forked from the listener process accept on the one listening socket,
 * as nginx's do. The first worker alone serves the first connection; then both accept. Every
 * round trip must complete with the right bytes: no connection may wait for a proposal that
 * went to the other worker.
 * usmc-expect: accelerated data */
#include "common.h"

#include <signal.h>

#define CONNS 40
#define MSG 100

static void client(void *arg)
{
    uint16_t port = *(uint16_t *)arg;
    int ok = 0;

    for (int i = 0; i < CONNS; i++) {
        unsigned char buf[MSG];
        int fd = cf_connect(AF_INET, port);
        cf_fill(buf, MSG, 0, (unsigned)i);
        cf_write_all(fd, buf, MSG);
        memset(buf, 0, MSG);
        cf_read_exact(fd, buf, MSG);
        ok += cf_verify(buf, MSG, 0, (unsigned)i);
        close(fd);
    }
    printf("client: %d of %d round trips intact\n", ok, CONNS);
    CHECK(ok == CONNS);
}

/* Echoes one message per connection, forever; gate, when open, says that the first
 * connection was served. */
static void worker(int l, int gate)
{
    for (;;) {
        unsigned char buf[MSG];
        int s = accept(l, NULL, NULL);
        if (s < 0)
            _exit(1);
        cf_read_exact(s, buf, MSG);
        cf_write_all(s, buf, MSG);
        close(s);
        if (gate >= 0) {
            close(gate);
            gate = -1;
        }
    }
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
        worker(l, gate[1]);
    }
    close(gate[1]);
    pid_t w2 = cf_fork();
    if (w2 == 0) {
        char c;
        /* EOF once the first worker served a connection */
        while (read(gate[0], &c, 1) > 0)
            ;
        close(gate[0]);
        worker(l, -1);
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
