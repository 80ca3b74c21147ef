/* threads */
/* Pending completions make the socket report POLLERR, as MSG_ZEROCOPY's do: poll() asked for
 * nothing or for input only, select() (readable and writable), epoll level-triggered until
 * they are taken and edge-triggered once per new one; and a sleeper wakes for them: in poll()
 * or epoll_wait() for the peer's remote completion, in epoll_wait() for a command another
 * thread of its own ran. Taken, they leave no POLLERR behind. */
#include "common.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/select.h>

static int src, dst;

static void peer(int fd, void *arg)
{
    (void)arg;
    int id;
    et_region(fd, 4096, SMC_ACCESS_REMOTE_WRITE | SMC_ACCESS_LOCAL_WRITE, &id);
    et_send_u64(fd, (uint64_t)id);
    int target = (int)et_recv_u64(fd);
    for (;;) {
        uint64_t op = et_recv_u64(fd);
        if (!op)
            break;
        usleep(op * 1000); /* let the other side fall asleep */
        CHECK_OK(usmc_erm_write(fd, id, 0, target, 0, 16, SMC_ERM_CMD_FLAG_REMOTE_COMPL |
                                SMC_ERM_CMD_FLAG_SILENT, op));
    }
}

static int pollerr(int fd, short events, int ms)
{
    struct pollfd pf = {fd, events, 0};
    int r = CHECK_OK(poll(&pf, 1, ms));
    return r && (pf.revents & POLLERR);
}

static void drain(int fd, int want)
{
    struct smc_rmem_compl_event ev[8];
    int n = et_errqueue(fd, ev, 8);
    if (n != want)
        FAIL("%d completions, expected %d", n, want);
    CHECK(!pollerr(fd, POLLIN, 0));
}

/* The peer writes us after ms, with a remote completion. */
static void peer_writes(int fd, unsigned ms)
{
    et_send_u64(fd, ms);
}

static void local_write(int fd)
{
    CHECK_OK(usmc_erm_write(fd, src, 0, dst, 0, 16, 0, 7));
}

static int fd_global;

static void *writer(void *arg)
{
    usleep(30000);
    local_write(fd_global);
    return arg;
}

int main(void)
{
    et_start(60);
    int fd = et_pair(0, peer, NULL);
    dst = (int)et_recv_u64(fd);
    char *mine = usmc_erm_alloc(4096);
    CHECK(mine);
    src = et_reg(fd, mine, 4096, SMC_ACCESS_REMOTE_WRITE);
    et_send_u64(fd, (uint64_t)src);

    CHECK(!pollerr(fd, 0, 0));
    local_write(fd);
    CHECK(pollerr(fd, 0, 0) && pollerr(fd, POLLIN, 0) && pollerr(fd, POLLOUT, 0));
    fd_set r, w;
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_SET(fd, &r);
    FD_SET(fd, &w);
    struct timeval tv = {0, 0};
    CHECK(select(fd + 1, &r, &w, NULL, &tv) == 2 && FD_ISSET(fd, &r) && FD_ISSET(fd, &w));
    drain(fd, 1);

    /* asleep in poll() for nothing, for input, for urgent data */
    static const short asks[] = {0, POLLIN, POLLPRI};
    for (int i = 0; i < 3; i++) {
        peer_writes(fd, 20);
        if (!pollerr(fd, asks[i], 5000))
            FAIL("poll(0x%x) slept through a remote completion", asks[i]);
        drain(fd, 1);
    }

    int ep = CHECK_OK(epoll_create1(0));
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 1}, out[4];
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
    CHECK(epoll_wait(ep, out, 4, 0) == 0);
    /* level-triggered: reported until taken */
    local_write(fd);
    CHECK(epoll_wait(ep, out, 4, 0) == 1 && (out[0].events & EPOLLERR));
    CHECK(epoll_wait(ep, out, 4, 0) == 1 && (out[0].events & EPOLLERR));
    drain(fd, 1);
    CHECK(epoll_wait(ep, out, 4, 0) == 0);
    /* asleep in epoll_wait(): the peer's command, then another thread's */
    peer_writes(fd, 20);
    CHECK(epoll_wait(ep, out, 4, 5000) == 1 && (out[0].events & EPOLLERR));
    drain(fd, 1);
    fd_global = fd;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, writer, NULL) == 0);
    CHECK(epoll_wait(ep, out, 4, 5000) == 1 && (out[0].events & EPOLLERR));
    pthread_join(t, NULL);
    drain(fd, 1);
    /* edge-triggered: once per new completion */
    ev.events = EPOLLIN | EPOLLET;
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev));
    local_write(fd);
    CHECK(epoll_wait(ep, out, 4, 1000) == 1 && (out[0].events & EPOLLERR));
    CHECK(epoll_wait(ep, out, 4, 0) == 0);
    local_write(fd);
    CHECK(epoll_wait(ep, out, 4, 1000) == 1 && (out[0].events & EPOLLERR));
    peer_writes(fd, 20);
    CHECK(epoll_wait(ep, out, 4, 5000) == 1 && (out[0].events & EPOLLERR));
    drain(fd, 3);
    close(ep);

    et_send_u64(fd, 0);
    et_join();
    close(fd);
    return 0;
}
