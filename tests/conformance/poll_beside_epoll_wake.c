/* One thread sleeps in poll() on a socket; then another sleeps in epoll_wait on a set that
 * holds the same socket and one more. A byte on the other socket wakes the epoll thread; the
 * next byte on the shared socket must still wake the poll() asleep on it, however the epoll
 * thread leaves the socket once awake.
 * usmc-expect: accelerated data */
/* threads */
#include "common.h"

#include <sys/syscall.h>

static int shared, other;
static _Atomic pid_t poller;
static short polled;

static void client(void *arg)
{
    int a = cf_connect(AF_INET, *(uint16_t *)arg), b = cf_connect(AF_INET, *(uint16_t *)arg);
    pid_t parent = getppid();

    cf_wait(); /* both threads sleep */
    cf_wait_sleeping(parent, parent);
    cf_write_all(b, "o", 1);
    cf_wait(); /* the epoll thread is awake */
    cf_write_all(a, "s", 1);
    cf_wait();
    close(a);
    close(b);
}

static void *poll_thread(void *arg)
{
    struct pollfd pf = {shared, POLLIN, 0};

    (void)arg;
    poller = (pid_t)syscall(SYS_gettid);
    CHECK(poll(&pf, 1, -1) == 1); /* a lost wake-up hangs, until the watchdog */
    polled = pf.revents;
    return NULL;
}

int main(void)
{
    struct epoll_event in1 = {.events = EPOLLIN, .data.u32 = 1}, in2 = {.events = EPOLLIN, .data.u32 = 2};
    struct epoll_event ev[2];
    pthread_t t;
    char c;

    cf_start();
    int l = cf_listen_spawn(client);
    shared = cf_accept(l);
    other = cf_accept(l);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, shared, &in1) == 0 &&
          epoll_ctl(ep, EPOLL_CTL_ADD, other, &in2) == 0);
    CHECK(pthread_create(&t, NULL, poll_thread, NULL) == 0);
    while (!poller)
        sched_yield();
    cf_wait_sleeping(getpid(), poller);
    cf_post();
    CHECK(epoll_wait(ep, ev, 2, 10000) == 1 && ev[0].data.u32 == 2);
    CHECK(read(other, &c, 1) == 1 && c == 'o');
    printf("epoll woke for the other socket\n");
    cf_post();
    CHECK(pthread_join(t, NULL) == 0);
    printf("poll woke: %s\n", polled == POLLIN ? "POLLIN" : "something else");
    CHECK(read(shared, &c, 1) == 1 && c == 's');
    cf_post();
    close(shared);
    close(other);
    close(l);
    cf_join();
    return 0;
}
