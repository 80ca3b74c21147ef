/* Reads smaller than what is queued return exactly the requested size; a read larger than
 * what is queued returns what is there without waiting for more.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char buf[1000];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_fill(buf, sizeof buf, 0, 3);
    cf_write_all(fd, buf, sizeof buf);
    cf_post();
    cf_wait();
    cf_fill(buf, 300, 1000, 3);
    cf_write_all(fd, buf, 300);
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[4096];
    int reads = 0;
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    for (size_t off = 0; off < 1000; off += 100, reads++) {
        ssize_t r = read(s, buf, 100);
        if (r != 100)
            FAIL("read %d returned %zd", reads, r);
        CHECK(cf_verify(buf, 100, off, 3));
    }
    printf("%d reads of 100 bytes\n", reads);
    cf_post();
    cf_wait();
    long n = EXPECT_RET("read with 4096-byte buffer", read(s, buf, sizeof buf), 300);
    CHECK(cf_verify(buf, (size_t)n, 1000, 3));
    EXPECT_ERR("recv when drained", recv(s, buf, 1, MSG_DONTWAIT), EAGAIN);
    cf_post();
    EXPECT_RET("read at EOF", read(s, buf, sizeof buf), 0);
    close(s);
    cf_join();
    return 0;
}
