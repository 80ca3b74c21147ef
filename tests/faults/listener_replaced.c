/* A client process that keeps running while the listener on a port is killed and another
 * process takes the port over. The client remembers what it read of the port's registry
 * entry; it must notice every change of it: the dead listener's entry (its connect is
 * refused, as TCP refuses it, and the entry goes), the port with no entry left, and the
 * new listener's entry, to which its next connection is accelerated.
 *
 * usage: listener_replaced */
#include "faults.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROBE 4096u

/* A listener on port (0: any), in a process of its own; returns its pid and sets *port. */
static pid_t serve(uint16_t *port)
{
    struct fl_chan ch;
    pid_t pid;

    fl_chan_init(&ch);
    pid = fl_fork();
    if (pid == 0) {
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(*port)};
        int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        fl_chan_side(&ch, 1);
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        /* The killed listener's connections may linger in TIME_WAIT on the port. */
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 16) < 0)
            FAIL("listen on %u: %s", *port, fl_errname(errno));
        fl_post(&ch, fl_local_port(fd));
        fl_echo_server(fd);
    }
    fl_chan_side(&ch, 0);
    *port = (uint16_t)fl_wait(&ch);
    return pid;
}

/* One echo through a new connection, which must be accelerated. */
static void echo_accelerated(uint16_t port, const char *when)
{
    struct fl_tally t;
    int fd;

    fl_tally(&t);
    fd = fl_connect(port);
    fl_send_stream(fd, false, 0, PROBE, 9);
    fl_expect_readable(fd, 10000, "the echo");
    fl_recv_stream(fd, false, 0, PROBE, 9);
    close(fd);
    if (strcmp(fl_outcome(&t), "accelerated"))
        FAIL("%s: the connection was %s, not accelerated", when, fl_outcome(&t));
}

int main(void)
{
    uint16_t port = 0;

    fl_start(30);
    pid_t first = serve(&port);
    echo_accelerated(port, "first listener");

    kill(first, SIGKILL);
    fl_reap(first);
    /* The entry still names the dead listener: the connect finds nobody, and the
     * client drops the entry on its way to the refusal. */
    EXPECT_ERRNO(fl_try_connect(port), ECONNREFUSED);
    /* Now no entry: still refused. */
    EXPECT_ERRNO(fl_try_connect(port), ECONNREFUSED);

    pid_t second = serve(&port);
    echo_accelerated(port, "second listener on the same port");

    kill(second, SIGKILL);
    fl_reap(second);
    puts("listener_replaced: ok");
    return 0;
}
