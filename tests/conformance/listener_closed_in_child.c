/* A child that closes its copy of an inherited listener leaves it registered: the parent, which
 * still holds it, accepts accelerated connections afterwards. (Whether a listener lives on is
 * read from /proc/net/tcp, as php-fpm's workers need it inside a signal handler.)
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    cf_echo_rounds(*(uint16_t *)arg, 1, 1, 100);
}

int main(void)
{
    unsigned char buf[100];

    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    pid_t c = cf_fork();
    if (c == 0) {
        close(l);
        _exit(0);
    }
    CHECK(cf_wait_child(c) == 0);
    cf_spawn(client, &port);
    int s = cf_accept(l);
    cf_read_exact(s, buf, sizeof buf);
    cf_write_all(s, buf, sizeof buf);
    close(s);
    cf_join();
    close(l);
    return 0;
}
