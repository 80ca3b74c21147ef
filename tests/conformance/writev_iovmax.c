/* writev with IOV_MAX buffers (4 MiB in all) is accepted whole on a blocking socket, one more
 * buffer is EINVAL, and readv with IOV_MAX buffers reads it back intact.
 * usmc-expect: accelerated data */
#include "common.h"

#include <limits.h>

#define SEG 4096

static void client(void *arg)
{
    static struct iovec iov[IOV_MAX + 1];
    char *buf = malloc((size_t)(IOV_MAX + 1) * SEG);
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    CHECK(buf);
    cf_fill(buf, (size_t)IOV_MAX * SEG, 0, 17);
    for (int i = 0; i <= IOV_MAX; i++)
        iov[i] = (struct iovec){buf + (size_t)i * SEG, SEG};
    EXPECT_ERR("writev IOV_MAX+1", writev(fd, iov, IOV_MAX + 1), EINVAL);
    EXPECT_RET("writev IOV_MAX", writev(fd, iov, IOV_MAX), (long)IOV_MAX * SEG);
    close(fd);
    free(buf);
}

int main(void)
{
    static struct iovec iov[IOV_MAX + 1];
    size_t total = (size_t)IOV_MAX * SEG, got = 0;
    char *buf = malloc(total);
    cf_start();
    CHECK(buf);
    printf("IOV_MAX %d\n", IOV_MAX);
    int s = cf_serve(client);
    for (int i = 0; i <= IOV_MAX; i++)
        iov[i] = (struct iovec){buf + (size_t)i * SEG, SEG};
    EXPECT_ERR("readv IOV_MAX+1", readv(s, iov, IOV_MAX + 1), EINVAL);
    while (got < total) {
        /* Whole segments filled so far are skipped; a partly filled one is resumed. */
        int first = (int)(got / SEG);
        struct iovec save = iov[first];
        iov[first].iov_base = buf + got;
        iov[first].iov_len = SEG - got % SEG;
        ssize_t r = readv(s, iov + first, IOV_MAX - first);
        iov[first] = save;
        CHECK(r > 0);
        got += (size_t)r;
    }
    printf("received %zu\n", got);
    CHECK(cf_verify(buf, total, 0, 17));
    EXPECT_RET("readv at EOF", readv(s, iov, IOV_MAX), 0);
    close(s);
    free(buf);
    cf_join();
    return 0;
}
