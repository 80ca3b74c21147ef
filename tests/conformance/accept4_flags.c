/* accept4(SOCK_NONBLOCK|SOCK_CLOEXEC) sets both flags on the new socket and plain accept sets
 * neither; the nonblocking one behaves so (EAGAIN) and both carry data.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    for (int i = 0; i < 2; i++) {
        int fd = cf_connect(AF_INET, *(uint16_t *)arg);
        cf_wait();
        cf_write_all(fd, "hi", 2);
        close(fd);
    }
}

static void show_flags(const char *what, int fd)
{
    printf("%s: O_NONBLOCK %d FD_CLOEXEC %d\n", what, !!(fcntl(fd, F_GETFL) & O_NONBLOCK),
           !!(fcntl(fd, F_GETFD) & FD_CLOEXEC));
}

int main(void)
{
    char buf[4];
    cf_start();
    int l = cf_listen_spawn(client);
    int a = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    CHECK(a >= 0);
    show_flags("accept4", a);
    CHECK((fcntl(a, F_GETFL) & O_NONBLOCK) && (fcntl(a, F_GETFD) & FD_CLOEXEC));
    EXPECT_ERR("read before data", read(a, buf, sizeof buf), EAGAIN);
    cf_post();
    struct pollfd p = {.fd = a, .events = POLLIN};
    CHECK(poll(&p, 1, -1) == 1);
    EXPECT_RET("read", read(a, buf, sizeof buf), 2);
    close(a);
    int b = accept(l, NULL, NULL);
    CHECK(b >= 0);
    show_flags("accept", b);
    cf_post();
    EXPECT_RET("read", cf_read_full(b, buf, sizeof buf), 2);
    close(b);
    cf_join();
    return 0;
}
