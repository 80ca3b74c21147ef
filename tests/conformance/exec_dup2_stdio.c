/* The inetd pattern: a forked child makes the accepted socket its standard input, output
 * and error (dup2, then closes the original) and execs a shell that runs cat, which
 * echoes the client's 100 000 bytes, then writes a last line to standard error. Three
 * descriptors of one connection in the new program, two of them writing in turn: the
 * client gets every byte in order, then EOF.
 * usmc-expect: accelerated data */
#include "common.h"

int main(void)
{
    cf_start();
    int l = cf_listen_spawn(cf_stdio_echo_client);
    int s = cf_accept(l);
    pid_t child = cf_fork();
    if (child == 0) {
        if (dup2(s, 0) < 0 || dup2(s, 1) < 0 || dup2(s, 2) < 0)
            _exit(126);
        close(s);
        close(l);
        execl("/bin/sh", "sh", "-c", CF_STDIO_SHELL, (char *)NULL);
        _exit(127);
    }
    close(s);
    printf("shell exit status: %d\n", cf_wait_child(child));
    cf_join();
    return 0;
}
