/* A connected socket passed to another process with SCM_RIGHTS over a Unix socket keeps
 * working there (2 MiB echoed) after the sender closed its copy.
 * usmc-expect: accelerated data */
#include "common.h"

#define TOTAL (2u << 20)

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    uint64_t n = cf_echo_client(fd, TOTAL, 61);
    printf("client got back %llu\n", (unsigned long long)n);
    CHECK(n == TOTAL);
    close(fd);
}

static int receive_fd(int unix_fd)
{
    char c;
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = {&c, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
                         .msg_controllen = sizeof ctl};
    CHECK(recvmsg(unix_fd, &msg, 0) == 1);
    struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
    CHECK(h && h->cmsg_type == SCM_RIGHTS);
    int fd;
    memcpy(&fd, CMSG_DATA(h), sizeof fd);
    return fd;
}

static void send_fd(int unix_fd, int fd)
{
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = {"F", 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
                         .msg_controllen = sizeof ctl};
    struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &fd, sizeof fd);
    EXPECT_RET("sendmsg SCM_RIGHTS", sendmsg(unix_fd, &msg, 0), 1);
}

int main(void)
{
    int pair[2];
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
    pid_t worker = cf_fork();
    if (worker == 0) {
        close(l);
        close(pair[0]);
        _exit(cf_echo_after_eof(receive_fd(pair[1])) == TOTAL ? 0 : 1);
    }
    close(pair[1]);
    cf_spawn(client, &port);
    int s = cf_accept(l);
    send_fd(pair[0], s);
    EXPECT_RET("sender closes its copy", close(s), 0);
    printf("worker exit status: %d\n", cf_wait_child(worker));
    cf_join();
    return 0;
}
