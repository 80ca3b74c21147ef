/* One thread blocked in read() and another in poll() for POLLPRI when urgent data comes: the
 * reader gets the bytes before the mark, the other the urgent byte with recv(MSG_OOB).
 * usmc-expect: accelerated data */
/* threads */
#include "common.h"

static int sock;

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    usleep(50000);
    EXPECT_RET("urgent send", send(fd, "abc!", 4, MSG_OOB), 4);
    cf_wait();
    close(fd);
}

static void *urgent_reader(void *arg)
{
    struct pollfd p = {.fd = sock, .events = POLLPRI};
    char *c = arg;
    CHECK(poll(&p, 1, 10000) == 1);
    CHECK(recv(sock, c, 1, MSG_OOB) == 1);
    return NULL;
}

int main(void)
{
    char buf[16], urgent = 0;
    pthread_t t;
    cf_start();
    sock = cf_serve(client);
    CHECK(pthread_create(&t, NULL, urgent_reader, &urgent) == 0);
    cf_post();
    long n = read(sock, buf, sizeof buf);
    CHECK(pthread_join(t, NULL) == 0);
    printf("read %ld '%.*s', urgent '%c'\n", n, n > 0 ? (int)n : 0, buf, urgent);
    cf_post();
    close(sock);
    cf_join();
    return 0;
}
