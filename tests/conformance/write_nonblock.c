/* Nonblocking write against a peer that does not read: EAGAIN once everything is full, POLLOUT
 * absent, then POLLOUT again after the peer drained, and every byte arrives intact.
 * usmc-expect: accelerated data */
#include "common.h"

#define CHUNK 65536

static void server(void *arg)
{
    int l = *(int *)arg;
    int s = cf_accept(l);
    cf_post(); /* accepted: the client may fill the connection (cf_fill_until_full) */
    cf_wait();
    uint64_t total = cf_recv_pattern(s, CHUNK, 7);
    uint64_t sent = cf_wait_u64();
    printf("server received all bytes: %s\n", total == sent ? "yes" : "no");
    CHECK(total == sent);
    close(s);
}

int main(void)
{
    char buf[1000];
    cf_start();
    int l = cf_listen(AF_INET);
    cf_spawn(server, &l);
    int fd = cf_connect(AF_INET, cf_port(l));
    cf_wait();
    uint64_t off = cf_fill_until_full(fd, 0, 7);
    EXPECT_ERR("write when full", write(fd, buf, sizeof buf), EAGAIN);
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    EXPECT_RET("poll when full", poll(&p, 1, 0), 0);
    cf_post();
    EXPECT_RET("poll after drain", poll(&p, 1, -1), 1);
    printf("revents: %s\n", cf_poll_str(p.revents));
    cf_fill(buf, sizeof buf, off, 7);
    ssize_t r = write(fd, buf, sizeof buf);
    printf("write after drain succeeds: %s\n", r > 0 ? "yes" : cf_errname(errno));
    CHECK(r > 0);
    off += (uint64_t)r;
    close(fd);
    cf_post_u64(off);
    cf_join();
    return 0;
}
