/* With a SIGPIPE handler installed, every write that fails with EPIPE delivers one SIGPIPE.
 * usmc-expect: accelerated data */
#include "common.h"

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
    (void)sig;
    sigpipes++;
}

static void server(void *arg)
{
    char buf[8];
    int s = cf_accept(*(int *)arg);
    cf_read_exact(s, buf, 5);
    close(s);
    cf_post();
}

int main(void)
{
    int epipes = 0;
    cf_start();
    cf_on_signal(SIGPIPE, on_sigpipe, 0);
    int l = cf_listen(AF_INET);
    cf_spawn(server, &l);
    int fd = cf_connect(AF_INET, cf_port(l));
    cf_write_all(fd, "hello", 5);
    cf_wait();
    int err = cf_send_until_error(fd, 0, 3);
    printf("writes end with: %s\n", cf_errname(err));
    CHECK(err == EPIPE);
    epipes++;
    for (int i = 0; i < 4; i++) {
        ssize_t r = i % 2 ? write(fd, "x", 1) : send(fd, "x", 1, 0);
        CHECK(r == -1 && errno == EPIPE);
        epipes++;
    }
    printf("EPIPE results: %d, SIGPIPE delivered: %d\n", epipes, (int)sigpipes);
    CHECK(sigpipes == epipes);
    close(fd);
    cf_join();
    return 0;
}
