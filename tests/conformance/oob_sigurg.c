/* SIGURG goes to the socket's owner (F_SETOWN, F_SETOWN_EX, FIOSETOWN) when urgent data
 * arrives, once per urgent send, and to nobody once the owner is cleared.
 * usmc-expect: accelerated data */
#include "common.h"

/* One urgent byte, then the count of SIGURGs a second at most after it reached want. */
static void urgent_one(const char *after, int want)
{
    cf_post_u64(1);
    cf_wait();
    cf_wait_sigurg(want, 1000);
    usleep(20000);
    printf("after %s: %d SIGURG\n", after, (int)cf_urgent_signals);
}

int main(void)
{
    cf_start();
    cf_catch_sigurg();
    int s = cf_serve(cf_urgent_sender);
    pid_t me = getpid();
    CHECK(fcntl(s, F_SETOWN, me) == 0);
    printf("owner: %d\n", fcntl(s, F_GETOWN) == me);
    urgent_one("F_SETOWN", 1);
    struct f_owner_ex ex = {F_OWNER_PID, me};
    CHECK(fcntl(s, F_SETOWN_EX, &ex) == 0);
    urgent_one("F_SETOWN_EX", 2);
    CHECK(ioctl(s, FIOSETOWN, &me) == 0);
    urgent_one("FIOSETOWN", 3);
    CHECK(fcntl(s, F_SETOWN, 0) == 0);
    urgent_one("no owner", 4);
    cf_post_u64(0);
    /* The urgent bytes, out of line, leave nothing to read. */
    EXPECT_RET("read to EOF", read(s, &(char){0}, 1), 0);
    close(s);
    cf_join();
    return 0;
}
