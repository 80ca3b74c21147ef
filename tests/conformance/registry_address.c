/* One port, two addresses: a listener on 127.0.0.1 in this process and a plain one (usmc
 * disabled in its process) on 127.0.0.2, and a client connecting to the first, the second,
 * then the first again. The client keeps what it learnt of the port's entry, but must still
 * judge each destination: the connection to 127.0.0.2 stays TCP at once (proposed to the
 * registered listener instead, it would wait out a handshake timeout set here beyond the
 * watchdog), and the next to 127.0.0.1 is accelerated again.
 * usmc-expect: accelerated data
 * usmc-fallbacks: 1
 * usmc-env: USMC_HANDSHAKE_TIMEOUT_MS=120000 */
#include "common.h"

#include <arpa/inet.h>

static struct sockaddr_in address(const char *ip, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};

    CHECK(inet_pton(AF_INET, ip, &sa.sin_addr) == 1);
    return sa;
}

static int listen_on(const char *ip, uint16_t port)
{
    struct sockaddr_in sa = address(ip, port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 4) == 0);
    return fd;
}

/* Messages of one size: each side waits for the other's whole message, so a client whose
 * bytes went where its server does not look waits for them with it. */
#define MSG 32

/* Reads a message, sends it back, closes at the client's EOF. */
static void echo_one(int lfd)
{
    char buf[MSG];
    int fd = cf_accept(lfd);

    cf_read_exact(fd, buf, MSG);
    cf_write_all(fd, buf, MSG);
    CHECK(cf_read_full(fd, buf, MSG) == 0);
    CHECK(close(fd) == 0);
}

/* The plain listener's process: listens, says so on ready_fd, echoes one connection. */
static int plain_server(uint16_t port, int ready_fd)
{
    int lfd = listen_on("127.0.0.2", port);

    cf_write_all(ready_fd, "r", 1);
    echo_one(lfd);
    return 0;
}

static void client(void *arg)
{
    uint16_t port = *(uint16_t *)arg;
    const char *ips[] = {"127.0.0.1", "127.0.0.2", "127.0.0.1"};

    for (unsigned i = 0; i < 3; i++) {
        struct sockaddr_in sa = address(ips[i], port);
        char msg[MSG] = {0}, back[MSG];
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        snprintf(msg, sizeof(msg), "hello %u to %s", i, ips[i]);
        CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
        cf_write_all(fd, msg, MSG);
        cf_read_exact(fd, back, MSG);
        CHECK(memcmp(back, msg, MSG) == 0);
        printf("%s: echoed\n", msg);
        CHECK(close(fd) == 0);
    }
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "plain") == 0)
        return plain_server((uint16_t)atoi(argv[2]), atoi(argv[3]));
    cf_start();

    int lfd = listen_on("127.0.0.1", 0);
    uint16_t port = cf_port(lfd);
    int ready[2];
    CHECK(pipe(ready) == 0);

    pid_t plain = cf_fork();
    if (plain == 0) {
        char p[16], r[16], *args[] = {argv[0], "plain", p, r, NULL};
        snprintf(p, sizeof(p), "%u", port);
        snprintf(r, sizeof(r), "%d", ready[1]);
        CHECK(setenv("USMC_DISABLE", "1", 1) == 0);
        execv("/proc/self/exe", args);
        FAIL("execv: %s", cf_errname(errno));
    }
    char c;
    cf_read_exact(ready[0], &c, 1);

    cf_spawn(client, &port);
    echo_one(lfd);
    echo_one(lfd);
    cf_join();
    CHECK(cf_wait_child(plain) == 0);
    printf("done\n");
    return 0;
}
