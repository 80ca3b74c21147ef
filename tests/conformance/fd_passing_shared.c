/* A connected socket and a pipe passed together with SCM_RIGHTS to another process, whose
 * control buffer has room for exactly two descriptors: it gets exactly those two, the pipe
 * works, and it writes 64-byte records on the socket while the sender, which keeps its copy,
 * writes its own. The peer receives every record intact, each writer's in order, then EOF.
 * usmc-expect: accelerated data */
#include "common.h"

#define RECORDS 2000
#define REC 64

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    int next[2] = {0, 0}, bad = 0;
    char rec[REC], want[REC], c;

    for (int i = 0; i < 2 * RECORDS; i++) {
        if (cf_read_full(fd, rec, REC) != REC)
            break;
        int who = rec[0] == 'S' ? 0 : 1;
        memset(want, rec[0], REC);
        snprintf(want, 8, "%c%05d", rec[0], next[who]);
        want[7] = rec[0];
        if ((rec[0] != 'S' && rec[0] != 'R') || memcmp(rec, want, REC) != 0)
            bad++;
        else
            next[who]++;
    }
    printf("client: %d + %d records in order, %d bad, then %s\n", next[0], next[1], bad,
           read(fd, &c, 1) == 0 ? "EOF" : "more");
    CHECK(bad == 0 && next[0] == RECORDS && next[1] == RECORDS);
    close(fd);
}

static void writer(int s, char tag)
{
    char rec[REC];

    for (int n = 0; n < RECORDS; n++) {
        memset(rec, tag, REC);
        snprintf(rec, 8, "%c%05d", tag, n);
        rec[7] = tag;
        if (send(s, rec, REC, 0) != REC)
            FAIL("send: %s", cf_errname(errno));
    }
}

static void receiver(int unix_fd)
{
    char word[8] = {0};
    int fds[2];
    cf_recv_fds(unix_fd, fds, 2);
    CHECK(read(fds[1], word, 4) == 4);
    printf("receiver: pipe says %s\n", word);
    writer(fds[0], 'R');
    close(fds[0]);
    _exit(0);
}

int main(void)
{
    int pair[2], pipefd[2];
    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0 && pipe(pipefd) == 0);
    pid_t worker = cf_fork();
    if (worker == 0) {
        close(l);
        close(pair[0]);
        receiver(pair[1]);
    }
    close(pair[1]);
    cf_spawn(client, &port);
    int s = cf_accept(l);
    cf_send_fds(pair[0], (int[2]){s, pipefd[0]}, 2);
    cf_write_all(pipefd[1], "pipe", 4);
    writer(s, 'S');
    close(s);
    printf("receiver exit status: %d\n", cf_wait_child(worker));
    cf_join();
    return 0;
}
