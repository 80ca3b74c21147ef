/* MSG_DONTWAIT makes one call on a blocking socket nonblocking (EAGAIN when empty) without
 * changing the socket's mode.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    char c;
    cf_write_all(fd, "ab", 2);
    cf_post();
    cf_read_exact(fd, &c, 1);
    close(fd);
}

int main(void)
{
    char buf[8];
    cf_start();
    int s = cf_serve(client);
    EXPECT_ERR("recv MSG_DONTWAIT empty", recv(s, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    struct msghdr msg = {0};
    struct iovec iov = {buf, sizeof buf};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    EXPECT_ERR("recvmsg MSG_DONTWAIT empty", recvmsg(s, &msg, MSG_DONTWAIT), EAGAIN);
    printf("O_NONBLOCK: %d\n", !!(fcntl(s, F_GETFL) & O_NONBLOCK));
    CHECK(!(fcntl(s, F_GETFL) & O_NONBLOCK));
    cf_post();
    cf_wait();
    EXPECT_RET("recv MSG_DONTWAIT with data", recv(s, buf, sizeof buf, MSG_DONTWAIT), 2);
    EXPECT_RET("send MSG_DONTWAIT", send(s, "c", 1, MSG_DONTWAIT), 1);
    EXPECT_RET("blocking read waits for EOF", read(s, buf, sizeof buf), 0);
    close(s);
    cf_join();
    return 0;
}
