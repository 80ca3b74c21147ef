/* Zero-length write, send, writev and sendmsg return 0 and put nothing on the stream: the peer
 * still sees no data, then exactly the one real byte.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char c = 'x';
    struct iovec iov[2] = {{&c, 0}, {&c, 0}};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    EXPECT_RET("write 0", write(fd, &c, 0), 0);
    EXPECT_RET("send 0", send(fd, &c, 0, 0), 0);
    EXPECT_RET("writev 0", writev(fd, iov, 2), 0);
    EXPECT_RET("sendmsg 0", sendmsg(fd, &msg, 0), 0);
    EXPECT_RET("write NULL 0", write(fd, NULL, 0), 0);
    cf_post();
    cf_wait();
    EXPECT_RET("write 1", write(fd, &c, 1), 1);
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[16];
    int avail = -1;
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    EXPECT_ERR("read after empty writes", recv(s, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    EXPECT_RET("FIONREAD", ioctl(s, FIONREAD, &avail), 0);
    printf("queued: %d\n", avail);
    CHECK(avail == 0);
    cf_post();
    cf_wait();
    EXPECT_RET("read", read(s, buf, sizeof buf), 1);
    CHECK(buf[0] == 'x');
    cf_post();
    EXPECT_RET("read at EOF", read(s, buf, sizeof buf), 0);
    close(s);
    cf_join();
    return 0;
}
