/* A new socket first duplicated inside a signal handler: the library may allocate nothing there
 * (the handler may have interrupted the allocator), so that socket stays plain, and its
 * connection works as any other. A socket the handler did not touch still goes through shared
 * memory.
 * usmc-expect: accelerated data
 * usmc-accelerated: 2
 * usmc-fallbacks: 1 */
#include "common.h"

static int fresh, copy;

static void on_usr1(int sig)
{
    (void)sig;
    int e = errno;
    copy = dup(fresh);
    errno = e;
}

/* Two connections, each one message echoed. */
static void server(void *arg)
{
    int l = *(int *)arg;
    char buf[8];

    for (int i = 0; i < 2; i++) {
        int s = cf_accept(l);
        cf_read_exact(s, buf, sizeof buf);
        cf_write_all(s, buf, sizeof buf);
        CHECK(cf_read_full(s, buf, 1) == 0);
        close(s);
    }
}

static void echo(const char *what, int fd, const struct sockaddr_storage *ss, socklen_t len)
{
    char buf[8] = "message";

    EXPECT_RET(what, connect(fd, (const struct sockaddr *)ss, len), 0);
    cf_write_all(fd, buf, sizeof buf);
    memset(buf, 0, sizeof buf);
    cf_read_exact(fd, buf, sizeof buf);
    printf("%s: echoed \"%s\"\n", what, buf);
}

int main(void)
{
    struct sockaddr_storage ss;
    socklen_t len;

    cf_start();
    int l = cf_listen(AF_INET);
    cf_loopback(AF_INET, cf_port(l), &ss, &len);
    cf_spawn(server, &l);
    cf_on_signal(SIGUSR1, on_usr1, 0);
    fresh = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fresh >= 0);
    CHECK(raise(SIGUSR1) == 0);
    CHECK(copy >= 0);
    echo("connected through the duplicate made in the handler", copy, &ss, len);
    close(fresh);
    close(copy);
    int other = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(other >= 0);
    echo("connected without the handler", other, &ss, len);
    close(other);
    cf_join();
    return 0;
}
