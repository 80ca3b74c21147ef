/* Each command's status in its completion: unknown or deregistered regions (ENOENT), bounds
 * (ERANGE), rights (EACCES); a failed command fails alone, the others of its sendmsg() run;
 * completions come in command order with their tags; SMC_ERM_CMD_FLAG_SILENT leaves out those
 * that succeed; and a sendmsg() whose completions would not fit fails with ENOBUFS. */
#include "common.h"

enum { RW, RO, WO, GONE, NREGIONS };

static void peer(int fd, void *arg)
{
    (void)arg;
    char *buf = usmc_erm_alloc(4 * 4096);
    CHECK(buf);
    int id[NREGIONS];
    id[RW] = et_reg(fd, buf, 4096, SMC_ACCESS_REMOTE_READ | SMC_ACCESS_REMOTE_WRITE);
    id[RO] = et_reg(fd, buf + 4096, 4096, SMC_ACCESS_REMOTE_READ);
    id[WO] = et_reg(fd, buf + 8192, 4096, SMC_ACCESS_REMOTE_WRITE);
    id[GONE] = et_reg(fd, buf + 12288, 4096, SMC_ACCESS_REMOTE_WRITE);
    CHECK_OK(usmc_erm_dereg_mr(fd, id[GONE]));
    for (int i = 0; i < NREGIONS; i++)
        et_send_u64(fd, (uint64_t)id[i]);
    et_recv_u64(fd);
}

static void expect(const struct smc_rmem_compl_event *ev, uint64_t tag, int status)
{
    if (ev->tag != tag || ev->status != status)
        FAIL("completion tag %llu status %s, expected tag %llu status %s",
             (unsigned long long)ev->tag, et_errname(ev->status), (unsigned long long)tag,
             et_errname(status));
    CHECK(!(ev->flags & SMC_ERM_COMPL_REMOTE));
    CHECK(status ? ev->copy.addr == NULL : ev->copy.addr != NULL);
}

int main(void)
{
    et_start(60);
    int fd = et_pair(0, peer, NULL);
    int id[NREGIONS];
    for (int i = 0; i < NREGIONS; i++)
        id[i] = (int)et_recv_u64(fd);
    int src;
    char *mine = et_region(fd, 8192, SMC_ACCESS_LOCAL_WRITE, &src);
    int ro = et_reg(fd, mine, 4096, 0); /* no local write: reads may not land in it */

    /* The peer announced three regions: the listing shows them with their rights. */
    struct smc_erm_peer_mr pm[8];
    socklen_t pl = sizeof pm;
    CHECK_OK(getsockopt(fd, SOL_SMC, SMC_ERM_PEER_MRS, pm, &pl));
    CHECK(pl == 3 * sizeof pm[0]);
    CHECK(pm[0].memid == id[RW] && pm[0].len == 4096 &&
          pm[0].access_flags == (SMC_ACCESS_REMOTE_READ | SMC_ACCESS_REMOTE_WRITE));
    CHECK(pm[1].memid == id[RO] && pm[1].access_flags == SMC_ACCESS_REMOTE_READ);
    CHECK(pm[2].memid == id[WO] && pm[2].access_flags == SMC_ACCESS_REMOTE_WRITE);
    pl = sizeof pm[0];
    CHECK_OK(getsockopt(fd, SOL_SMC, SMC_ERM_PEER_MRS, pm, &pl));
    CHECK(pl == 3 * sizeof pm[0]); /* the size all of them take */

    const uint32_t W = SMC_ERM_CMD_COPY, R = SMC_ERM_CMD_READ;
    struct {
        struct smc_erm_cmd_copy c;
        int status;
    } t[] = {
        {et_cmd(W, 0, src, 0, id[RW], 0, 4096, 100), 0},
        {et_cmd(W, 0, src, 0, id[WO], 100, 3996, 101), 0},
        {et_cmd(R, 0, id[RO], 0, src, 4096, 4096, 102), 0},
        {et_cmd(R, 0, id[RW], 4095, src, 0, 1, 103), 0},
        {et_cmd(W, 0, src, 0, 4095, 0, 16, 110), ENOENT},   /* never registered */
        {et_cmd(W, 0, src, 0, -1, 0, 16, 111), ENOENT},
        {et_cmd(W, 0, src, 0, id[GONE], 0, 16, 112), ENOENT}, /* deregistered */
        {et_cmd(W, 0, 77, 0, id[RW], 0, 16, 113), ENOENT},   /* our side unknown */
        {et_cmd(W, 0, src, 0, id[RW], 4000, 97, 120), ERANGE},
        {et_cmd(W, 0, src, 0, id[RW], UINT64_MAX - 8, 16, 121), ERANGE},
        {et_cmd(W, 0, src, 8100, id[RW], 0, 100, 122), ERANGE},
        {et_cmd(R, 0, id[RW], 0, src, UINT64_MAX, 2, 123), ERANGE},
        {et_cmd(W, 0, src, 0, id[RO], 0, 16, 130), EACCES}, /* read-only to us */
        {et_cmd(R, 0, id[WO], 0, src, 0, 16, 131), EACCES}, /* write-only */
        {et_cmd(R, 0, id[RW], 0, ro, 0, 16, 132), EACCES},  /* no local write */
        {et_cmd(W, 0, src, 0, id[RW], 0, 1, 140), 0},
    };
    int n = (int)(sizeof t / sizeof t[0]);
    struct smc_erm_cmd_copy cmds[sizeof t / sizeof t[0]];
    for (int i = 0; i < n; i++)
        cmds[i] = t[i].c;
    CHECK_OK(et_sendmsg(fd, cmds, n, 0));
    struct smc_rmem_compl_event ev[1100];
    et_completions(fd, ev, n, 5000);
    for (int i = 0; i < n; i++)
        expect(&ev[i], t[i].c.tag, t[i].status);
    CHECK(ev[0].copy.addr == mine && ev[0].copy.len == 4096 && ev[0].memid == src &&
          ev[0].peer_memid == id[RW] && ev[0].event == SMC_ERM_CMD_COPY);
    CHECK(ev[2].copy.addr == mine + 4096 && ev[2].offset == 4096 && ev[2].event == SMC_ERM_CMD_READ);

    /* Silent: only the failures complete, in order. */
    for (int i = 0; i < n; i++)
        cmds[i].hdr.flags |= SMC_ERM_CMD_FLAG_SILENT;
    CHECK_OK(et_sendmsg(fd, cmds, n, 0));
    int failures = 0;
    for (int i = 0; i < n; i++)
        failures += t[i].status != 0;
    et_completions(fd, ev, failures, 5000);
    for (int i = 0, k = 0; i < n; i++)
        if (t[i].status)
            expect(&ev[k++], t[i].c.tag, t[i].status);
    CHECK_ERR(et_errqueue(fd, ev, 4), EAGAIN);

    /* Completions not read fill their queue: a sendmsg() that would overflow it runs nothing. */
    struct smc_erm_cmd_copy one = et_cmd(W, 0, src, 0, id[RW], 0, 8, 0);
    int sent = 0;
    for (;; sent++) {
        one.tag = (uint64_t)sent;
        if (et_sendmsg(fd, &one, 1, 0) < 0)
            break;
    }
    CHECK(errno == ENOBUFS && sent >= 1000);
    struct smc_erm_cmd_copy two[2] = {one, one};
    int got = 0;
    while (got < sent) {
        int k = et_errqueue(fd, ev + got, sent - got < 64 ? sent - got : 64);
        CHECK(k > 0);
        got += k;
    }
    for (int i = 0; i < sent; i++)
        CHECK(ev[i].tag == (uint64_t)i && ev[i].status == 0);
    CHECK_OK(et_sendmsg(fd, two, 2, 0));
    CHECK(et_errqueue(fd, ev, 4) == 2);

    et_send_u64(fd, 0);
    et_join();
    close(fd);
    return 0;
}
