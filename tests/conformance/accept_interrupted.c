/* A blocking accept() on a listener the process shared by forking (its peer process is that
 * fork) ends as the kernel's does: EAGAIN when SO_RCVTIMEO passes, whichever process set it;
 * EINTR when a signal's handler lacks SA_RESTART; with SA_RESTART it goes on waiting and
 * returns the connection that comes next, unless a timeout is set, which makes it EINTR again;
 * and, restarted, it starts from the descriptor again, which a handler may have replaced by a
 * socket that does not listen (as php-fpm's workers stop): EINVAL.
 * usmc-expect: accelerated */
#include "common.h"

static volatile sig_atomic_t handled;
static int listener;

static void on_usr1(int sig)
{
    (void)sig;
    handled++;
    cf_post();
}

static int placeholder;

static void on_usr1_replace(int sig)
{
    (void)sig;
    dup2(placeholder, listener);
    handled++;
    cf_post();
}

static void report_accept(const char *label, int l)
{
    int s = accept(l, NULL, NULL);
    cf_report(label, s < 0 ? -1 : 0, errno);
    if (s >= 0)
        close(s);
}

static void set_timeout(int fd, long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
}

/* Sets the shared listener's timeout; then interrupts the parent's accept() when told to,
 * twice; the second time connects after the handler ran, once the accept() sleeps again; a
 * third and a fourth time interrupts it once more. */
static void peer(void *arg)
{
    uint16_t port = *(uint16_t *)arg;

    set_timeout(listener, 100);
    cf_post();
    cf_wait();
    cf_interrupt_parent();
    cf_wait();
    cf_interrupt_parent();
    cf_wait_sleeping(getppid(), getppid());
    int fd = cf_connect(AF_INET, port);
    cf_wait();
    close(fd);
    cf_interrupt_parent();
    cf_wait();
    cf_interrupt_parent();
}

int main(void)
{
    cf_start();
    int l = listener = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    cf_spawn(peer, &port);

    cf_wait();
    report_accept("accept past SO_RCVTIMEO set by the peer", l);
    set_timeout(l, 100);
    report_accept("accept past SO_RCVTIMEO", l);
    set_timeout(l, 0);

    cf_on_signal(SIGUSR1, on_usr1, 0);
    cf_post();
    report_accept("accept, handler without SA_RESTART", l);

    cf_on_signal(SIGUSR1, on_usr1, SA_RESTART);
    cf_post();
    int s = accept(l, NULL, NULL);
    printf("accept, handler with SA_RESTART: %s\n", s >= 0 ? "a connection" : cf_errname(errno));
    CHECK(s >= 0);
    close(s);

    set_timeout(l, 10000);
    cf_post();
    report_accept("accept, SA_RESTART and SO_RCVTIMEO", l);

    set_timeout(l, 0);
    placeholder = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(placeholder >= 0);
    cf_on_signal(SIGUSR1, on_usr1_replace, SA_RESTART);
    cf_post();
    report_accept("accept, SA_RESTART handler replaced the listener", l);
    close(placeholder);
    printf("handler ran %d time(s)\n", (int)handled);
    CHECK(handled == 4);
    cf_join();
    close(l);
    return 0;
}
