/* SO_RCVTIMEO: a read with nothing to read fails with EAGAIN once the timeout passed; the
 * option reads back as set; MSG_WAITALL with a timeout returns the partial count.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    cf_write_all(fd, "0123456789", 10);
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[100];
    struct timeval tv = {0, 100000}, back;
    socklen_t len = sizeof back;
    cf_start();
    int s = cf_serve(client);
    EXPECT_RET("set SO_RCVTIMEO", setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    EXPECT_RET("get SO_RCVTIMEO", getsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &back, &len), 0);
    printf("timeout %ld.%06ld\n", (long)back.tv_sec, (long)back.tv_usec);
    EXPECT_ERR("read with nothing to read", read(s, buf, sizeof buf), EAGAIN);
    EXPECT_ERR("recv with nothing to read", recv(s, buf, sizeof buf, 0), EAGAIN);
    cf_post();
    cf_wait();
    EXPECT_RET("recv MSG_WAITALL 100, 10 available", recv(s, buf, 100, MSG_WAITALL), 10);
    CHECK(memcmp(buf, "0123456789", 10) == 0);
    cf_post();
    EXPECT_RET("read at EOF", read(s, buf, sizeof buf), 0);
    close(s);
    cf_join();
    return 0;
}
