/* The last byte of an urgent send is the urgent byte and the mark: a read stops there,
 * SIOCATMARK says when the reader stands at it, FIONREAD counts the bytes before it, and a
 * read that starts at it skips the byte (SO_OOBINLINE is off), which is then gone.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, "ab", 2);
    EXPECT_RET("urgent send", send(fd, "cd", 2, MSG_OOB), 2);
    cf_write_all(fd, "ef", 2);
    cf_post();
    cf_wait();
    close(fd);
}

int main(void)
{
    char buf[16];
    cf_start();
    int s = cf_serve(client);
    cf_wait();
    cf_show_urgent(s, "arrived");
    long n = EXPECT_RET("read", read(s, buf, sizeof buf), 3);
    printf("read '%.*s'\n", (int)n, buf);
    cf_show_urgent(s, "after the read");
    n = EXPECT_RET("read from the mark", read(s, buf, sizeof buf), 2);
    printf("read '%.*s'\n", (int)n, buf);
    cf_show_urgent(s, "past the mark");
    cf_recv_oob(s, "urgent byte once passed", 0);
    cf_post();
    EXPECT_RET("read to EOF", read(s, buf, sizeof buf), 0);
    close(s);
    cf_join();
    return 0;
}
