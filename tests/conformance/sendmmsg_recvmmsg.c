/* sendmmsg and recvmmsg on a stream: three messages sent are one byte stream, and recvmmsg
 * fills its buffers in order from it.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    static char buf[600];
    struct iovec iov[3] = {{buf, 100}, {buf + 100, 200}, {buf + 300, 300}};
    struct mmsghdr m[3];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    memset(m, 0, sizeof m);
    for (int i = 0; i < 3; i++) {
        m[i].msg_hdr.msg_iov = &iov[i];
        m[i].msg_hdr.msg_iovlen = 1;
    }
    cf_fill(buf, sizeof buf, 0, 67);
    EXPECT_RET("sendmmsg", sendmmsg(fd, m, 3, 0), 3);
    printf("sent %u %u %u\n", m[0].msg_len, m[1].msg_len, m[2].msg_len);
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    static char buf[600];
    struct iovec iov[4] = {{buf, 150}, {buf + 150, 150}, {buf + 300, 150}, {buf + 450, 150}};
    struct mmsghdr m[4];
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    memset(m, 0, sizeof m);
    for (int i = 0; i < 4; i++) {
        m[i].msg_hdr.msg_iov = &iov[i];
        m[i].msg_hdr.msg_iovlen = 1;
    }
    EXPECT_RET("recvmmsg", recvmmsg(s, m, 4, MSG_DONTWAIT, NULL), 4);
    printf("received %u %u %u %u\n", m[0].msg_len, m[1].msg_len, m[2].msg_len, m[3].msg_len);
    CHECK(cf_verify(buf, 600, 0, 67));
    EXPECT_ERR("recvmmsg when empty", recvmmsg(s, m, 4, MSG_DONTWAIT, NULL), EAGAIN);
    cf_post();
    close(s);
    cf_join();
    return 0;
}
