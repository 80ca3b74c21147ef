/* After fork, parent and child write to one connection at the same time, 64-byte records,
 * each send() whole: the peer receives every record intact, each writer's records in order,
 * and EOF once both closed.
 * usmc-expect: accelerated data */
#include "common.h"

#define RECORDS 3000
#define REC 64

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    int next[2] = {0, 0}, torn = 0, disorder = 0;
    char rec[REC];

    for (int i = 0; i < 2 * RECORDS; i++) {
        if (cf_read_full(fd, rec, REC) != REC) {
            printf("client: stream ended after %d records\n", i);
            break;
        }
        int who = rec[0] == 'P' ? 0 : 1, n = atoi(rec + 1);
        char want[REC];
        memset(want, rec[0], REC);
        snprintf(want, 8, "%c%05d", rec[0], n);
        want[7] = rec[0];
        if ((rec[0] != 'P' && rec[0] != 'C') || memcmp(rec, want, REC) != 0)
            torn++;
        else if (n != next[who]++)
            disorder++;
    }
    char c;
    printf("client: %d torn, %d out of order, then %s\n", torn, disorder,
           read(fd, &c, 1) == 0 ? "EOF" : "more");
    CHECK(torn == 0 && disorder == 0);
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

int main(void)
{
    cf_start();
    int l = cf_listen_spawn(client);
    int s = cf_accept(l);
    close(l);
    pid_t child = cf_fork();
    if (child == 0) {
        writer(s, 'C');
        close(s);
        _exit(0);
    }
    writer(s, 'P');
    close(s);
    printf("child exit status: %d\n", cf_wait_child(child));
    cf_join();
    return 0;
}
