/* The registration cache never hands out a stale mapping. Memory from usmc_erm_alloc() freed
 * and allocated again (at the same address, as the kernel likes to give it back) is new memory
 * the peer has not mapped: its writes land in the new allocation, not in the old pages it still
 * holds. The application's own memory unmapped and mapped again at the same address is reached
 * where it is now. Registering the same allocation again costs no new memfd for the peer, and
 * takes about a microsecond. */
#include "common.h"

#include <sys/mman.h>
#include <time.h>

#define SIZE 65536

static void peer(int fd, void *arg)
{
    (void)arg;
    int id;
    unsigned char *src = et_region(fd, SIZE, 0, &id);
    for (;;) {
        uint64_t op = et_recv_u64(fd);
        if (!op)
            break;
        int dst = (int)et_recv_u64(fd);
        memset(src, (int)op, SIZE);
        CHECK_OK(usmc_erm_write(fd, id, 0, dst, 0, SIZE, SMC_ERM_CMD_FLAG_REMOTE_COMPL, op));
        struct smc_rmem_compl_event ev;
        et_completions(fd, &ev, 1, 5000);
        if (ev.status)
            FAIL("write %c: %s", (int)op, et_errname(ev.status));
    }
}

/* The peer writes byte c all over region id; it must land in p. */
static void written(int fd, int id, unsigned char *p, int c)
{
    struct smc_rmem_compl_event ev;

    et_send_u64(fd, (uint64_t)c);
    et_send_u64(fd, (uint64_t)id);
    et_completions(fd, &ev, 1, 5000);
    CHECK(ev.copy.addr == p && ev.copy.len == SIZE && ev.status == 0);
    for (size_t i = 0; i < SIZE; i++)
        if (p[i] != c)
            FAIL("byte %zu is %d, expected '%c'", i, p[i], c);
}

int main(void)
{
    et_start(60);
    int fd = et_pair(1, peer, NULL);
    const unsigned rights = SMC_ACCESS_REMOTE_WRITE;

    int id;
    unsigned char *a = et_region(fd, SIZE, rights, &id);
    written(fd, id, a, 'a');
    CHECK_OK(usmc_erm_dereg_mr(fd, id));
    CHECK_OK(usmc_erm_free(a));
    unsigned char *b = usmc_erm_alloc(SIZE);
    CHECK(b);
    printf("again at the same address: %s\n", b == a ? "yes" : "no");
    id = et_reg(fd, b, SIZE, rights);
    written(fd, id, b, 'b');

    /* the same allocation again and again: one memfd for the peer, a microsecond each */
    int before = et_maps(et_peer(), "memfd:usmc-erm");
    struct timespec t0, t1;
    enum { TIMES = 2000 };
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < TIMES; i++) {
        CHECK_OK(usmc_erm_dereg_mr(fd, id));
        id = et_reg(fd, b, SIZE, rights);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    written(fd, id, b, 'c');
    CHECK(et_maps(et_peer(), "memfd:usmc-erm") == before);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
                TIMES / 1e3;
    printf("cached re-registration with deregistration: %.2f us\n", us);

    /* the application's own memory, unmapped and mapped again at the same address */
    unsigned char *m = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    id = et_reg(fd, m, SIZE, rights);
    written(fd, id, m, 'd');
    CHECK_OK(usmc_erm_dereg_mr(fd, id));
    CHECK_OK(munmap(m, SIZE));
    unsigned char *m2 = mmap(m, SIZE, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(m2 == m);
    id = et_reg(fd, m2, SIZE, rights);
    written(fd, id, m2, 'e');

    et_send_u64(fd, 0);
    et_join();
    close(fd);
    return 0;
}
