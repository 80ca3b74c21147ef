/* A thread blocked in read returns 0 when another thread shuts the socket down for reading;
 * writing still works afterwards.
 * usmc-expect: accelerated data */
/* threads */
#include "common.h"

struct blocked {
    int fd;
    _Atomic pid_t tid;
    long result;
};

static void *reader(void *arg)
{
    struct blocked *b = arg;
    char buf[8];
    b->tid = gettid();
    b->result = read(b->fd, buf, sizeof buf);
    return NULL;
}

static void client(void *arg)
{
    char buf[8];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_read_exact(fd, buf, 3);
    printf("client got %.3s\n", buf);
    CHECK(memcmp(buf, "bye", 3) == 0);
    close(fd);
}

int main(void)
{
    pthread_t th;
    struct blocked b = {.tid = 0};
    cf_start();
    int l = cf_listen_spawn(client);
    b.fd = cf_accept(l);
    CHECK(pthread_create(&th, NULL, reader, &b) == 0);
    while (b.tid == 0)
        sched_yield();
    cf_wait_sleeping(getpid(), b.tid);
    EXPECT_RET("shutdown SHUT_RD", shutdown(b.fd, SHUT_RD), 0);
    CHECK(pthread_join(th, NULL) == 0);
    printf("blocked read returned %ld\n", b.result);
    CHECK(b.result == 0);
    EXPECT_RET("write", write(b.fd, "bye", 3), 3);
    close(b.fd);
    cf_join();
    return 0;
}
