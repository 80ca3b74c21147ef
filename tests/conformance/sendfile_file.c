/* sendfile from a 6 MiB file to a socket, whole and from an offset: the counts, the offset
 * update and the bytes the peer receives.
 * usmc-expect: accelerated data */
#include "common.h"

#include <sys/sendfile.h>

#define SIZE (6u << 20)

static void server(void *arg)
{
    int s = cf_accept(*(int *)arg);
    cf_recv_pattern_n(s, SIZE, 1 << 16, 41);
    char *buf = malloc(SIZE);
    CHECK(buf);
    size_t n = cf_read_full(s, buf, SIZE);
    printf("server received file then %zu bytes of its tail\n", n);
    CHECK(n == SIZE - 1000000 && cf_verify(buf, n, 1000000, 41));
    free(buf);
    close(s);
}

int main(void)
{
    char path[] = "/tmp/usmc-sendfile.XXXXXX";
    cf_start();
    int file = mkstemp(path);
    CHECK(file >= 0);
    unlink(path);
    cf_send_pattern(file, SIZE, 1 << 20, 41);
    int l = cf_listen(AF_INET);
    cf_spawn(server, &l);
    int fd = cf_connect(AF_INET, cf_port(l));
    CHECK(lseek(file, 0, SEEK_SET) == 0);
    size_t left = SIZE;
    while (left > 0) {
        ssize_t r = sendfile(fd, file, NULL, left);
        CHECK(r > 0);
        left -= (size_t)r;
    }
    printf("file position after sendfile: %lld\n", (long long)lseek(file, 0, SEEK_CUR));
    off_t off = 1000000;
    while (off < (off_t)SIZE) {
        ssize_t r = sendfile(fd, file, &off, SIZE - (size_t)off);
        CHECK(r > 0);
    }
    printf("offset after sendfile with offset: %lld\n", (long long)off);
    printf("file position unchanged: %lld\n", (long long)lseek(file, 0, SEEK_CUR));
    close(fd);
    close(file);
    cf_join();
    return 0;
}
