/* The queue ioctls: SIOCINQ (FIONREAD) counts what the reader has unread, SIOCOUTQ (TIOCOUTQ)
 * what the writer's peer has not taken yet and SIOCOUTQNSD what is not even sent: both drain
 * to 0 once the reader holds everything, and show bytes while its buffer is full.
 * usmc-expect: accelerated data */
#include "common.h"

#include <linux/sockios.h>

static int queued(int fd, unsigned long req)
{
    int n = -1;
    if (ioctl(fd, req, &n) < 0)
        FAIL("ioctl %#lx: %s", req, cf_errname(errno));
    return n;
}

/* Waits up to 2 s for both of the writer's queues to be empty (TCP acknowledges late). */
static void drained(int fd, const char *when)
{
    int i = 0;
    while (i++ < 200 && (queued(fd, SIOCOUTQ) || queued(fd, SIOCOUTQNSD)))
        usleep(10000);
    printf("%s: SIOCOUTQ %d, SIOCOUTQNSD %d, TIOCOUTQ %d\n", when, queued(fd, SIOCOUTQ),
           queued(fd, SIOCOUTQNSD), queued(fd, TIOCOUTQ));
}

static void client(void *arg)
{
    char buf[1000];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_fill(buf, sizeof buf, 0, 7);
    cf_write_all(fd, buf, sizeof buf);
    drained(fd, "1000 bytes taken");
    cf_post();
    cf_wait();
    uint64_t filled = cf_fill_until_full(fd, 1000, 7);
    int outq = queued(fd, SIOCOUTQ), nsd = queued(fd, SIOCOUTQNSD);
    printf("full: SIOCOUTQ > 0: %d, SIOCOUTQNSD > 0: %d, not more: %d\n", outq > 0, nsd > 0,
           nsd <= outq);
    cf_post_u64(filled);
    cf_wait();
    drained(fd, "read to the end");
    close(fd);
}

int main(void)
{
    char buf[600];
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    printf("SIOCINQ %d, FIONREAD %d\n", queued(s, SIOCINQ), queued(s, FIONREAD));
    cf_read_exact(s, buf, 400);
    CHECK(cf_verify(buf, 400, 0, 7));
    printf("after reading 400: SIOCINQ %d\n", queued(s, SIOCINQ));
    cf_post();
    uint64_t filled = cf_wait_u64();
    printf("full: SIOCINQ > 0: %d\n", queued(s, SIOCINQ) > 0);
    cf_read_exact(s, buf, 600);
    CHECK(cf_verify(buf, 600, 400, 7));
    static char rest[65536];
    for (uint64_t off = 1000; off < filled;) {
        size_t n = filled - off < sizeof rest ? (size_t)(filled - off) : sizeof rest;
        cf_read_exact(s, rest, n);
        CHECK(cf_verify(rest, n, off, 7));
        off += n;
    }
    printf("SIOCINQ at the end: %d\n", queued(s, SIOCINQ));
    cf_post();
    cf_join();
    close(s);
    return 0;
}
