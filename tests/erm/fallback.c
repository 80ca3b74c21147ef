/* erm-expect: fallback */
/* A connection that stays plain TCP (its server does not run usmc), a socket not connected
 * yet, and a listener: every ERM call fails with EOPNOTSUPP, never silently, and the stream
 * itself works as TCP's. Without usmc, the kernel's TCP has no level SOL_SMC: ENOPROTOOPT. */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static void check_refused(int fd, void *buf)
{
    struct smc_erm_cmd_reg_mr r = {.type = SMC_ERM_CMD_REG_MR, .addr = buf, .len = 4096};
    struct smc_erm_cmd_copy c = et_cmd(SMC_ERM_CMD_COPY, 0, 0, 0, 0, 0, 8, 0);
    struct smc_erm_peer_mr pm[2];
    socklen_t pl = sizeof pm;
    struct smc_rmem_compl_event ev[2];

    CHECK_ERR(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &r, sizeof r), EOPNOTSUPP);
    CHECK_ERR(getsockopt(fd, SOL_SMC, SMC_ERM_PEER_MRS, pm, &pl), EOPNOTSUPP);
    CHECK_ERR(et_sendmsg(fd, &c, 1, 0), EOPNOTSUPP);
    CHECK_ERR(usmc_erm_reg_mr(fd, buf, 4096, 0), EOPNOTSUPP);
    CHECK_ERR(usmc_erm_dereg_mr(fd, 0), EOPNOTSUPP);
    CHECK_ERR(usmc_erm_write(fd, 0, 0, 0, 0, 8, 0, 0), EOPNOTSUPP);
    CHECK_ERR(usmc_erm_read(fd, 0, 0, 0, 0, 8, 0, 0), EOPNOTSUPP);
    CHECK(usmc_erm_cq_open(fd) == NULL && errno == EOPNOTSUPP);
    /* the kernel's own error queue is empty */
    CHECK_ERR(et_errqueue(fd, ev, 2), EAGAIN);
}

int main(void)
{
    et_start(60);
    char *buf = usmc_erm_alloc(4096);
    CHECK(buf);

    /* A server that does not run usmc: its socket calls go straight to the kernel. */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int l = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
    CHECK(l >= 0);
    CHECK_OK(syscall(SYS_bind, l, &a, sizeof a));
    CHECK_OK(syscall(SYS_listen, l, 1));
    CHECK_OK(syscall(SYS_getsockname, l, &a, &al));
    pid_t pid = CHECK_OK(fork());
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int s = (int)syscall(SYS_accept4, l, NULL, NULL, 0);
        char c;
        while (syscall(SYS_read, s, &c, 1) == 1)
            syscall(SYS_write, s, &c, 1);
        _exit(0);
    }
    close(l);
    int fd = CHECK_OK(socket(AF_INET, SOCK_STREAM, 0));
    check_refused(fd, buf); /* not connected yet */
    CHECK_OK(connect(fd, (struct sockaddr *)&a, sizeof a));
    CHECK(write(fd, "x", 1) == 1);
    char c;
    CHECK(read(fd, &c, 1) == 1 && c == 'x');
    check_refused(fd, buf);
    close(fd);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);

    int lst = CHECK_OK(socket(AF_INET, SOCK_STREAM, 0));
    CHECK_OK(listen(lst, 1));
    check_refused(lst, buf);
    close(lst);

    /* what a program without usmc gets: the kernel's own answer */
    int raw = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
    struct smc_erm_cmd_reg_mr r = {.type = SMC_ERM_CMD_REG_MR, .addr = buf, .len = 4096};
    CHECK_ERR(syscall(SYS_setsockopt, raw, SOL_SMC, SMC_ERM_CMD, &r, sizeof r), ENOPROTOOPT);
    close(raw);
    return 0;
}
