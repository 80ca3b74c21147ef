/* As close_unread_reset_send, the writer sending a file with sendfile(): a reset while it
 * waits for room ends the call short, and the next one fails with ECONNRESET, then EPIPE.
 * usmc-expect: accelerated data */
#include "common.h"

#include <sys/sendfile.h>

enum { TOTAL = 160 << 10 };

static void client(void *arg)
{
    static char buf[TOTAL];
    char path[] = "/tmp/usmc-conformance-file.XXXXXX";
    int small = 1024, err = 0;
    off_t off = 0;
    int f = mkstemp(path);
    CHECK(f >= 0);
    unlink(path);
    cf_fill(buf, sizeof buf, 0, 3);
    cf_write_all(f, buf, sizeof buf);
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    cf_ignore_sigpipe();
    cf_wait();
    while (off < TOTAL) {
        if (sendfile(fd, f, &off, TOTAL - (size_t)off) < 0) {
            err = errno;
            break;
        }
    }
    printf("sent everything: %d, first error: %s\n", off == TOTAL, cf_errname(err));
    EXPECT_ERR("next sendfile", sendfile(fd, f, &off, 1), EPIPE);
    close(f);
    close(fd);
}

int main(void)
{
    cf_start();
    cf_read_some_then_reset(client, 3);
    return 0;
}
