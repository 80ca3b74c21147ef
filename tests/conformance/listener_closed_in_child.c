/* A child that closes its copy of an inherited listener leaves it registered: the parent, which
 * still holds it, accepts accelerated connections afterwards (whether a listener lives on in
 * another process is read from /proc/net/tcp).
 * usmc-expect: accelerated data */
#include "common.h"

int main(void)
{
    cf_start();
    int l = cf_listen(AF_INET);
    pid_t c = cf_fork();
    if (c == 0) {
        close(l);
        _exit(0);
    }
    CHECK(cf_wait_child(c) == 0);
    cf_echo_once(l);
    close(l);
    return 0;
}
