/* Deregistration while the peer's commands are in flight: the peer writes a region of ours
 * without pause, large copies among small ones; once deregistration returns, not one byte of
 * the region changes any more, and the peer's next commands fail with ENOENT. For memory from
 * usmc_erm_alloc() (which the peer maps) and for the application's own (which the kernel
 * copies into). */
#include "common.h"

#include <sched.h>

#define SIZE (8u << 20)

static void peer(int fd, void *arg)
{
    (void)arg;
    int id;
    unsigned char *src = et_region(fd, SIZE, 0, &id);
    for (;;) {
        int dst = (int)et_recv_u64(fd);
        if (dst < 0)
            break;
        uint64_t n = 0, refused = 0;
        struct smc_rmem_compl_event ev[64];
        while (!refused) {
            memset(src, (int)(n & 0xff), 4096);
            uint64_t len = n % 4 ? 4096 : SIZE; /* now and then a copy that takes a while */
            CHECK_OK(usmc_erm_write(fd, id, 0, dst, 0, len, SMC_ERM_CMD_FLAG_SILENT, n++));
            int k = et_errqueue(fd, ev, 64);
            for (int i = 0; i < k; i++) {
                if (ev[i].status != ENOENT)
                    FAIL("write %llu: %s", (unsigned long long)ev[i].tag,
                         et_errname(ev[i].status));
                refused++;
            }
        }
        et_send_u64(fd, n);
    }
}

static void one(int fd, unsigned char *region, const char *kind)
{
    int id = et_reg(fd, region, SIZE, SMC_ACCESS_REMOTE_WRITE);
    et_send_u64(fd, (uint64_t)id);
    /* the peer is writing: wait until its bytes show */
    uint64_t until = et_now_ms() + 10000;
    while (region[0] == 0xaa && et_now_ms() < until)
        sched_yield();
    CHECK(region[0] != 0xaa);
    usleep(20000);
    CHECK_OK(usmc_erm_dereg_mr(fd, id));
    unsigned char *snap = malloc(SIZE);
    CHECK(snap);
    memcpy(snap, region, SIZE);
    uint64_t writes = et_recv_u64(fd); /* the peer saw a refusal */
    usleep(20000);
    if (memcmp(snap, region, SIZE))
        FAIL("%s: the region changed after deregistration", kind);
    printf("%s: %llu writes before the refusal\n", kind, (unsigned long long)writes);
    free(snap);
}

int main(void)
{
    et_start(120);
    int fd = et_pair(1, peer, NULL);
    unsigned char *shared = usmc_erm_alloc(SIZE), *own = malloc(SIZE);
    CHECK(shared && own);
    for (int round = 0; round < 3; round++) {
        memset(shared, 0xaa, SIZE);
        memset(own, 0xaa, SIZE);
        one(fd, shared, "usmc_erm_alloc");
        one(fd, own, "malloc");
    }
    et_send_u64(fd, (uint64_t)-1);
    et_join();
    close(fd);
    return 0;
}
