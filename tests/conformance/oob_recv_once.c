/* recv(MSG_OOB) returns the urgent byte once: EINVAL before any urgent data, a peek leaves
 * it, recvmsg() flags it MSG_OOB (with MSG_TRUNC for no room), and once read it is EINVAL
 * again; POLLPRI ends with the read, while the mark stays where it was.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "x", 1);
    cf_wait();
    EXPECT_RET("urgent send", send(fd, "U", 1, MSG_OOB), 1);
    cf_write_all(fd, "y", 1);
    cf_post();
    cf_wait();
    close(fd);
}

static void oob_msg(int s, const char *label, size_t room)
{
    char c = 0;
    struct iovec iov = {&c, room};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    long r = recvmsg(s, &m, MSG_OOB | MSG_PEEK);
    int e = errno;
    cf_report(label, r, e);
    printf("%s flags:%s%s\n", label, m.msg_flags & MSG_OOB ? " MSG_OOB" : "",
           m.msg_flags & MSG_TRUNC ? " MSG_TRUNC" : "");
}

int main(void)
{
    char buf[16];
    cf_start();
    int s = cf_serve(client);
    cf_recv_oob(s, "before any", 0);
    cf_post();
    cf_wait();
    cf_show_urgent(s, "arrived");
    cf_recv_oob(s, "peek", MSG_PEEK);
    oob_msg(s, "recvmsg", 1);
    oob_msg(s, "recvmsg without room", 0);
    cf_recv_oob(s, "read", 0);
    cf_recv_oob(s, "again", 0);
    cf_show_urgent(s, "after it");
    long n = EXPECT_RET("read", read(s, buf, sizeof buf), 1);
    printf("read '%.*s'\n", (int)n, buf);
    cf_show_urgent(s, "at the mark");
    cf_recv_oob(s, "at the mark", 0);
    n = EXPECT_RET("read", read(s, buf, sizeof buf), 1);
    printf("read '%.*s'\n", (int)n, buf);
    cf_post();
    close(s);
    cf_join();
    return 0;
}
