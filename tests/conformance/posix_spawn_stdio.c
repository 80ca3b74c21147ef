/* posix_spawn() with file actions that make the accepted socket the new program's
 * standard input, output and error and close the original: a shell runs cat, which echoes
 * the client's 100 000 bytes, then writes a last line to standard error. The server
 * closes its copy after the spawn; the client gets every byte in order, then EOF.
 * usmc-expect: accelerated data */
#include "common.h"

#include <spawn.h>
#include <sys/wait.h>

int main(void)
{
    cf_start();
    int l = cf_listen_spawn(cf_stdio_echo_client);
    int s = cf_accept(l);
    posix_spawn_file_actions_t fa;
    CHECK(posix_spawn_file_actions_init(&fa) == 0);
    for (int std = 0; std < 3; std++)
        CHECK(posix_spawn_file_actions_adddup2(&fa, s, std) == 0);
    CHECK(posix_spawn_file_actions_addclose(&fa, s) == 0);
    CHECK(posix_spawn_file_actions_addclose(&fa, l) == 0);
    char *argv[] = {"sh", "-c", CF_STDIO_SHELL, NULL};
    pid_t pid;
    CHECK(posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    close(s);
    int st = -1;
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("shell exit status: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    cf_join();
    return 0;
}
