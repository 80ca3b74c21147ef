/* A reader that closes with data unread resets the connection, and the writer learns it as
 * TCP's sk_stream_error() tells it: its next send fails with ECONNRESET, the ones after with
 * EPIPE. Here the writer is blocked sending more than both buffers (shrunk after connecting)
 * hold when the reader, having read 1 KB of it, closes.
 * usmc-expect: accelerated data */
#include "common.h"

enum { TOTAL = 160 << 10 };

static void client(void *arg)
{
    static char buf[TOTAL];
    int small = 1024, err = 0;
    size_t sent = 0;
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    cf_ignore_sigpipe();
    cf_fill(buf, sizeof buf, 0, 3);
    cf_wait();
    while (sent < TOTAL) {
        long n = send(fd, buf + sent, TOTAL - sent, 0);
        if (n < 0) {
            err = errno;
            break;
        }
        sent += (size_t)n;
    }
    printf("sent everything: %d, first error: %s\n", sent == TOTAL, cf_errname(err));
    EXPECT_ERR("next send", send(fd, buf, 1, 0), EPIPE);
    close(fd);
}

int main(void)
{
    cf_start();
    cf_read_some_then_reset(client, 3);
    return 0;
}
