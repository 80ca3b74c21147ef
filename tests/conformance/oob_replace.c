/* A newer urgent byte replaces an unread one, as tcp_check_urg() has it: the older byte
 * becomes normal data when the reader has not reached it, and is dropped when the reader
 * stands at it; back-to-back urgent bytes the reader stands at drop one after the other.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    /* Before the reader: "xA" then "yB", A and B urgent. */
    cf_write_all(fd, "x", 1);
    EXPECT_RET("urgent A", send(fd, "A", 1, MSG_OOB), 1);
    cf_write_all(fd, "y", 1);
    EXPECT_RET("urgent B", send(fd, "B", 1, MSG_OOB), 1);
    cf_post();
    cf_wait();
    /* The reader stands at C when D comes. */
    EXPECT_RET("urgent C", send(fd, "C", 1, MSG_OOB), 1);
    cf_post();
    cf_wait();
    EXPECT_RET("urgent D", send(fd, "D", 1, MSG_OOB), 1);
    cf_write_all(fd, "z", 1);
    cf_post();
    cf_wait();
    /* E, F and G back to back, the reader at E. */
    EXPECT_RET("urgent E", send(fd, "E", 1, MSG_OOB), 1);
    EXPECT_RET("urgent F", send(fd, "F", 1, MSG_OOB), 1);
    EXPECT_RET("urgent G", send(fd, "G", 1, MSG_OOB), 1);
    cf_write_all(fd, "w", 1);
    cf_post();
    cf_wait();
    close(fd);
}

static void read_some(int s, const char *label)
{
    char buf[16];
    long n = read(s, buf, sizeof buf);
    if (n < 0)
        cf_report(label, n, errno);
    else
        printf("%s: '%.*s'\n", label, (int)n, buf);
}

int main(void)
{
    cf_start();
    int s = cf_serve(client);
    cf_set_nonblock(s, true);
    cf_wait();
    cf_show_urgent(s, "A then B");
    read_some(s, "read");
    cf_recv_oob(s, "urgent", 0);
    read_some(s, "read");
    cf_post();
    cf_wait();
    cf_show_urgent(s, "at C");
    cf_post();
    cf_wait();
    cf_show_urgent(s, "D came");
    cf_recv_oob(s, "urgent", 0);
    read_some(s, "read");
    read_some(s, "read");
    cf_post();
    cf_wait();
    cf_show_urgent(s, "E, F, G came");
    cf_recv_oob(s, "urgent", 0);
    read_some(s, "read");
    read_some(s, "read");
    cf_post();
    close(s);
    cf_join();
    return 0;
}
