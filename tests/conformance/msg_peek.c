/* MSG_PEEK returns queued bytes without consuming them: peeking twice sees the same bytes, a
 * shorter read then consumes a prefix, and a peek sees the rest.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_send_pattern(fd, 1000, 1000, 9);
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    char a[1000], b[1000];
    int avail = -1;
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    EXPECT_RET("peek 100", recv(s, a, 100, MSG_PEEK), 100);
    EXPECT_RET("peek 100 again", recv(s, b, 100, MSG_PEEK), 100);
    CHECK(memcmp(a, b, 100) == 0 && cf_verify(a, 100, 0, 9));
    EXPECT_RET("FIONREAD after peeks", ioctl(s, FIONREAD, &avail), 0);
    printf("queued: %d\n", avail);
    CHECK(avail == 1000);
    EXPECT_RET("read 300", read(s, a, 300), 300);
    CHECK(cf_verify(a, 300, 0, 9));
    EXPECT_RET("peek all", recv(s, b, sizeof b, MSG_PEEK), 700);
    CHECK(cf_verify(b, 700, 300, 9));
    EXPECT_RET("read all", recv(s, a, sizeof a, 0), 700);
    CHECK(memcmp(a, b, 700) == 0);
    EXPECT_ERR("peek when empty", recv(s, a, 1, MSG_PEEK | MSG_DONTWAIT), EAGAIN);
    cf_post();
    EXPECT_RET("peek at EOF", recv(s, a, 1, MSG_PEEK), 0);
    close(s);
    cf_join();
    return 0;
}
