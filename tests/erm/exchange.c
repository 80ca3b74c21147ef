/* Two processes exchange 1 GB each way through ERM writes, at once, and check every byte: each
 * writes 4 MB chunks of a pattern into one of four slots of the other's region, with a remote
 * completion whose tag is the chunk's checksum; the receiver checks the slot against it and
 * gives the slot back with a credit on the stream. One event loop on poll(): POLLIN for
 * credits, POLLERR for completions. At the end both compare the checksums of all they got
 * with what the other sent. */
#include "common.h"

#define CHUNK (4u << 20)
#define SLOTS 4
#define TOTAL (1ull << 30)
#define CHUNKS (TOTAL / CHUNK)
#define WORDS (CHUNK / 8)

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t sum_step(uint64_t sum, uint64_t w)
{
    return (sum ^ w) * 0x100000001b3ull + (sum >> 29);
}

/* Chunk i of the stream that side dir sends; returns its checksum. */
static uint64_t fill(uint64_t *p, int dir, uint64_t i)
{
    uint64_t sum = 0, base = mix((uint64_t)dir << 40 | i);

    for (uint64_t k = 0; k < WORDS; k++) {
        p[k] = base + k * 0x2545f4914f6cdd1dull;
        sum = sum_step(sum, p[k]);
    }
    return sum;
}

static uint64_t checksum(const uint64_t *p)
{
    uint64_t sum = 0;

    for (uint64_t k = 0; k < WORDS; k++)
        sum = sum_step(sum, p[k]);
    return sum;
}

/* Credits the peer sent: one byte a slot it freed, CHUNKS in all, after which the stream
 * carries its result. Returns how many came; *total counts them all. */
static uint64_t take_credits(int fd, uint64_t *total)
{
    unsigned char buf[SLOTS];
    uint64_t left = CHUNKS - *total;
    ssize_t r = read(fd, buf, left < SLOTS ? left : SLOTS);

    CHECK(r > 0);
    *total += (uint64_t)r;
    return (uint64_t)r;
}

/* One side: dir names its stream. Returns the xor of the checksums it received. */
static uint64_t exchange(int fd, int dir)
{
    uint64_t *in = usmc_erm_alloc(SLOTS * CHUNK), *out = usmc_erm_alloc(CHUNK);
    CHECK(in && out);
    int in_id = et_reg(fd, in, SLOTS * CHUNK, SMC_ACCESS_REMOTE_WRITE);
    int out_id = et_reg(fd, out, CHUNK, 0);
    et_send_u64(fd, (uint64_t)in_id);
    int peer_in = (int)et_recv_u64(fd);
    struct usmc_erm_cq *cq = usmc_erm_cq_open(fd);
    CHECK(cq);
    uint64_t sent = 0, credits = SLOTS, received = 0, credit_bytes = 0, got = 0;

    while (sent < CHUNKS || received < CHUNKS) {
        while (sent < CHUNKS && credits) {
            uint64_t sum = fill(out, dir, sent);
            CHECK_OK(usmc_erm_write(fd, out_id, 0, peer_in, (sent % SLOTS) * CHUNK, CHUNK,
                                    SMC_ERM_CMD_FLAG_REMOTE_COMPL | SMC_ERM_CMD_FLAG_SILENT,
                                    sum));
            sent++;
            credits--;
        }
        struct pollfd pf = {fd, POLLIN, 0};
        if (CHECK_OK(poll(&pf, 1, 10000)) == 0)
            FAIL("stalled: sent %llu, received %llu", (unsigned long long)sent,
                 (unsigned long long)received);
        struct smc_rmem_compl_event ev[SLOTS];
        int n = usmc_erm_poll(cq, ev, SLOTS);
        CHECK(n >= 0);
        for (int k = 0; k < n; k++, received++) {
            uint64_t slot = received % SLOTS;
            if (ev[k].status || !(ev[k].flags & SMC_ERM_COMPL_REMOTE) || ev[k].memid != in_id ||
                ev[k].copy.addr != (unsigned char *)in + slot * CHUNK || ev[k].copy.len != CHUNK)
                FAIL("chunk %llu: completion status %s addr %p", (unsigned long long)received,
                     et_errname(ev[k].status), ev[k].copy.addr);
            uint64_t sum = checksum(ev[k].copy.addr);
            if (sum != ev[k].tag)
                FAIL("chunk %llu: checksum %llx, the sender's %llx", (unsigned long long)received,
                     (unsigned long long)sum, (unsigned long long)ev[k].tag);
            got ^= sum;
            unsigned char one = 1;
            CHECK(write(fd, &one, 1) == 1); /* the slot is free again */
        }
        if (pf.revents & POLLIN)
            credits += take_credits(fd, &credit_bytes);
    }
    /* the last credits, for the slots the peer freed at the end */
    while (credit_bytes < CHUNKS)
        take_credits(fd, &credit_bytes);
    usmc_erm_cq_close(cq);
    return got;
}

static uint64_t expected(int dir)
{
    uint64_t *p = malloc(CHUNK), x = 0;

    CHECK(p);
    for (uint64_t i = 0; i < CHUNKS; i++)
        x ^= fill(p, dir, i);
    free(p);
    return x;
}

static void peer(int fd, void *arg)
{
    (void)arg;
    uint64_t got = exchange(fd, 1);
    et_send_u64(fd, got);
    et_recv_u64(fd);
}

int main(void)
{
    et_start(280);
    uint64_t t0 = et_now_ms();
    int fd = et_pair(1, peer, NULL);
    uint64_t got = exchange(fd, 0), theirs = et_recv_u64(fd);
    uint64_t ms = et_now_ms() - t0;
    et_send_u64(fd, 0);
    et_join();
    if (got != expected(1) || theirs != expected(0))
        FAIL("checksums over the whole stream differ");
    printf("1 GB each way in %llu ms, every chunk's checksum right\n", (unsigned long long)ms);
    close(fd);
    return 0;
}
