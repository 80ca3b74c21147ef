/* A thread already asleep in epoll_wait (and epoll_pwait, epoll_pwait2) when another thread
 * registers the set's first accelerated socket: the sleeper wakes with that socket's event and
 * its data, and nothing else (gRPC's pollers sleep like this while a connection is added).
 * Once for a socket registered while it connects, once for one connected and quiet whose
 * bytes come after the registration.
 * usmc-expect: accelerated data */
/* threads */
#include "common.h"

#include <sys/syscall.h>

enum { WAIT, PWAIT, PWAIT2, NWAYS };
static const char *const way_name[NWAYS] = {"epoll_wait", "epoll_pwait", "epoll_pwait2"};

struct sleeper {
    int ep, way, n;
    _Atomic pid_t tid;
    struct epoll_event ev[8];
};

static void *sleep_in_set(void *arg)
{
    struct sleeper *z = arg;
    struct timespec ts = {5, 0};
    sigset_t none;

    sigemptyset(&none);
    z->tid = (pid_t)syscall(SYS_gettid);
    do {
        if (z->way == WAIT)
            z->n = epoll_wait(z->ep, z->ev, 8, 5000);
        else if (z->way == PWAIT)
            z->n = epoll_pwait(z->ep, z->ev, 8, 5000, &none);
        else
            z->n = epoll_pwait2(z->ep, z->ev, 8, &ts, &none);
    } while (z->n < 0 && errno == EINTR);
    return NULL;
}

static void server(void *arg)
{
    int l = *(int *)arg;
    char c;
    for (int r = 0; r < 2 * NWAYS; r++) {
        int fd = cf_accept(l);
        if (r % 2)
            cf_write_all(fd, "h", 1);
        cf_wait();
        cf_write_all(fd, "x", 1);
        cf_read_exact(fd, &c, 1);
        close(fd);
    }
}

/* Starts a thread sleeping in ep, waits until it sleeps in the kernel. */
static pthread_t start_sleeper(struct sleeper *z)
{
    pthread_t t;
    z->tid = 0;
    CHECK(pthread_create(&t, NULL, sleep_in_set, z) == 0);
    while (!z->tid)
        sched_yield();
    cf_wait_sleeping(getpid(), z->tid);
    return t;
}

static void print_woken(const char *label, struct sleeper *z)
{
    printf("%s: %d", label, z->n);
    for (int i = 0; i < z->n; i++)
        printf(" [%llu %s]", (unsigned long long)z->ev[i].data.u64, cf_epoll_str(z->ev[i].events));
    printf("\n");
}

int main(void)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    char c, label[64];
    int p[2];

    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    cf_spawn(server, &l);
    cf_loopback(AF_INET, port, &ss, &sl);
    for (int way = 0; way < NWAYS; way++) {
        struct sleeper z = {.way = way};
        CHECK((z.ep = epoll_create1(0)) >= 0 && pipe(p) == 0);
        cf_epoll_ctl(z.ep, EPOLL_CTL_ADD, p[0], EPOLLIN, 1);

        /* Registered while it connects. */
        pthread_t t = start_sleeper(&z);
        int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        CHECK(s >= 0);
        int r = connect(s, (struct sockaddr *)&ss, sl);
        CHECK(r == 0 || errno == EINPROGRESS);
        cf_epoll_ctl(z.ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLOUT, 42);
        CHECK(pthread_join(t, NULL) == 0);
        snprintf(label, sizeof label, "%s, registered connecting", way_name[way]);
        print_woken(label, &z);
        cf_epoll_ctl(z.ep, EPOLL_CTL_MOD, s, EPOLLIN, 42);
        cf_post();
        cf_epoll_report("then", z.ep, 5000);
        CHECK(read(s, &c, 1) == 1);
        cf_write_all(s, "y", 1);
        close(s);
        close(z.ep);

        /* Registered connected and quiet: the bytes come after. */
        CHECK((z.ep = epoll_create1(0)) >= 0);
        cf_epoll_ctl(z.ep, EPOLL_CTL_ADD, p[0], EPOLLIN, 1);
        s = cf_connect(AF_INET, port);
        cf_read_exact(s, &c, 1);
        t = start_sleeper(&z);
        cf_epoll_ctl(z.ep, EPOLL_CTL_ADD, s, EPOLLIN, 43);
        cf_post();
        CHECK(pthread_join(t, NULL) == 0);
        snprintf(label, sizeof label, "%s, registered connected", way_name[way]);
        print_woken(label, &z);
        CHECK(read(s, &c, 1) == 1);
        cf_write_all(s, "y", 1);
        close(s);
        close(z.ep);
        close(p[0]);
        close(p[1]);
    }
    close(l);
    cf_join();
    return 0;
}
