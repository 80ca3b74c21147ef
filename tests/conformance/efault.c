/* read into and write from an invalid address fail with EFAULT without consuming or sending
 * anything; the connection stays usable.
 * usmc-expect: accelerated data */
#include "common.h"

#include <sys/mman.h>

static void client(void *arg)
{
    char buf[8];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "payload", 7);
    cf_post();
    cf_wait();
    EXPECT_ERR("read before data", recv(fd, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    cf_post();
    cf_read_exact(fd, buf, 2);
    CHECK(memcmp(buf, "ok", 2) == 0);
    close(fd);
}

int main(void)
{
    char buf[8];
    int avail = -1;
    cf_start();
    /* An inaccessible page that stays reserved, so nothing else can be mapped there. */
    void *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(bad != MAP_FAILED);
    int s = cf_serve(client);
    cf_wait();
    EXPECT_ERR("read into bad address", read(s, bad, 7), EFAULT);
    EXPECT_RET("FIONREAD", ioctl(s, FIONREAD, &avail), 0);
    printf("still queued: %d\n", avail);
    EXPECT_ERR("write from bad address", write(s, bad, 7), EFAULT);
    cf_post();
    cf_wait();
    EXPECT_RET("read", read(s, buf, sizeof buf), 7);
    CHECK(memcmp(buf, "payload", 7) == 0);
    cf_write_all(s, "ok", 2);
    close(s);
    cf_join();
    return 0;
}
