/* Two threads wait in one epoll set on one socket. The one given the peer's first byte reads
 * it and goes off to other work; the peer's second byte must then wake the other, still
 * asleep in the set, as the kernel wakes another waiter for a socket that becomes ready.
 * Level-triggered, then edge-triggered.
 * usmc-expect: accelerated data */
/* threads */
#include "common.h"

#include <sys/syscall.h>

#define WAIT_MS 5000

static int ep, sock;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static char first, second;  /* the phase's bytes */
static int got_first, got_second, timed_out;
static _Atomic pid_t tids[2];

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    char c;

    /* Each byte when the server says. */
    for (c = '1'; c <= '4'; c++) {
        cf_wait();
        cf_write_all(fd, &c, 1);
    }
    cf_wait();
    close(fd);
}

static void *worker(void *arg)
{
    tids[(intptr_t)arg] = (pid_t)syscall(SYS_gettid);
    for (;;) {
        struct epoll_event ev;
        int n = epoll_wait(ep, &ev, 1, WAIT_MS);
        if (n < 0 && errno == EINTR)
            continue;
        CHECK(n >= 0);
        CHECK(pthread_mutex_lock(&lock) == 0);
        if (n == 0) {
            timed_out = 1;
            CHECK(pthread_cond_broadcast(&cond) == 0);
            CHECK(pthread_mutex_unlock(&lock) == 0);
            return NULL;
        }
        char c;
        ssize_t r = read(sock, &c, 1);
        CHECK(r == 1 || (r < 0 && errno == EAGAIN));
        if (r == 1 && c == first) {
            /* This thread's other work: the peer's next byte is for the other one. */
            got_first = 1;
            cf_post();
            while (!got_second && !timed_out)
                CHECK(pthread_cond_wait(&cond, &lock) == 0);
            CHECK(pthread_mutex_unlock(&lock) == 0);
            return NULL;
        }
        if (r == 1) {
            CHECK(c == second && got_first);
            got_second = 1;
            CHECK(pthread_cond_broadcast(&cond) == 0);
            CHECK(pthread_mutex_unlock(&lock) == 0);
            return NULL;
        }
        CHECK(pthread_mutex_unlock(&lock) == 0);
    }
}

static void phase(const char *name, uint32_t events, char a, char b)
{
    pthread_t t[2];

    cf_epoll_ctl(ep, EPOLL_CTL_MOD, sock, events, 1);
    first = a;
    second = b;
    got_first = got_second = timed_out = 0;
    for (intptr_t i = 0; i < 2; i++) {
        tids[i] = 0;
        CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    }
    for (int i = 0; i < 2; i++) {
        while (!tids[i])
            usleep(1000);
        cf_wait_sleeping(getpid(), tids[i]);
    }
    cf_post();
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    printf("%s: the first byte went to one thread, the second woke the other: %s\n", name,
           got_first && got_second ? "yes" : "no");
    if (timed_out)
        FAIL("%s: the waiting thread slept through the second byte", name);
}

int main(void)
{
    cf_start();
    sock = cf_serve(client);
    cf_set_nonblock(sock, true);
    ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, sock, EPOLLIN, 1);
    phase("level-triggered", EPOLLIN, '1', '2');
    phase("edge-triggered", EPOLLIN | EPOLLET, '3', '4');
    cf_post();
    close(sock);
    close(ep);
    cf_join();
    return 0;
}
