/* threads */
/* Threads on one socket: four issue commands (sendmsg() and the helpers, writes and reads),
 * one registers and deregisters regions meanwhile, one takes every completion through
 * recvmsg(MSG_ERRQUEUE) while another polls the mapped queue, and the peer writes into us with
 * remote completions. Every command completes exactly once, in each thread's order, the bytes
 * are right, and ThreadSanitizer has nothing to say. */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>

#define WORKERS 4
#define PER_WORKER 3000
#define PEER_WRITES 3000

static int fd, remote, local, churn_id;
static unsigned char *mine;
static _Atomic int done_workers, stop;
static _Atomic uint64_t seen[WORKERS], remote_seen;

static void peer(int pfd, void *arg)
{
    (void)arg;
    int id;
    et_region(pfd, WORKERS * 4096, SMC_ACCESS_REMOTE_READ | SMC_ACCESS_REMOTE_WRITE, &id);
    et_send_u64(pfd, (uint64_t)id);
    int target = (int)et_recv_u64(pfd);
    for (uint64_t i = 0; i < PEER_WRITES; i++) {
        int r;
        while ((r = usmc_erm_write(pfd, id, 0, target, WORKERS * 4096, 64,
                                   SMC_ERM_CMD_FLAG_REMOTE_COMPL | SMC_ERM_CMD_FLAG_SILENT, i)) < 0 &&
               errno == ENOBUFS)
            ;
        CHECK(r == 0);
    }
    et_recv_u64(pfd);
}

static void *worker(void *arg)
{
    int w = (int)(intptr_t)arg;
    uint64_t off = (uint64_t)w * 4096;

    for (uint64_t i = 0; i < PER_WORKER; i++) {
        uint64_t tag = (uint64_t)w << 32 | i;
        int r;
        if (i % 3 == 0) {
            struct smc_erm_cmd_copy c[2] = {
                et_cmd(SMC_ERM_CMD_COPY, SMC_ERM_CMD_FLAG_SILENT, local, off, remote, off, 64, 0),
                et_cmd(SMC_ERM_CMD_READ, 0, remote, off, local, off, 64, tag)};
            r = (int)et_sendmsg(fd, c, 2, 0);
        } else {
            r = usmc_erm_write(fd, local, off, remote, off, 128, 0, tag);
        }
        if (r < 0 && errno == ENOBUFS) {
            i--; /* the consumer is behind: try again */
            continue;
        }
        CHECK(r == 0);
    }
    atomic_fetch_add(&done_workers, 1);
    return NULL;
}

static void *churn(void *arg)
{
    (void)arg;
    char *spare = usmc_erm_alloc(4096);
    CHECK(spare);
    while (!atomic_load(&stop)) {
        int id = et_reg(fd, spare, 4096, SMC_ACCESS_REMOTE_WRITE);
        churn_id = id;
        CHECK_OK(usmc_erm_dereg_mr(fd, id));
    }
    return NULL;
}

static void take(const struct smc_rmem_compl_event *ev, int n)
{
    for (int i = 0; i < n; i++) {
        if (ev[i].status)
            FAIL("completion %llx: %s", (unsigned long long)ev[i].tag, et_errname(ev[i].status));
        if (ev[i].flags & SMC_ERM_COMPL_REMOTE) {
            CHECK(ev[i].tag == atomic_load(&remote_seen));
            atomic_fetch_add(&remote_seen, 1);
            continue;
        }
        int w = (int)(ev[i].tag >> 32);
        CHECK(w >= 0 && w < WORKERS);
        /* each worker's own completions, in its order */
        uint64_t want = atomic_load(&seen[w]);
        if ((ev[i].tag & 0xffffffff) < want)
            FAIL("worker %d: completion %llu after %llu", w,
                 (unsigned long long)(ev[i].tag & 0xffffffff), (unsigned long long)want);
        atomic_store(&seen[w], (ev[i].tag & 0xffffffff) + 1);
    }
}

static pthread_mutex_t take_lock = PTHREAD_MUTEX_INITIALIZER;

static void *errqueue_reader(void *arg)
{
    struct smc_rmem_compl_event ev[32];
    struct usmc_erm_cq *cq = arg;

    while (!atomic_load(&stop)) {
        struct pollfd pf = {fd, 0, 0};
        poll(&pf, 1, 10);
        pthread_mutex_lock(&take_lock);
        int n = cq ? usmc_erm_poll(cq, ev, 32) : et_errqueue(fd, ev, 32);
        if (n > 0)
            take(ev, n);
        pthread_mutex_unlock(&take_lock);
    }
    return NULL;
}

int main(void)
{
    et_start(240);
    fd = et_pair(1, peer, NULL);
    remote = (int)et_recv_u64(fd);
    mine = usmc_erm_alloc(WORKERS * 4096 + 4096);
    CHECK(mine);
    local = et_reg(fd, mine, WORKERS * 4096 + 4096,
                   SMC_ACCESS_LOCAL_WRITE | SMC_ACCESS_REMOTE_WRITE);
    struct usmc_erm_cq *cq = usmc_erm_cq_open(fd);
    CHECK(cq);
    pthread_t t[WORKERS + 3];
    for (int w = 0; w < WORKERS; w++)
        CHECK(pthread_create(&t[w], NULL, worker, (void *)(intptr_t)w) == 0);
    CHECK(pthread_create(&t[WORKERS], NULL, churn, NULL) == 0);
    CHECK(pthread_create(&t[WORKERS + 1], NULL, errqueue_reader, NULL) == 0);
    CHECK(pthread_create(&t[WORKERS + 2], NULL, errqueue_reader, cq) == 0);
    et_send_u64(fd, (uint64_t)local);
    uint64_t until = et_now_ms() + 200000;
    for (;;) {
        int complete = atomic_load(&done_workers) == WORKERS &&
                       atomic_load(&remote_seen) == PEER_WRITES;
        for (int w = 0; complete && w < WORKERS; w++)
            complete = atomic_load(&seen[w]) == PER_WORKER;
        if (complete)
            break;
        if (et_now_ms() > until)
            FAIL("incomplete: %llu remote events", (unsigned long long)atomic_load(&remote_seen));
        usleep(10000);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < WORKERS + 3; i++)
        pthread_join(t[i], NULL);
    usmc_erm_cq_close(cq);
    et_send_u64(fd, 0);
    et_join();
    close(fd);
    return 0;
}
