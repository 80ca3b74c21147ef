/* recv(MSG_WAITALL) returns only once the whole request arrived, however the peer split it;
 * at EOF it returns what it had.
 * usmc-expect: accelerated data */
/* threads */
#include "common.h"

#define PIECES 8
#define PIECE 1000

static void client(void *arg)
{
    char buf[PIECE];
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    for (int i = 0; i < PIECES; i++) {
        cf_wait();
        cf_fill(buf, PIECE, (uint64_t)i * PIECE, 4);
        cf_write_all(fd, buf, PIECE);
    }
    cf_wait();
    cf_fill(buf, 500, PIECES * PIECE, 4);
    cf_write_all(fd, buf, 500);
    close(fd);
}

/* Releases the peer's pieces one by one, each once this thread's recv is blocked. */
static void *feeder(void *arg)
{
    pid_t tid = *(pid_t *)arg;
    for (int i = 0; i < PIECES; i++) {
        cf_wait_sleeping(getpid(), tid);
        cf_post();
    }
    return NULL;
}

int main(void)
{
    static char buf[PIECES * PIECE + 1000];
    pthread_t th;
    cf_start();
    int s = cf_serve(client);
    pid_t self = gettid();
    CHECK(pthread_create(&th, NULL, feeder, &self) == 0);
    EXPECT_RET("recv MSG_WAITALL", recv(s, buf, PIECES * PIECE, MSG_WAITALL), PIECES * PIECE);
    CHECK(cf_verify(buf, PIECES * PIECE, 0, 4));
    CHECK(pthread_join(th, NULL) == 0);
    cf_post();
    EXPECT_RET("recv MSG_WAITALL past EOF", recv(s, buf, 1000, MSG_WAITALL), 500);
    CHECK(cf_verify(buf, 500, PIECES * PIECE, 4));
    close(s);
    cf_join();
    return 0;
}
