/* After fork both processes hold the connection: the child reads and writes first, then the
 * parent continues the same stream; the peer sees one ordered stream and EOF only after both
 * closed.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char buf[32];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "to-child|to-parent", 18);
    size_t n = cf_read_full(fd, buf, sizeof buf);
    printf("client read until EOF: %.*s\n", (int)n, buf);
    CHECK(n == 17 && memcmp(buf, "from-child|parent", 17) == 0);
    close(fd);
}

int main(void)
{
    char buf[16];
    cf_start();
    int s = cf_serve(client);
    pid_t child = cf_fork();
    if (child == 0) {
        char part[9];
        cf_read_exact(s, part, 9);
        if (memcmp(part, "to-child|", 9) != 0)
            _exit(1);
        cf_write_all(s, "from-child|", 11);
        close(s);
        _exit(0);
    }
    printf("child exit status: %d\n", cf_wait_child(child));
    cf_read_exact(s, buf, 9);
    printf("parent read %.9s\n", buf);
    CHECK(memcmp(buf, "to-parent", 9) == 0);
    cf_write_all(s, "parent", 6);
    close(s);
    cf_join();
    return 0;
}
