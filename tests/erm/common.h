/* Scaffolding of the ERM programs (tests/erm/run.sh): each runs a connection between itself
 * and a peer process it forks, under `usmc run`, checks what ERM does on it and exits 0, or
 * prints what failed and exits 1 (77: skipped, it says why). */
#ifndef ERM_COMMON_H
#define ERM_COMMON_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>
#include <usmc/usmc.h>

/* A watchdog (seconds) and line-buffered output; every program starts here. */
void et_start(unsigned seconds);

_Noreturn void et_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define FAIL(...) et_fail(__FILE__, __LINE__, __VA_ARGS__)
#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond))                                                                     \
            FAIL("check failed: %s", #cond);                                             \
    } while (0)
/* expr must fail with errno want. */
#define CHECK_ERR(expr, want)                                                            \
    do {                                                                                 \
        long r_ = (long)(expr);                                                          \
        int e_ = errno;                                                                  \
        if (r_ != -1 || e_ != (want))                                                    \
            FAIL("%s: %ld %s, expected -1 %s", #expr, r_, r_ == -1 ? et_errname(e_) : "", \
                 et_errname(want));                                                      \
    } while (0)
/* expr must not fail; its value. */
#define CHECK_OK(expr)                                                                   \
    ({                                                                                   \
        long r_ = (long)(expr);                                                          \
        if (r_ < 0)                                                                      \
            FAIL("%s: -1 %s", #expr, et_errname(errno));                                 \
        r_;                                                                              \
    })
const char *et_errname(int err);

/* A connection over loopback between this process and a peer it forks: peer(fd, arg) runs in
 * the child with its end, this process gets the other. server says which end is the
 * accepting one: 1, this process's. et_join() waits for the peer and fails unless it exited 0. */
int et_pair(int server, void (*peer)(int fd, void *arg), void *arg);
void et_join(void);
pid_t et_peer(void);

/* Stream messages between the two, for what the applications tell each other (memids). */
void et_send_u64(int fd, uint64_t v);
uint64_t et_recv_u64(int fd);

/* Commands in one sendmsg(): returns its result (errno set). */
ssize_t et_sendmsg(int fd, const struct smc_erm_cmd_copy *cmd, int n, int flags);
struct smc_erm_cmd_copy et_cmd(uint32_t type, uint32_t flags, int src, uint64_t src_off, int dst,
                               uint64_t dst_off, uint64_t len, uint64_t tag);
/* recvmsg(MSG_ERRQUEUE): the completions it returned into ev (at most max), or -1. */
int et_errqueue(int fd, struct smc_rmem_compl_event *ev, int max);
/* Waits up to ms for POLLERR, then takes completions until want came; fails otherwise. */
void et_completions(int fd, struct smc_rmem_compl_event *ev, int want, int ms);

/* Registers [addr, addr + len) with access on fd: its memid (a failure ends the program). */
int et_reg(int fd, void *addr, size_t len, unsigned access);
/* len bytes of usmc_erm_alloc() memory, registered with access: the memory, *id its memid. */
void *et_region(int fd, size_t len, unsigned access, int *id);
/* Lines of /proc/PID/maps that name what. */
int et_maps(pid_t pid, const char *what);

/* Descriptors this process has open. */
int et_fds(void);
uint64_t et_now_ms(void);

#endif
