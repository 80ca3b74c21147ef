/* Two threads poll() one accelerated socket while a third waits for it in an epoll set: the
 * peer's bytes wake all three, every round, however the doorbell that rang for them is
 * emptied (each poller empties it once awake, an epoll wait when it has rung often), and no
 * poll returns empty before its time because another thread was looking at the socket.
 * usmc-expect: accelerated data */
/* threads */
#include "common.h"

#include <sys/syscall.h>

#define ROUNDS 300
#define POLLERS 2

static int s, ep;
static pthread_barrier_t start, done;
static _Atomic long missed;

static void *poller(void *arg)
{
    (void)arg;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&start);
        struct pollfd pf = {s, POLLIN, 0};
        if (poll(&pf, 1, 5000) != 1)
            missed++;
        pthread_barrier_wait(&done);
    }
    return NULL;
}

static void *epoller(void *arg)
{
    (void)arg;
    for (int r = 0; r < ROUNDS; r++) {
        struct epoll_event ev;
        pthread_barrier_wait(&start);
        if (epoll_wait(ep, &ev, 1, 5000) != 1)
            missed++;
        pthread_barrier_wait(&done);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[POLLERS + 1];
    char buf[8];

    cf_start();
    s = cf_serve(cf_cued_writer);
    CHECK((ep = epoll_create1(0)) >= 0);
    /* Edge-triggered: reported once per round, whatever the pollers leave unread. */
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLET, 42);
    CHECK(pthread_barrier_init(&start, NULL, POLLERS + 2) == 0);
    CHECK(pthread_barrier_init(&done, NULL, POLLERS + 2) == 0);
    for (int i = 0; i < POLLERS; i++)
        CHECK(pthread_create(&t[i], NULL, poller, NULL) == 0);
    CHECK(pthread_create(&t[POLLERS], NULL, epoller, NULL) == 0);
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&start);
        /* Let them go to sleep now and then; else the bytes come while they look. */
        if (r % 4 == 0)
            usleep(2000);
        cf_cue_write();
        pthread_barrier_wait(&done);
        cf_read_exact(s, buf, 4);
    }
    for (int i = 0; i <= POLLERS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    printf("%d rounds, waits that missed the bytes: %ld\n", ROUNDS, (long)missed);
    cf_cue_close();
    close(s);
    close(ep);
    cf_join();
    return 0;
}
