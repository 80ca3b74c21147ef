/* Connections opened, used and closed by several threads at once in both processes: four
 * client threads each make their connections one after another, four server threads accept
 * from one listener, and every connection echoes a stream the client verifies. The threads
 * share the process's link group, descriptor table and counters.
 * usmc-expect: accelerated data */
/* threads */
#include "common.h"

#define THREADS 4
#define PER_THREAD 25
#define BYTES 20000

static uint16_t port;
static int listener;
static _Atomic uint64_t echoed;

static void *connector(void *arg)
{
    unsigned first = (unsigned)(uintptr_t)arg * PER_THREAD;

    for (unsigned seed = first; seed < first + PER_THREAD; seed++) {
        int fd = cf_connect(AF_INET, port);
        cf_send_pattern(fd, BYTES, 4096, seed);
        CHECK(shutdown(fd, SHUT_WR) == 0);
        CHECK(cf_recv_pattern(fd, 4096, seed) == BYTES);
        close(fd);
    }
    return NULL;
}

static void *acceptor(void *arg)
{
    (void)arg;
    /* Every thread takes its share, whichever connections they are. */
    for (int i = 0; i < PER_THREAD; i++)
        echoed += cf_echo_after_eof(cf_accept(listener));
    return NULL;
}

/* start(fn): THREADS threads running fn, joined before it returns. */
static void start(void *(*fn)(void *))
{
    pthread_t t[THREADS];

    for (uintptr_t i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, fn, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
}

static void client(void *arg)
{
    (void)arg;
    start(connector);
    printf("%d connections verified\n", THREADS * PER_THREAD);
}

int main(void)
{
    cf_start();
    listener = cf_listen(AF_INET);
    port = cf_port(listener);
    cf_spawn(client, NULL);
    start(acceptor);
    printf("echoed %llu bytes\n", (unsigned long long)echoed);
    CHECK(echoed == (uint64_t)THREADS * PER_THREAD * BYTES);
    cf_join();
    return 0;
}
