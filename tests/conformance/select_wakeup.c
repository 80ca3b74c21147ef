/* A select blocked waiting for a full socket to become writable wakes when the peer reads.
 * usmc-expect: accelerated data */
#include "common.h"

#include <sys/select.h>

static void server(void *arg)
{
    int s = cf_accept(*(int *)arg);
    cf_post(); /* accepted: the client may fill the connection (cf_fill_until_full) */
    cf_wait();
    cf_wait_sleeping(getppid(), getppid());
    uint64_t n = cf_recv_pattern(s, 1 << 16, 71);
    CHECK(n == cf_wait_u64());
    printf("server received everything\n");
    close(s);
}

int main(void)
{
    fd_set wr;
    cf_start();
    int l = cf_listen(AF_INET);
    cf_spawn(server, &l);
    int fd = cf_connect(AF_INET, cf_port(l));
    cf_wait();
    uint64_t off = cf_fill_until_full(fd, 0, 71);
    FD_ZERO(&wr);
    FD_SET(fd, &wr);
    cf_post();
    EXPECT_RET("blocked select", select(fd + 1, NULL, &wr, NULL, NULL), 1);
    printf("writable: %d\n", FD_ISSET(fd, &wr));
    close(fd);
    cf_post_u64(off);
    cf_join();
    return 0;
}
