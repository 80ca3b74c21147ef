/* One thread blocks in recv() on a socket with nothing to read while another thread polls
 * it: every poll must say "not readable", as TCP's does, however the blocked reader waits.
 * The reader runs on one core and the peer wrote last from the other, so a reader that
 * busy-polls does (for up to the long budget below) while the polls are made.
 * usmc-expect: accelerated data
 * usmc-env: USMC_BUSY_POLL_US=100000 */
/* threads */
#include "common.h"

#define POLLS 1000

static int sock;
static _Atomic int reading;
static char got;

/* Pins the calling thread to cpu, where the machine has two. */
static void pin(int cpu)
{
    cpu_set_t set;

    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    CHECK(sched_setaffinity(0, sizeof(set), &set) == 0);
}

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);

    pin(1);
    cf_write_all(fd, "a", 1);
    cf_wait();
    cf_write_all(fd, "b", 1);
    cf_wait();
    close(fd);
}

static void *reader(void *arg)
{
    (void)arg;
    pin(0);
    reading = 1;
    CHECK(recv(sock, &got, 1, 0) == 1);
    return NULL;
}

int main(void)
{
    cf_start();
    sock = cf_serve(client);
    char c;
    cf_read_exact(sock, &c, 1);
    printf("first byte: %c\n", c);

    pthread_t r;
    CHECK(pthread_create(&r, NULL, reader, NULL) == 0);
    pin(1);
    /* The polls begin well inside the reader's wait: a recv() on its way in or out holds
     * the socket for a moment, and a poll then says "look again". */
    while (!reading)
        sched_yield();
    nanosleep(&(struct timespec){0, 2000000}, NULL);
    int readable = 0;
    for (int i = 0; i < POLLS; i++) {
        struct pollfd pf = {sock, POLLIN, 0};
        CHECK(poll(&pf, 1, 0) >= 0);
        readable += (pf.revents & POLLIN) != 0;
    }
    printf("polls that found it readable: %d of %d\n", readable, POLLS);

    cf_post(); /* the second byte */
    CHECK(pthread_join(r, NULL) == 0);
    printf("the blocked reader got: %c\n", got);
    cf_post();
    close(sock);
    cf_join();
    return readable != 0;
}
