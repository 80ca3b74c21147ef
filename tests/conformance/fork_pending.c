/* The client writes, forks before the server has accepted, and both processes write on the
 * one connection: the child first, then the parent once the child is gone. The server,
 * accepting only after 300 ms, reads one ordered stream and EOF. Whatever the outcome of
 * the connection (here it falls back: the fork does not wait that long for the accept),
 * the two processes must agree on it, or the stream splits between memory and TCP.
 * usmc-expect: none
 * usmc-fallbacks: 2 */
#include "common.h"

#include <time.h>

static const char stream[] = "parent-before-fork|child|parent-after-child";

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, stream, 19);
    pid_t child = cf_fork();
    if (child == 0) {
        /* Long enough for a pending connection to look at its state again. */
        nanosleep(&(struct timespec){0, 20000000}, NULL);
        cf_write_all(fd, stream + 19, 6);
        _exit(0);
    }
    CHECK(cf_wait_child(child) == 0);
    cf_write_all(fd, stream + 25, sizeof(stream) - 26);
    cf_expect_ok(fd);
}

int main(void)
{
    cf_start();
    cf_answer_ok(cf_serve_late(client, 300), stream, sizeof(stream) - 1);
    cf_join();
    return 0;
}
