/* A client writes, then passes its connection over a Unix socket before the server has
 * accepted; the receiving process writes the rest and shuts down. The server, accepting
 * only after 300 ms, reads one ordered stream and EOF: the connection's outcome (here a
 * fallback, as the pass does not wait that long for the accept) is settled before a second
 * process may write on it.
 * usmc-expect: none
 * usmc-fallbacks: 2 */
#include "common.h"

static const char stream[] = "sender|receiver";

static void client(void *arg)
{
    int pair[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
    pid_t receiver = cf_fork();
    if (receiver == 0) {
        int fd;
        close(pair[0]);
        cf_recv_fds(pair[1], &fd, 1);
        cf_write_all(fd, stream + 7, sizeof(stream) - 8);
        cf_expect_ok(fd);
        _exit(0);
    }
    close(pair[1]);
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    cf_write_all(fd, stream, 7);
    cf_send_fds(pair[0], &fd, 1);
    close(fd);
    printf("receiver exit status: %d\n", cf_wait_child(receiver));
}

int main(void)
{
    cf_start();
    cf_answer_ok(cf_serve_late(client, 300), stream, sizeof(stream) - 1);
    cf_join();
    return 0;
}
