/* 300 short connections one after another, each: connect, request, reply, close from both
 * sides.
 * usmc-expect: accelerated data */
#include "common.h"

#define ROUNDS 300

static void client(void *arg)
{
    int good = 0;
    for (int i = 0; i < ROUNDS; i++) {
        uint32_t v = (uint32_t)i, back;
        int fd = cf_connect(AF_INET, *(uint16_t *)arg);
        cf_write_all(fd, &v, sizeof v);
        cf_read_exact(fd, &back, sizeof back);
        good += back == v * 3 + 1;
        char c;
        CHECK(read(fd, &c, 1) == 0);
        close(fd);
    }
    printf("client: %d of %d replies right\n", good, ROUNDS);
    CHECK(good == ROUNDS);
}

int main(void)
{
    cf_start();
    int l = cf_listen_spawn(client);
    for (int i = 0; i < ROUNDS; i++) {
        uint32_t v;
        int s = cf_accept(l);
        cf_read_exact(s, &v, sizeof v);
        CHECK(v == (uint32_t)i);
        v = v * 3 + 1;
        cf_write_all(s, &v, sizeof v);
        close(s);
    }
    printf("server served %d\n", ROUNDS);
    cf_join();
    return 0;
}
