/* A signal whose handler runs while a wait still spins rather than sleeps (it comes about 50 µs
 * into the call, the library spins for 2 ms): epoll_wait, poll and a blocking read each return
 * EINTR (the handler is installed without SA_RESTART), as when the handler interrupts the
 * kernel's sleep, round after round.
 * usmc-expect: accelerated
 * usmc-env: USMC_BUSY_POLL_US=2000 */
/* Threads, but not run under TSan: its runtime holds a handler back until the call the
 * signal came in returns, so that a blocking read() is never interrupted (plain TCP hangs too). */
#include "common.h"

#define ROUNDS 20

static volatile sig_atomic_t handled;
static void on_signal(int sig)
{
    (void)sig;
    handled = 1;
}

int main(void)
{
    char c;
    struct cf_signaller sig;

    cf_start();
    cf_on_signal(SIGUSR1, on_signal, 0);
    int s = cf_serve(cf_cued_writer);
    int ep = epoll_create1(0);
    CHECK(ep >= 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 42);
    cf_signaller_start(&sig, pthread_self(), 3, 0);
    const char *names[3] = {"epoll_wait", "poll", "read"};
    for (int which = 0; which < 3; which++) {
        int interrupted = 0, other = 0;
        for (int round = 0; round < ROUNDS; round++) {
            struct epoll_event ev;
            struct pollfd pf = {s, POLLIN, 0};
            handled = 0;
            cf_signal_soon(&sig);
            long r = which == 0 ? epoll_wait(ep, &ev, 1, 300)
                     : which == 1 ? poll(&pf, 1, 300)
                                  : read(s, &c, 1);
            int e = errno;
            cf_signal_taken(&sig);
            usleep(1000);
            if (r < 0 && e == EINTR)
                interrupted++;
            else if (handled)
                other++;
        }
        printf("%s: interrupted with EINTR %d, handled without it %d\n", names[which],
               interrupted, other);
    }
    cf_signaller_stop(&sig);
    cf_cue_close();
    close(s);
    close(ep);
    cf_join();
    return 0;
}
