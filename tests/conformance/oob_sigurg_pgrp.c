/* SIGURG to a process group owner (F_SETOWN with minus the group, SIOCSPGRP): every process
 * of the group gets it, the reader and a forked child alike.
 * usmc-expect: accelerated data */
#include "common.h"

/* One urgent byte; the reader's count of SIGURGs once it reached want (or a second passed),
 * and whether the other member acknowledged one more. */
static void urgent_one(const char *after, int want, int acks)
{
    char c;
    struct pollfd p = {.fd = acks, .events = POLLIN};
    cf_post_u64(1);
    cf_wait();
    cf_wait_sigurg(want, 1000);
    int got = poll(&p, 1, 1000) == 1 && read(acks, &c, 1) == 1;
    printf("after %s: %d SIGURG, the other member got it: %d\n", after, (int)cf_urgent_signals,
           got);
}

int main(void)
{
    char c;
    int acks[2];
    cf_start();
    cf_catch_sigurg();
    CHECK(setpgid(0, 0) == 0);
    int s = cf_serve(cf_urgent_sender);
    CHECK(pipe(acks) == 0);
    pid_t child = cf_fork();
    if (child == 0) {
        /* A member of the group that holds no part in the connection. */
        close(s);
        close(acks[0]);
        cf_urgent_ack = acks[1];
        if (write(cf_urgent_ack, "r", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(acks[1]);
    CHECK(read(acks[0], &c, 1) == 1);
    pid_t group = -getpgrp();
    CHECK(fcntl(s, F_SETOWN, group) == 0);
    urgent_one("F_SETOWN -group", 1, acks[0]);
    CHECK(ioctl(s, SIOCSPGRP, &group) == 0);
    urgent_one("SIOCSPGRP", 2, acks[0]);
    kill(child, SIGKILL);
    cf_wait_child(child);
    cf_post_u64(0);
    /* The urgent bytes, out of line, leave nothing to read. */
    EXPECT_RET("read to EOF", read(s, &(char){0}, 1), 0);
    close(s);
    cf_join();
    return 0;
}
