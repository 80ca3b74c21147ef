/* Plain clients beside accelerated ones on one listener: in the peer, one thread connects
 * through the library and another through raw system calls, which the library never sees,
 * both at once, while the server accepts and echoes a byte on each. Every connection the
 * library made is accelerated and every raw one stays plain, whatever order the kernel
 * queues them in: a raw connection must not take a proposal, nor make the server miss one.
 * usmc-expect: accelerated data
 * usmc-fallbacks: 300
 * usmc-accelerated: 600 */
/* threads */
#include "common.h"

#include <sys/syscall.h>

#define EACH 300

static struct sockaddr_storage srv;
static socklen_t srv_len;

static void *accelerated(void *arg)
{
    (void)arg;
    for (int i = 0; i < EACH; i++) {
        char c = 'a';
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0);
        CHECK(connect(fd, (struct sockaddr *)&srv, srv_len) == 0);
        cf_write_all(fd, &c, 1);
        cf_read_exact(fd, &c, 1);
        CHECK(c == 'a');
        close(fd);
    }
    return NULL;
}

/* System calls the library does not wrap: a client usmc cannot see. */
static void *raw(void *arg)
{
    (void)arg;
    for (int i = 0; i < EACH; i++) {
        char c = 'p';
        int fd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0);
        CHECK(syscall(SYS_connect, fd, (struct sockaddr *)&srv, srv_len) == 0);
        CHECK(syscall(SYS_write, fd, &c, 1) == 1);
        CHECK(syscall(SYS_read, fd, &c, 1) == 1 && c == 'p');
        syscall(SYS_close, fd);
    }
    return NULL;
}

static void clients(void *port)
{
    pthread_t a, p;

    cf_loopback(AF_INET, *(uint16_t *)port, &srv, &srv_len);
    CHECK(pthread_create(&a, NULL, accelerated, NULL) == 0);
    CHECK(pthread_create(&p, NULL, raw, NULL) == 0);
    pthread_join(a, NULL);
    pthread_join(p, NULL);
}

int main(void)
{
    int echoed = 0;

    cf_start();
    int l = cf_listen_spawn(clients);
    for (int i = 0; i < 2 * EACH; i++) {
        char c;
        int s = cf_accept(l);
        cf_read_exact(s, &c, 1);
        cf_write_all(s, &c, 1);
        close(s);
        echoed++;
    }
    printf("echoed on %d connections\n", echoed);
    cf_join();
    close(l);
    return 0;
}
