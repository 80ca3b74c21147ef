/* kill -9 of either side in the middle of copies. The target that survives its writer gets
 * EOF or ECONNRESET on the stream and deregisters within 2 s; the writer that survives its
 * target sees its commands fail (EPIPE, or ECONNRESET in their completions) within 2 s. Both
 * for memory the peer maps and memory the kernel copies into, and nothing is left behind:
 * descriptors and mappings are as before. */
#include "common.h"

#include <signal.h>
#include <sys/wait.h>

#define SIZE (32u << 20)

static int shared_kind;

static unsigned char *region(void)
{
    unsigned char *p = shared_kind ? usmc_erm_alloc(SIZE) : malloc(SIZE);
    CHECK(p);
    memset(p, 1, SIZE);
    return p;
}

static void release(unsigned char *p)
{
    if (shared_kind)
        CHECK_OK(usmc_erm_free(p));
    else
        free(p);
}

/* The peer as the writer: copies into our region without end. */
static void writer(int fd, void *arg)
{
    (void)arg;
    unsigned char *src = region();
    int id = et_reg(fd, src, SIZE, 0);
    int dst = (int)et_recv_u64(fd);
    for (uint64_t i = 0;; i++) {
        if (usmc_erm_write(fd, id, 0, dst, 0, SIZE, SMC_ERM_CMD_FLAG_SILENT, i) < 0 &&
            errno != ENOBUFS)
            FAIL("write: %s", et_errname(errno));
        if (i == 2)
            et_send_u64(fd, 1); /* under way */
    }
}

/* The peer as the target: a region to write, then it waits to be killed. */
static void target(int fd, void *arg)
{
    (void)arg;
    unsigned char *dst = region();
    et_send_u64(fd, (uint64_t)et_reg(fd, dst, SIZE, SMC_ACCESS_REMOTE_WRITE));
    pause();
}

static void kill_peer(void)
{
    pid_t p = et_peer();
    int st;

    CHECK_OK(kill(p, SIGKILL));
    CHECK(waitpid(p, &st, 0) == p && WIFSIGNALED(st));
}

static uint64_t writer_killed(void)
{
    int fd = et_pair(1, writer, NULL);
    unsigned char *dst = region();
    int id = et_reg(fd, dst, SIZE, SMC_ACCESS_REMOTE_WRITE);
    et_send_u64(fd, (uint64_t)id);
    CHECK(et_recv_u64(fd) == 1);
    kill_peer();
    uint64_t t0 = et_now_ms();
    char c;
    ssize_t r = read(fd, &c, 1);
    CHECK(r == 0 || (r < 0 && errno == ECONNRESET));
    CHECK_OK(usmc_erm_dereg_mr(fd, id));
    uint64_t took = et_now_ms() - t0;
    close(fd);
    release(dst);
    return took;
}

static uint64_t target_killed(void)
{
    int fd = et_pair(0, target, NULL);
    int dst = (int)et_recv_u64(fd);
    unsigned char *src = region();
    int id = et_reg(fd, src, SIZE, 0);
    struct smc_rmem_compl_event ev[64];
    uint64_t t0 = 0;
    for (uint64_t i = 0;; i++) {
        if (i == 2) {
            kill_peer();
            t0 = et_now_ms();
        }
        int failed = usmc_erm_write(fd, id, 0, dst, 0, SIZE, SMC_ERM_CMD_FLAG_SILENT, i) < 0;
        if (failed && errno != EPIPE)
            FAIL("write after the target died: %s", et_errname(errno));
        int n = et_errqueue(fd, ev, 64);
        for (int k = 0; k < n; k++) {
            if (ev[k].status != ECONNRESET)
                FAIL("completion after the target died: %s", et_errname(ev[k].status));
            failed = 1;
        }
        if (failed)
            break;
        CHECK(!t0 || et_now_ms() - t0 < 5000);
    }
    uint64_t took = et_now_ms() - t0;
    close(fd);
    release(src);
    return took;
}

static int mappings(void)
{
    return et_maps(getpid(), "usmc");
}

int main(void)
{
    et_start(120);
    int fds = -1, maps = -1;
    /* The first round opens what the library keeps for good (its epoll set for link
     * groups, the counters' file): counted from the second on. */
    for (int round = 0; round < 3; round++) {
        for (shared_kind = 0; shared_kind < 2; shared_kind++) {
            uint64_t w = writer_killed(), t = target_killed();
            printf("%s: survivor of its writer %llu ms, of its target %llu ms\n",
                   shared_kind ? "usmc_erm_alloc" : "malloc", (unsigned long long)w,
                   (unsigned long long)t);
            if (w > 2000 || t > 2000)
                FAIL("the survivor took more than 2 s");
        }
        if (round == 0) {
            fds = et_fds();
            maps = mappings();
        } else if (et_fds() != fds || mappings() != maps) {
            FAIL("%d descriptors and %d mappings, %d and %d before", et_fds(), mappings(), fds,
                 maps);
        }
    }
    return 0;
}
