/* An epoll set reached through a second descriptor number: made with each of dup, dup2,
 * dup3, F_DUPFD and F_DUPFD_CLOEXEC, before or after the first registration. A socket
 * registered through one number is reported by a wait through the other, with its own data
 * and nothing else (an event loop on tokio/mio registers through a copy and waits on the
 * original); closing either number leaves the other working.
 * usmc-expect: accelerated data */
#include "common.h"

enum { DUP, DUP2, DUP3, DUPFD, DUPFD_CLOEXEC, NCOPY };
static const char *const copy_name[NCOPY] = {"dup", "dup2", "dup3", "F_DUPFD", "F_DUPFD_CLOEXEC"};
#define ROUNDS (3 * NCOPY)

static int copy_of(int ep, int how)
{
    int spare = 100 + how;
    switch (how) {
    case DUP:
        return dup(ep);
    case DUP2:
        return dup2(ep, spare);
    case DUP3:
        return dup3(ep, spare, O_CLOEXEC);
    case DUPFD:
        return fcntl(ep, F_DUPFD, 3);
    default:
        return fcntl(ep, F_DUPFD_CLOEXEC, 3);
    }
}

static void server(void *arg)
{
    int l = *(int *)arg;
    char c;
    for (int r = 0; r < ROUNDS; r++) {
        int fd = cf_accept(l);
        cf_wait();
        cf_write_all(fd, "x", 1);
        cf_read_exact(fd, &c, 1);
        close(fd);
    }
}

/* Registers through reg, waits through wait_on: the socket's connect, then its bytes. */
static void round_trip(uint16_t port, int reg, int wait_on, const char *label)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    char c, name[96];
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

    CHECK(s >= 0);
    cf_loopback(AF_INET, port, &ss, &sl);
    cf_epoll_ctl(reg, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, 42);
    int r = connect(s, (struct sockaddr *)&ss, sl);
    CHECK(r == 0 || errno == EINPROGRESS);
    snprintf(name, sizeof name, "%s: connected", label);
    cf_epoll_report(name, wait_on, 5000);
    cf_post();
    snprintf(name, sizeof name, "%s: data", label);
    cf_epoll_report(name, wait_on, 5000);
    CHECK(read(s, &c, 1) == 1);
    cf_write_all(s, "y", 1);
    cf_epoll_ctl(reg, EPOLL_CTL_DEL, s, 0, 0);
    close(s);
}

int main(void)
{
    char label[64];

    cf_start();
    int l = cf_listen(AF_INET);
    uint16_t port = cf_port(l);
    cf_spawn(server, &l);
    for (int how = 0; how < NCOPY; how++) {
        /* The copy made before anything was registered, then closed: the original goes on. */
        int ep = epoll_create1(EPOLL_CLOEXEC);
        int ep2 = copy_of(ep, how);
        CHECK(ep >= 0 && ep2 >= 0 && ep2 != ep);
        snprintf(label, sizeof label, "%s before, through the copy", copy_name[how]);
        round_trip(port, ep2, ep, label);
        close(ep2);
        snprintf(label, sizeof label, "%s, copy closed", copy_name[how]);
        round_trip(port, ep, ep, label);
        close(ep);
    }
    for (int how = 0; how < NCOPY; how++) {
        /* The copy made after the first registration; the original closed. */
        int ep = epoll_create1(0), p[2];
        CHECK(ep >= 0 && pipe(p) == 0);
        cf_epoll_ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN, 7);
        int ep2 = copy_of(ep, how);
        CHECK(ep2 >= 0);
        close(ep);
        snprintf(label, sizeof label, "%s after, original closed", copy_name[how]);
        round_trip(port, ep2, ep2, label);
        close(p[0]);
        close(p[1]);
        close(ep2);
    }
    close(l);
    cf_join();
    return 0;
}
