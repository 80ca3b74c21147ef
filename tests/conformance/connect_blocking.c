/* Blocking connect and accept, then one request and its reply.
 * usmc-expect: accelerated data */
#include "common.h"

static void client(void *arg)
{
    char reply[6] = {0};
    int fd = cf_connect(AF_INET, *(uint16_t *)arg);
    EXPECT_RET("client write", write(fd, "hello", 5), 5);
    cf_read_exact(fd, reply, 5);
    printf("client got %s\n", reply);
    CHECK(strcmp(reply, "HELLO") == 0);
    EXPECT_RET("client read at EOF", read(fd, reply, sizeof reply), 0);
    close(fd);
}

int main(void)
{
    char buf[5];
    cf_start();
    int s = cf_serve(client);
    cf_read_exact(s, buf, 5);
    for (int i = 0; i < 5; i++)
        buf[i] = (char)(buf[i] - 'a' + 'A');
    EXPECT_RET("server write", write(s, buf, 5), 5);
    close(s);
    cf_join();
    return 0;
}
