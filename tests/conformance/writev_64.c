/* writev and readv with 64 buffers of uneven sizes on both sides: byte order across buffer
 * boundaries is preserved and the totals add up.
 * usmc-expect: accelerated data */
#include "common.h"

#define NIOV 64

static size_t layout(struct iovec *iov, char *base, size_t mul, size_t add)
{
    size_t total = 0;
    for (int i = 0; i < NIOV; i++) {
        iov[i].iov_base = base + total;
        iov[i].iov_len = (size_t)i * mul % 997 + add;
        total += iov[i].iov_len;
    }
    return total;
}

static void client(void *arg)
{
    static char buf[NIOV * 1100];
    struct iovec iov[NIOV];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    size_t total = layout(iov, buf, 37, 1);
    cf_fill(buf, total, 0, 13);
    EXPECT_RET("writev", writev(fd, iov, NIOV), total);
    close(fd);
}

int main(void)
{
    static char buf[NIOV * 1100];
    struct iovec iov[NIOV];
    size_t got = 0;
    cf_start();
    int s = cf_serve(client);
    size_t room = layout(iov, buf, 53, 3);
    for (;;) {
        /* Skip the buffers already filled by earlier partial reads. */
        struct iovec rest[NIOV];
        int n = 0;
        size_t skip = got;
        for (int i = 0; i < NIOV; i++) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            rest[n].iov_base = (char *)iov[i].iov_base + skip;
            rest[n].iov_len = iov[i].iov_len - skip;
            skip = 0;
            n++;
        }
        CHECK(n > 0);
        ssize_t r = readv(s, rest, n);
        CHECK(r >= 0);
        if (r == 0)
            break;
        got += (size_t)r;
    }
    printf("readv room %zu, received %zu\n", room, got);
    CHECK(cf_verify(buf, got, 0, 13));
    close(s);
    cf_join();
    return 0;
}
