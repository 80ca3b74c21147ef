/* sendmsg and recvmsg with many iovecs: contents preserved, msg_flags 0, no source address
 * reported for a connected stream, MSG_PEEK through recvmsg.
 * usmc-expect: accelerated data */
#include "common.h"

#define NIOV 100
#define SEG 333

static void client(void *arg)
{
    static char buf[NIOV * SEG];
    struct iovec iov[NIOV];
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = NIOV};
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_fill(buf, sizeof buf, 0, 19);
    for (int i = 0; i < NIOV; i++)
        iov[i] = (struct iovec){buf + i * SEG, SEG};
    EXPECT_RET("sendmsg", sendmsg(fd, &msg, 0), NIOV * SEG);
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    static char buf[NIOV * SEG];
    struct iovec iov[NIOV];
    struct sockaddr_storage from;
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = NIOV};
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    for (int i = 0; i < NIOV; i++)
        iov[i] = (struct iovec){buf + i * (SEG / 3), SEG / 3};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof from;
    msg.msg_flags = -1;
    EXPECT_RET("recvmsg MSG_PEEK", recvmsg(s, &msg, MSG_PEEK), NIOV * (SEG / 3));
    printf("msg_flags %d, msg_namelen %u\n", msg.msg_flags, (unsigned)msg.msg_namelen);
    CHECK(cf_verify(buf, NIOV * (SEG / 3), 0, 19));
    memset(buf, 0, sizeof buf);
    msg.msg_name = NULL;
    msg.msg_namelen = 0;
    size_t got = 0;
    while (got < sizeof buf) {
        iov[0] = (struct iovec){buf + got, sizeof buf - got < 1000 ? sizeof buf - got : 1000};
        for (int i = 1; i < NIOV; i++)
            iov[i] = (struct iovec){(char *)iov[i - 1].iov_base + iov[i - 1].iov_len, 0};
        msg.msg_iovlen = NIOV;
        ssize_t r = recvmsg(s, &msg, 0);
        CHECK(r > 0 && msg.msg_flags == 0);
        got += (size_t)r;
    }
    printf("received %zu\n", got);
    CHECK(cf_verify(buf, got, 0, 19));
    cf_post();
    iov[0] = (struct iovec){buf, 10};
    msg.msg_iovlen = 1;
    EXPECT_RET("recvmsg at EOF", recvmsg(s, &msg, 0), 0);
    close(s);
    cf_join();
    return 0;
}
