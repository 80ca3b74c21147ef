/* A server that runs other programs with vfork() and exec while it holds a connection
 * (as Python's subprocess does): three children exec /bin/true, the connection's
 * descriptor inherited by them, and the server keeps echoing; then the client sees EOF.
 * usmc-expect: accelerated data */
#include "common.h"

#include <sys/wait.h>

#define TOTAL (64u << 10)

static void client(void *arg)
{
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    uint64_t n = cf_echo_client(fd, TOTAL, 71);
    printf("client got back %llu\n", (unsigned long long)n);
    CHECK(n == TOTAL);
    close(fd);
}

int main(void)
{
    cf_start();
    int l = cf_listen_spawn(client);
    int s = cf_accept(l);
    for (int i = 0; i < 3; i++) {
        pid_t pid = vfork();
        if (pid == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int st = -1;
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
        printf("child %d: exit status %d\n", i, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    printf("server echoed %zu\n", cf_echo_after_eof(s));
    close(s);
    cf_join();
    return 0;
}
