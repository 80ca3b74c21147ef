/* Every call's errors: malformed requests fail with EINVAL (or EFAULT for memory that is not
 * mapped as asked), sockets usmc does not carry through shared memory with EOPNOTSUPP, other
 * descriptors as the kernel says, and unknown SOL_SMC options as the kernel's TCP does. */
#include "common.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>

static void peer(int fd, void *arg)
{
    (void)arg;
    char *buf = usmc_erm_alloc(4096);
    CHECK(buf);
    et_send_u64(fd, (uint64_t)et_reg(fd, buf, 4096, SMC_ACCESS_REMOTE_WRITE));
    et_recv_u64(fd); /* done */
}

static void regmr(int fd, void *addr, uint64_t len, uint32_t access, int want)
{
    struct smc_erm_cmd_reg_mr r = {.type = SMC_ERM_CMD_REG_MR, .addr = addr, .len = len,
                                   .access_flags = access};
    CHECK_ERR(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &r, sizeof r), want);
}

int main(void)
{
    et_start(60);
    int fd = et_pair(1, peer, NULL);
    int remote = (int)et_recv_u64(fd);
    char *buf = usmc_erm_alloc(8192);
    CHECK(buf);

    /* setsockopt(SMC_ERM_CMD) */
    struct smc_erm_cmd_reg_mr r = {.type = SMC_ERM_CMD_REG_MR, .addr = buf, .len = 8192};
    CHECK_ERR(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &r, sizeof r - 1), EINVAL);
    CHECK_ERR(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, NULL, 0), EINVAL);
    r.type = 99;
    CHECK_ERR(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &r, sizeof r), EINVAL);
    regmr(fd, NULL, 8192, 0, EINVAL);
    regmr(fd, buf, 0, 0, EINVAL);
    regmr(fd, buf, 8192, 0x100, EINVAL);
    regmr(fd, (void *)(uintptr_t)-4096, 8192, 0, EINVAL);
    /* memory that is not mapped, or not writable where a write right is asked for */
    char *hole = mmap(NULL, 3 * 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(hole != MAP_FAILED);
    CHECK_OK(munmap(hole + 4096, 4096));
    regmr(fd, hole, 3 * 4096, 0, EFAULT);
    regmr(fd, hole, 4096, SMC_ACCESS_LOCAL_WRITE, EFAULT);
    regmr(fd, hole, 4096, SMC_ACCESS_REMOTE_WRITE, EFAULT);
    CHECK_OK(setsockopt(fd, SOL_SMC, SMC_ERM_CMD,
                        &(struct smc_erm_cmd_reg_mr){SMC_ERM_CMD_REG_MR, SMC_ACCESS_REMOTE_READ,
                                                     hole, 4096},
                        sizeof r));
    /* the one that worked has the lowest memid, and others follow */
    int a = et_reg(fd, buf, 4096, SMC_ACCESS_LOCAL_WRITE);
    int b = et_reg(fd, buf + 4096, 4096, SMC_ACCESS_REMOTE_READ | SMC_ACCESS_REMOTE_WRITE);
    CHECK(a == 1 && b == 2);

    /* DEREG_MR */
    struct smc_erm_cmd_dereg_mr d = {.type = SMC_ERM_CMD_DEREG_MR, .memid = 77};
    CHECK_ERR(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &d, sizeof d), EINVAL);
    d.memid = -1;
    CHECK_ERR(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &d, sizeof d), EINVAL);
    d.memid = 0;
    CHECK(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &d, sizeof d) == 0);
    CHECK_ERR(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &d, sizeof d), EINVAL);
    CHECK_ERR(usmc_erm_dereg_mr(fd, 0), EINVAL);

    /* unknown options at level SOL_SMC, as the kernel's TCP answers them */
    int one = 1;
    CHECK_ERR(setsockopt(fd, SOL_SMC, 1, &one, sizeof one), ENOPROTOOPT);
    socklen_t ol = sizeof one;
    CHECK_ERR(getsockopt(fd, SOL_SMC, 1, &one, &ol), ENOPROTOOPT);
    CHECK_ERR(getsockopt(fd, SOL_SMC, SMC_ERM_PEER_MRS, NULL, NULL), EFAULT);

    /* malformed commands fail the whole sendmsg(): nothing runs */
    struct smc_erm_cmd_copy c = et_cmd(SMC_ERM_CMD_COPY, 0, a, 0, remote, 0, 16, 1);
    struct smc_erm_cmd_copy bad[4] = {c, c, c, c};
    bad[1].hdr.type = 9;
    bad[2].hdr.flags = 0x80;
    bad[3].len = 0;
    for (int i = 1; i < 4; i++) {
        struct smc_erm_cmd_copy two[2] = {c, bad[i]};
        CHECK_ERR(et_sendmsg(fd, two, 2, 0), EINVAL);
    }
    union {
        char b[CMSG_SPACE(sizeof c) + 8];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr mh = {.msg_control = u.b, .msg_controllen = CMSG_SPACE(sizeof c)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SMC;
    cm->cmsg_type = SMC_ERM_CMD;
    cm->cmsg_len = CMSG_LEN(sizeof c - 8);
    CHECK_ERR(sendmsg(fd, &mh, 0), EINVAL);
    cm->cmsg_len = CMSG_LEN(sizeof c);
    cm->cmsg_type = SMC_ERM_CMD_COMPL;
    CHECK_ERR(sendmsg(fd, &mh, 0), EINVAL);
    struct smc_rmem_compl_event ev[4];
    CHECK_ERR(et_errqueue(fd, ev, 4), EAGAIN);

    /* and a good one completes */
    CHECK_OK(et_sendmsg(fd, &c, 1, 0));
    et_completions(fd, ev, 1, 5000);
    CHECK(ev[0].status == 0 && ev[0].tag == 1);

    /* a control buffer too small for one completion: MSG_CTRUNC, and it stays */
    CHECK_OK(et_sendmsg(fd, &c, 1, 0));
    char small[8];
    mh = (struct msghdr){.msg_control = small, .msg_controllen = sizeof small};
    CHECK_OK(recvmsg(fd, &mh, MSG_ERRQUEUE));
    CHECK(mh.msg_flags & MSG_CTRUNC);
    CHECK(et_errqueue(fd, ev, 4) == 1);

    /* usmc_erm_alloc() and usmc_erm_free() */
    errno = 0;
    CHECK(!usmc_erm_alloc(0) && errno == EINVAL);
    CHECK_ERR(usmc_erm_free(buf + 1), EINVAL);
    CHECK_ERR(usmc_erm_free(buf), EBUSY); /* still registered */
    CHECK(usmc_erm_free(NULL) == 0);
    char *spare = usmc_erm_alloc(1);
    CHECK(spare && ((uintptr_t)spare & 4095) == 0 && spare[4095] == 0);
    CHECK_OK(usmc_erm_free(spare));

    /* other descriptors */
    int p[2];
    CHECK_OK(pipe(p));
    CHECK_ERR(setsockopt(p[0], SOL_SMC, SMC_ERM_CMD, &r, sizeof r), ENOTSOCK);
    CHECK_ERR(usmc_erm_reg_mr(p[0], buf, 4096, 0), ENOTSOCK);
    CHECK_ERR(usmc_erm_write(p[1], a, 0, remote, 0, 1, 0, 0), ENOTSOCK);
    CHECK(usmc_erm_cq_open(p[0]) == NULL && errno == ENOTSOCK);
    CHECK_ERR(usmc_erm_reg_mr(9999, buf, 4096, 0), EBADF);
    int udp = CHECK_OK(socket(AF_INET, SOCK_DGRAM, 0));
    CHECK_ERR(usmc_erm_reg_mr(udp, buf, 4096, 0), EOPNOTSUPP);
    CHECK_ERR(et_sendmsg(udp, &c, 1, 0), EOPNOTSUPP);
    int tcp = CHECK_OK(socket(AF_INET, SOCK_STREAM, 0));
    CHECK_ERR(usmc_erm_reg_mr(tcp, buf, 4096, 0), EOPNOTSUPP);
    CHECK_ERR(setsockopt(tcp, SOL_SMC, SMC_ERM_CMD, &r, sizeof r), EOPNOTSUPP);
    CHECK_ERR(setsockopt(tcp, SOL_SMC, 1, &one, sizeof one), ENOPROTOOPT);
    CHECK_ERR(usmc_erm_poll(NULL, ev, 1), EINVAL);

    et_send_u64(fd, 0);
    et_join();
    close(fd);
    return 0;
}
