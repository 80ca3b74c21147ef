/* The documented order. A command comes after the stream bytes sent before it and before
 * those sent after it: a reader that sees a byte the writer sent after a write finds the
 * write's bytes in place (or a later write's: the writer runs ahead), and a target that sees
 * a write's remote completion can read at once the bytes sent before it. Completions of one
 * connection come in command order, across sendmsg() calls and the helpers alike. */
#include "common.h"

#include <fcntl.h>

#define ROUNDS 2000

static void peer(int fd, void *arg)
{
    (void)arg;
    uint64_t *slot = usmc_erm_alloc(4096);
    CHECK(slot);
    et_send_u64(fd, (uint64_t)et_reg(fd, slot, 4096, SMC_ACCESS_REMOTE_WRITE));
    /* 1: the byte after a write finds it done */
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        uint64_t v = et_recv_u64(fd);
        if (v != i || __atomic_load_n(slot, __ATOMIC_RELAXED) < i)
            FAIL("round %llu: stream says %llu, the region %llu", (unsigned long long)i,
                 (unsigned long long)v, (unsigned long long)*slot);
    }
    et_send_u64(fd, 1);
    /* 2: the bytes before a write are there when its completion is */
    int fl = fcntl(fd, F_GETFL);
    CHECK_OK(fcntl(fd, F_SETFL, fl | O_NONBLOCK));
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        struct smc_rmem_compl_event ev;
        et_completions(fd, &ev, 1, 10000);
        CHECK(ev.tag == i && (ev.flags & SMC_ERM_COMPL_REMOTE));
        uint64_t v;
        ssize_t r = read(fd, &v, sizeof v);
        if (r != sizeof v || v != i)
            FAIL("round %llu: completion came before the bytes sent before it (read %zd)",
                 (unsigned long long)i, r);
    }
    CHECK_OK(fcntl(fd, F_SETFL, fl));
    et_send_u64(fd, 0);
    et_recv_u64(fd);
}

int main(void)
{
    et_start(120);
    int fd = et_pair(1, peer, NULL);
    int dst = (int)et_recv_u64(fd);
    int id;
    uint64_t *src = et_region(fd, 4096, 0, &id);
    struct smc_rmem_compl_event ev[64];

    for (uint64_t i = 1; i <= ROUNDS; i++) {
        *src = i;
        struct smc_erm_cmd_copy c = et_cmd(SMC_ERM_CMD_COPY, SMC_ERM_CMD_FLAG_SILENT, id, 0, dst,
                                           0, sizeof i, i);
        CHECK_OK(et_sendmsg(fd, &c, 1, 0));
        et_send_u64(fd, i);
    }
    CHECK_ERR(et_errqueue(fd, ev, 64), EAGAIN);
    CHECK(et_recv_u64(fd) == 1); /* the peer has seen them all */
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        et_send_u64(fd, i);
        *src = i;
        CHECK_OK(usmc_erm_write(fd, id, 0, dst, 0, sizeof i,
                                SMC_ERM_CMD_FLAG_REMOTE_COMPL | SMC_ERM_CMD_FLAG_SILENT, i));
    }
    CHECK(et_recv_u64(fd) == 0);

    /* Completions in command order: batches of sendmsg() and single helpers, interleaved. */
    uint64_t tag = 0, next = 0;
    while (tag < 3000) {
        struct smc_erm_cmd_copy b[7];
        for (int k = 0; k < 7; k++)
            b[k] = et_cmd(SMC_ERM_CMD_COPY, 0, id, 0, dst, 8 * (uint64_t)k, 8, tag++);
        CHECK_OK(et_sendmsg(fd, b, 7, 0));
        CHECK_OK(usmc_erm_write(fd, id, 0, dst, 0, 8, 0, tag++));
        int n;
        while ((n = et_errqueue(fd, ev, 5)) > 0)
            for (int k = 0; k < n; k++)
                if (ev[k].tag != next++)
                    FAIL("completion %llu came as %llu", (unsigned long long)next - 1,
                         (unsigned long long)ev[k].tag);
    }
    CHECK(next == tag);
    et_send_u64(fd, 0);
    et_join();
    close(fd);
    return 0;
}
