/* A server that forks a process per connection (as FTP servers do) and makes the child the
 * socket's owner: the child, not the process that accepted, gets SIGURG and the byte.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char c;
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_wait();
    EXPECT_RET("urgent send", send(fd, "A", 1, MSG_OOB), 1);
    EXPECT_RET("answer", read(fd, &c, 1), 1);
    printf("answer '%c'\n", c);
    close(fd);
}

int main(void)
{
    char c = 0;
    cf_start();
    cf_catch_sigurg();
    int s = cf_serve(client);
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t child = cf_fork();
    if (child == 0) {
        close(ready[0]);
        CHECK(fcntl(s, F_SETOWN, getpid()) == 0);
        CHECK(write(ready[1], "r", 1) == 1);
        cf_wait_sigurg(1, 2000);
        printf("child: SIGURG %d\n", (int)cf_urgent_signals);
        long r = recv(s, &c, 1, MSG_OOB);
        printf("child: urgent %ld '%c'\n", r, r == 1 ? c : '?');
        cf_write_all(s, &c, 1);
        close(s);
        _exit(0);
    }
    close(ready[1]);
    CHECK(read(ready[0], &c, 1) == 1);
    close(s);
    cf_post();
    printf("child exit %d\n", cf_wait_child(child));
    printf("SIGURG here: %d\n", (int)cf_urgent_signals);
    cf_join();
    return 0;
}
