/* A listener inherited by a child, closed by the parent first and by the child last: the child
 * takes the port out of the registry, and the parent, which listens again on another port,
 * still serves its next client through shared memory.
 * usmc-expect: accelerated data
 * usmc-accelerated: 2 */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "hi", 2);
    cf_expect_ok(fd);
}

int main(void)
{
    cf_start();
    int old = cf_listen(AF_INET), go[2];
    char c;
    CHECK(pipe(go) == 0);
    pid_t child = cf_fork();
    if (child == 0) {
        CHECK(read(go[0], &c, 1) == 1);
        close(old);
        _exit(0);
    }
    close(old);
    CHECK(write(go[1], "x", 1) == 1); /* the child closes its copy, the last */
    CHECK(cf_wait_child(child) == 0);
    int s = cf_serve(client);
    cf_answer_ok(s, "hi", 2);
    close(s);
    cf_join();
    return 0;
}
