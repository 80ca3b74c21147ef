/* After fork, the child execs this program again, which takes up the connection and writes
 * 64-byte records while the parent writes its own at the same time; a failed exec before that
 * changes nothing. The peer receives every record intact, each writer's in order, then EOF.
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
        int who = rec[0] == 'P' ? 0 : 1;
        memset(want, rec[0], REC);
        snprintf(want, 8, "%c%05d", rec[0], next[who]);
        want[7] = rec[0];
        if ((rec[0] != 'P' && rec[0] != 'C') || memcmp(rec, want, REC) != 0)
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

static int open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) >= 0;
    return n;
}

int main(int argc, char **argv)
{
    char num[16];

    cf_start();
    if (argc == 3 && strcmp(argv[1], "write") == 0) {
        int s = atoi(argv[2]);
        writer(s, 'C');
        close(s);
        return 0;
    }
    int l = cf_listen_spawn(client);
    int s = cf_accept(l);
    close(l);
    int before = open_fds();
    int r = execl("/nonexistent/program", "program", (char *)NULL), err = errno;
    int after = open_fds();
    printf("failed exec: %d %s, descriptors %s\n", r, cf_errname(err),
           after == before ? "unchanged" : "changed");
    snprintf(num, sizeof num, "%d", s);
    pid_t child = cf_fork();
    if (child == 0) {
        execl("/proc/self/exe", argv[0], "write", num, (char *)NULL);
        _exit(127);
    }
    writer(s, 'P');
    close(s);
    printf("exec'd writer exit status: %d\n", cf_wait_child(child));
    cf_join();
    return 0;
}
