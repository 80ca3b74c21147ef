/* Bytes land where they should, for every kind of memory on each side: usmc_erm_alloc()
 * memory (shared: one memcpy()), malloc() memory that starts and ends inside a page, a
 * page-aligned mmap(), and the stack (reached by the kernel); writes and reads, of a byte and
 * of 4 MB; and the target's remote completion names its own region, offset and length, with the
 * initiator's tag. Nothing beyond a region is touched. */
#include "common.h"

#include <sys/mman.h>

#define BIG (4u << 20)
enum { SHM, HEAP, PAGES, KINDS };
static const char *const kind_name[KINDS] = {"usmc_erm_alloc", "malloc", "mmap"};

/* A region of kind k: len bytes with a guard byte on each side. */
static unsigned char *region(int k, size_t len)
{
    unsigned char *p;

    switch (k) {
    case SHM:
        p = usmc_erm_alloc(len + 2);
        break;
    case HEAP:
        p = malloc(len + 2 + 13);
        if (p)
            p += 13; /* neither end on a page boundary */
        break;
    default:
        p = mmap(NULL, len + 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            p = NULL;
    }
    CHECK(p);
    p[0] = p[len + 1] = 0xee;
    return p + 1;
}

static unsigned char pattern(uint64_t i, unsigned seed)
{
    return (unsigned char)((i * 2654435761u) >> 13 ^ seed);
}

static void fill(unsigned char *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = pattern(i, seed);
}

static int same(const unsigned char *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != pattern(i, seed))
            return 0;
    return 1;
}

/* The peer: one region of each kind, registered for both directions; it fills its read
 * sources, checks what was written and returns each region's remote completions. */
static void peer(int fd, void *arg)
{
    (void)arg;
    unsigned char *r[KINDS];
    unsigned char stack_region[4096 + 2];
    for (int k = 0; k < KINDS; k++) {
        r[k] = region(k, BIG);
        et_send_u64(fd, (uint64_t)et_reg(fd, r[k], BIG,
                                         SMC_ACCESS_REMOTE_READ | SMC_ACCESS_REMOTE_WRITE |
                                             SMC_ACCESS_LOCAL_WRITE));
    }
    stack_region[0] = stack_region[4097] = 0xee;
    et_send_u64(fd, (uint64_t)et_reg(fd, stack_region + 1, 4096, SMC_ACCESS_REMOTE_WRITE));
    for (;;) {
        uint64_t op = et_recv_u64(fd);
        if (op == 0)
            break;
        /* op: kind + 1, seed, len, offset; fill for a read, check after a write */
        int k = (int)op - 1;
        unsigned seed = (unsigned)et_recv_u64(fd);
        uint64_t len = et_recv_u64(fd), off = et_recv_u64(fd), check = et_recv_u64(fd);
        unsigned char *p = k == KINDS ? stack_region + 1 : r[k];
        if (!check) {
            fill(p + off, len, seed);
            et_send_u64(fd, 1);
            continue;
        }
        struct smc_rmem_compl_event ev;
        et_completions(fd, &ev, 1, 10000);
        if (!(ev.flags & SMC_ERM_COMPL_REMOTE) || ev.status || ev.copy.addr != p + off ||
            ev.copy.len != len || ev.offset != off || ev.tag != seed)
            FAIL("remote completion on %s: flags %u status %s addr %+ld len %llu tag %llu",
                 k == KINDS ? "stack" : kind_name[k], ev.flags, et_errname(ev.status),
                 (long)((unsigned char *)ev.copy.addr - p), (unsigned long long)ev.copy.len,
                 (unsigned long long)ev.tag);
        CHECK(ev.event == (check == 1 ? SMC_ERM_CMD_COPY : SMC_ERM_CMD_READ));
        if (check == 1 && !same(p + off, len, seed))
            FAIL("%s: the bytes written are not there", k == KINDS ? "stack" : kind_name[k]);
        CHECK(p[-1] == 0xee && (k == KINDS ? stack_region[4097] : p[BIG]) == 0xee);
        et_send_u64(fd, 1);
    }
}

/* One command, its completion, and the peer's view of it. */
static void run(int fd, uint32_t type, int mine_id, unsigned char *mine, uint64_t mine_off,
                int pk, int peer_id, uint64_t peer_off, uint64_t len, unsigned seed)
{
    int write = type == SMC_ERM_CMD_COPY;
    struct smc_rmem_compl_event ev;

    if (write) {
        fill(mine + mine_off, len, seed);
    } else {
        et_send_u64(fd, (uint64_t)pk + 1);
        et_send_u64(fd, seed);
        et_send_u64(fd, len);
        et_send_u64(fd, peer_off);
        et_send_u64(fd, 0);
        et_recv_u64(fd);
        memset(mine + mine_off, 0, len);
    }
    et_send_u64(fd, (uint64_t)pk + 1);
    et_send_u64(fd, seed);
    et_send_u64(fd, len);
    et_send_u64(fd, peer_off);
    et_send_u64(fd, write ? 1 : 2);
    struct smc_erm_cmd_copy c = write ? et_cmd(type, SMC_ERM_CMD_FLAG_REMOTE_COMPL, mine_id,
                                               mine_off, peer_id, peer_off, len, seed)
                                      : et_cmd(type, SMC_ERM_CMD_FLAG_REMOTE_COMPL, peer_id,
                                               peer_off, mine_id, mine_off, len, seed);
    CHECK_OK(et_sendmsg(fd, &c, 1, 0));
    et_completions(fd, &ev, 1, 10000);
    if (ev.status)
        FAIL("%s of %llu bytes: %s", write ? "write" : "read", (unsigned long long)len,
             et_errname(ev.status));
    CHECK(ev.copy.addr == mine + mine_off && ev.copy.len == len);
    if (!write && !same(mine + mine_off, len, seed))
        FAIL("read of %llu bytes: not what the peer holds", (unsigned long long)len);
    et_recv_u64(fd);
    CHECK(mine[-1] == 0xee && mine[BIG] == 0xee);
}

int main(void)
{
    et_start(120);
    int fd = et_pair(1, peer, NULL);
    int peer_id[KINDS + 1];
    for (int k = 0; k <= KINDS; k++)
        peer_id[k] = (int)et_recv_u64(fd);
    unsigned seed = 1;
    for (int mk = 0; mk < KINDS; mk++) {
        unsigned char *mine = region(mk, BIG);
        int id = et_reg(fd, mine, BIG, SMC_ACCESS_LOCAL_WRITE);
        for (int pk = 0; pk < KINDS; pk++) {
            printf("%s -> %s\n", kind_name[mk], kind_name[pk]);
            run(fd, SMC_ERM_CMD_COPY, id, mine, 0, pk, peer_id[pk], 0, 1, seed++);
            run(fd, SMC_ERM_CMD_COPY, id, mine, 4095, pk, peer_id[pk], BIG - 4097, 4097, seed++);
            run(fd, SMC_ERM_CMD_COPY, id, mine, 0, pk, peer_id[pk], 0, BIG, seed++);
            run(fd, SMC_ERM_CMD_READ, id, mine, 7, pk, peer_id[pk], 4093, 9000, seed++);
            run(fd, SMC_ERM_CMD_READ, id, mine, 0, pk, peer_id[pk], 0, BIG, seed++);
        }
        run(fd, SMC_ERM_CMD_COPY, id, mine, 100, KINDS, peer_id[KINDS], 1, 4095, seed++);
        CHECK_OK(usmc_erm_dereg_mr(fd, id));
    }
    et_send_u64(fd, 0);
    et_join();
    close(fd);
    return 0;
}
