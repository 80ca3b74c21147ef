/* dup2 onto a chosen number and F_DUPFD_CLOEXEC: every copy shares one connection (reads
 * consume from the same stream), and the peer sees EOF only after the last close.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char buf[16];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "aabbcc", 6);
    cf_read_exact(fd, buf, 6);
    printf("client read %.6s\n", buf);
    CHECK(memcmp(buf, "xxyyzz", 6) == 0);
    for (int i = 0; i < 2; i++) {
        cf_wait();
        EXPECT_ERR("read while a copy is open", recv(fd, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
        cf_post();
    }
    EXPECT_RET("read after the last close", read(fd, buf, sizeof buf), 0);
    close(fd);
}

int main(void)
{
    char buf[2];
    cf_start();
    int s = cf_serve(client);
    EXPECT_RET("dup2 to 100", dup2(s, 100), 100);
    int c = fcntl(s, F_DUPFD_CLOEXEC, 200);
    CHECK(c >= 200);
    printf("F_DUPFD_CLOEXEC copy has FD_CLOEXEC: %d\n", fcntl(c, F_GETFD) & FD_CLOEXEC);
    int fds[3] = {s, 100, c};
    const char *out[3] = {"xx", "yy", "zz"};
    for (int i = 0; i < 3; i++) {
        cf_read_exact(fds[i], buf, 2);
        printf("copy %d read %.2s\n", i, buf);
        cf_write_all(fds[i], out[i], 2);
    }
    EXPECT_RET("close original", close(s), 0);
    cf_post();
    cf_wait();
    EXPECT_RET("close dup2 copy", close(100), 0);
    cf_post();
    cf_wait();
    EXPECT_RET("close last copy", close(c), 0);
    cf_join();
    return 0;
}
