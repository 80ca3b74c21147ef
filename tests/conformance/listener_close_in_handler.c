/* close() is async-signal-safe, and servers rely on it: php-fpm's workers stop by closing their
 * listener in the SIGQUIT handler, whatever they were doing. A thread busy with calls on a
 * listening socket is interrupted 10 000 times, and each time its handler closes another
 * listener, or for about half of them replaces it with dup2(). Every handler must return, and
 * the process then still accepts an accelerated connection.
 * usmc-expect: accelerated data */
/* threads */
#include "common.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

#define ROUNDS 10000

/* target goes to the handler by an atomic: the signal alone orders nothing for TSan. */
static int busy_fd, placeholder;
static atomic_int target, stop;
static sem_t handled;

static void on_usr1(int sig)
{
    (void)sig;
    int e = errno, fd = atomic_load(&target);
    if (fd % 2)
        close(fd);
    else
        dup2(placeholder, fd);
    sem_post(&handled);
    errno = e;
}

/* Each call looks the socket up in the library's descriptor table. */
static void *busy(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        CHECK(fcntl(busy_fd, F_SETFL, O_NONBLOCK) == 0);
    return NULL;
}

int main(void)
{
    pthread_t t;

    cf_start();
    CHECK(sem_init(&handled, 0, 0) == 0);
    cf_on_signal(SIGUSR1, on_usr1, SA_RESTART);
    placeholder = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(placeholder >= 0);
    busy_fd = cf_listen(AF_INET);
    CHECK(pthread_create(&t, NULL, busy, NULL) == 0);
    for (int i = 0; i < ROUNDS; i++) {
        int fd = cf_listen(AF_INET);
        atomic_store(&target, fd);
        CHECK(pthread_kill(t, SIGUSR1) == 0);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        if (sem_timedwait(&handled, &until) != 0)
            FAIL("round %d: the handler did not return", i);
        if (!(fd % 2))
            close(fd);
    }
    atomic_store(&stop, 1);
    CHECK(pthread_join(t, NULL) == 0);
    printf("%d handlers returned\n", ROUNDS);

    int l = cf_listen(AF_INET);
    cf_echo_once(l);
    close(l);
    close(busy_fd);
    return 0;
}
