/* Two threads serve four connections from one epoll set (EPOLLONESHOT, re-armed after each
 * read): while one thread sleeps in epoll_wait, the other reads, echoes, re-arms and, at
 * the peer's EOF, closes a registered socket. The peer checks every echo.
 * usmc-expect: accelerated data */
/* threads */
#include "common.h"

#define CONNS 4
#define ROUNDS 200
#define MSG 1000

static int ep, done_fd;
/* The kernel hands a connection from thread to thread when EPOLL_CTL_MOD re-arms it, which
 * ThreadSanitizer does not see: the lock, held by the thread serving the connection, shows
 * it that handover. */
static struct {
    int fd;
    pthread_mutex_t lock;
} conn[CONNS];
static _Atomic int open_conns = CONNS;
static _Atomic uint64_t echoed;

static void client(void *arg)
{
    int fd[CONNS];
    char buf[MSG];

    for (int c = 0; c < CONNS; c++)
        fd[c] = cf_connect(AF_INET, *(uint16_t *)arg);
    for (int r = 0; r < ROUNDS; r++) {
        for (int c = 0; c < CONNS; c++) {
            cf_fill(buf, MSG, (uint64_t)r * MSG, (unsigned)c);
            cf_write_all(fd[c], buf, MSG);
        }
        for (int c = 0; c < CONNS; c++) {
            cf_read_exact(fd[c], buf, MSG);
            CHECK(cf_verify(buf, MSG, (uint64_t)r * MSG, (unsigned)c));
        }
    }
    for (int c = 0; c < CONNS; c++)
        close(fd[c]);
    printf("%d rounds on %d connections verified\n", ROUNDS, CONNS);
}

/* Reads what connection c has and sends it back; at EOF closes it. */
static void serve_ready(int c)
{
    char buf[4 * MSG];
    ssize_t n;
    int fd = conn[c].fd;

    CHECK(pthread_mutex_lock(&conn[c].lock) == 0);
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        cf_write_all(fd, buf, (size_t)n);
        echoed += (uint64_t)n;
    }
    if (n == 0) {
        close(fd);
        if (--open_conns == 0)
            CHECK(write(done_fd, "x", 1) == 1);
    } else {
        CHECK(errno == EAGAIN);
        cf_epoll_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT, (uint64_t)c);
    }
    CHECK(pthread_mutex_unlock(&conn[c].lock) == 0);
}

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        struct epoll_event ev;
        int n = epoll_wait(ep, &ev, 1, -1);
        if (n < 0 && errno == EINTR)
            continue;
        CHECK(n == 1);
        if (ev.data.u64 == (uint64_t)-1)
            return NULL;
        serve_ready((int)ev.data.u64);
    }
}

int main(void)
{
    int done[2];
    pthread_t t[2];

    cf_start();
    int l = cf_listen_spawn(client);
    ep = epoll_create1(0);
    CHECK(ep >= 0 && pipe(done) == 0);
    done_fd = done[1];
    /* Level-triggered, never re-armed: once written, it wakes every worker to leave. */
    cf_epoll_ctl(ep, EPOLL_CTL_ADD, done[0], EPOLLIN, (uint64_t)-1);
    for (int c = 0; c < CONNS; c++) {
        conn[c].fd = cf_accept(l);
        CHECK(pthread_mutex_init(&conn[c].lock, NULL) == 0);
        cf_set_nonblock(conn[c].fd, true);
        cf_epoll_ctl(ep, EPOLL_CTL_ADD, conn[c].fd, EPOLLIN | EPOLLONESHOT, (uint64_t)c);
    }
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    printf("echoed %llu bytes\n", (unsigned long long)echoed);
    CHECK(echoed == (uint64_t)CONNS * ROUNDS * MSG);
    cf_join();
    return 0;
}
