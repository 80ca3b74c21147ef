/* The completion queue read without a system call: a thread that the kernel allows none (a
 * seccomp filter kills the process at any other than exit) busy-polls usmc_erm_poll() for the peer's remote completions while they come, and gets every
 * one, in order, with the addresses of our region; completions of our own commands come the
 * same way; once the peer has closed and nothing is left, the queue says ECONNRESET.
 * Sanitizer builds poll without the seccomp filter: their runtimes make system calls of their
 * own. */
#include "common.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#define EVENTS 300
#define SLOT 64

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STRICT 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STRICT 0
#endif
#endif
#ifndef STRICT
#define STRICT 1
#endif

static void peer(int fd, void *arg)
{
    (void)arg;
    int id;
    char *buf = et_region(fd, 4096, 0, &id);
    int target = (int)et_recv_u64(fd);
    for (uint64_t i = 0; i < EVENTS; i++) {
        memset(buf, (int)i, SLOT);
        CHECK_OK(usmc_erm_write(fd, id, 0, target, (i % 64) * SLOT, SLOT,
                                SMC_ERM_CMD_FLAG_REMOTE_COMPL | SMC_ERM_CMD_FLAG_SILENT, i));
        usleep(50);
    }
    et_recv_u64(fd);
}

static struct usmc_erm_cq *cq;
static struct smc_rmem_compl_event got[EVENTS];
static int ngot;

/* From now on this thread may only exit. (Not seccomp's strict mode, which also takes the
 * time stamp counter away, and with it clock_gettime() without a system call.) */
static int no_syscalls(void)
{
    static struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};

    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
           prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static void *poller(void *arg)
{
    (void)arg;
    if (STRICT && no_syscalls())
        return NULL;
    while (ngot < EVENTS) {
        int n = usmc_erm_poll(cq, got + ngot, EVENTS - ngot);
        if (n < 0)
            break;
        ngot += n;
    }
    /* exit() itself is the thread's last call: pthread_exit() would unwind through
     * calls the filter forbids. */
    if (STRICT)
        syscall(SYS_exit, 0);
    return NULL;
}

int main(void)
{
    et_start(60);
    int fd = et_pair(1, peer, NULL);
    int id;
    unsigned char *region = et_region(fd, 64 * SLOT, SMC_ACCESS_REMOTE_WRITE, &id);
    cq = usmc_erm_cq_open(fd);
    CHECK(cq);
    struct smc_rmem_compl_event ev[4];
    CHECK(usmc_erm_poll(cq, ev, 4) == 0);
    CHECK_ERR(usmc_erm_poll(cq, ev, 0), EINVAL);
    et_send_u64(fd, (uint64_t)id);
    /* The first event is there before the poller starts: the queue has heard from the peer
     * lately, and does not look at its channel while events keep coming. */
    struct pollfd pf = {fd, 0, 0};
    CHECK(poll(&pf, 1, 10000) == 1 && (pf.revents & POLLERR));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, poller, NULL) == 0);
    pthread_join(t, NULL);
    if (ngot != EVENTS)
        FAIL("the poller took %d events of %d", ngot, EVENTS);
    for (int i = 0; i < EVENTS; i++) {
        const struct smc_rmem_compl_event *e = &got[i];
        if (e->tag != (uint64_t)i || e->status || !(e->flags & SMC_ERM_COMPL_REMOTE) ||
            e->memid != id || e->copy.len != SLOT ||
            e->copy.addr != region + (i % 64) * SLOT || e->offset != (uint64_t)(i % 64) * SLOT)
            FAIL("event %d: tag %llu status %d addr %p", i, (unsigned long long)e->tag,
                 e->status, e->copy.addr);
    }
    CHECK(region[(EVENTS - 1) % 64 * SLOT] == (unsigned char)(EVENTS - 1));
    /* our own command's completion comes through the queue too */
    CHECK_OK(usmc_erm_write(fd, id, 0, id, 0, 1, 0, 99));
    int n = usmc_erm_poll(cq, ev, 4);
    CHECK(n == 1 && ev[0].tag == 99 && ev[0].status == ENOENT && !(ev[0].flags & SMC_ERM_COMPL_REMOTE));
    CHECK_ERR(et_errqueue(fd, ev, 4), EAGAIN);
    /* the peer goes: the queue says so once it is empty */
    et_send_u64(fd, 0);
    et_join();
    uint64_t until = et_now_ms() + 3000;
    while ((n = usmc_erm_poll(cq, ev, 4)) == 0 && et_now_ms() < until)
        ;
    CHECK(n == -1 && errno == ECONNRESET);
    close(fd);
    CHECK_ERR(usmc_erm_poll(cq, ev, 4), ECONNRESET);
    usmc_erm_cq_close(cq);
    return 0;
}
