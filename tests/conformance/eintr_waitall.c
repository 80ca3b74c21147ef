/* A read with MSG_WAITALL, its bytes trickling in one at a time, and a handler without
 * SA_RESTART that runs at a random moment of it: the read returns what it has (or EINTR when
 * it has nothing), round after round. The call wakes for each byte and waits again, so many
 * handlers run while it is between two waits rather than asleep; each must still end it.
 * A handler lost there leaves the read waiting for the whole buffer.
 * usmc-expect: accelerated */
/* Threads, but not run under TSan: its runtime holds a handler back until the call the
 * signal came in returns. */
#include "common.h"

#define ROUNDS 100
#define WANT (64 << 10)

static volatile sig_atomic_t handled;

static void on_signal(int sig)
{
    (void)sig;
    handled = 1;
}

/* The peer: a byte every 50 µs until the reader says stop (a byte back). */
static void trickle(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    char c = 'x';

    cf_set_nonblock(fd, true);
    for (;;) {
        if (recv(fd, &c, 1, 0) == 1)
            break;
        if (send(fd, "x", 1, MSG_NOSIGNAL) < 0 && errno != EAGAIN)
            break;
        usleep(50);
    }
    close(fd);
}

int main(void)
{
    static char buf[WANT];
    struct cf_signaller sig;
    int interrupted = 0;

    cf_start();
    cf_on_signal(SIGUSR1, on_signal, 0);
    int s = cf_serve(trickle);
    /* 100 us to 1.1 ms into each read: well inside it, anywhere between its bytes. */
    cf_signaller_start(&sig, pthread_self(), 100, 1000);
    for (int round = 0; round < ROUNDS; round++) {
        handled = 0;
        cf_signal_soon(&sig);
        ssize_t r = recv(s, buf, sizeof buf, MSG_WAITALL);
        int e = errno;
        /* The handler ran before the read returned, and the read gave up early. */
        while (!handled)
            sched_yield();
        if ((r > 0 && r < WANT) || (r < 0 && e == EINTR))
            interrupted++;
        else
            printf("round %d: read returned %zd (%s) for a handler that ran during it\n", round,
                   r, r < 0 ? cf_errname(e) : "no error");
    }
    cf_signaller_stop(&sig);
    printf("%d of %d rounds interrupted\n", interrupted, ROUNDS);
    CHECK(write(s, "s", 1) == 1);
    close(s);
    cf_join();
    return 0;
}
