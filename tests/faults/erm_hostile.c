/* A hostile ERM peer scribbles on what it shares with the victim (its own area, which the
 * victim reads, and the victim's, where it writes events and its command in flight); the
 * victim's commands and completions fail one at a time, and no byte lands outside what was
 * registered.
 *
 * usage: erm_hostile VARIANT
 *   slots     its remote MR table announces forged regions: past the memfd, 2^60 bytes, an
 *             unknown kind or right, a memfd never sent, at address 0, read-only, not valid:
 *             each of the victim's writes fails (EPROTO, EACCES, ENOENT), none lands
 *   pid       its area names the victim's own process as the one to copy into: the victim's
 *             channel does not vouch for it, and the write fails with EPERM
 *   events    it writes the victim's event ring: a region it never had, an offset past the
 *             region, an unknown kind, a stale generation: EPROTO and ESTALE completions with
 *             no address; then entries out of turn (sequence numbers far and a lap ahead): no
 *             event, no POLLERR
 *   cons      it moves its own consumer cursor ahead of what the victim produced: the
 *             victim's writes that ask for a remote completion fail with EPROTO
 *   inflight  it claims a command in flight on the victim's region and never ends it: the
 *             victim's deregistration fails with EBUSY after 2 s and succeeds once the claim
 *             is gone; with the claim back, closing takes no more than 2 s
 * In every variant the connection still carries stream bytes both ways afterwards. */
#include "faults.h"

#include <dlfcn.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../include/usmc/erm.h"
#include "../erm/wire.h"

#define REGION 65536

static int reg(int fd, void *addr, uint64_t len, uint32_t access)
{
    struct smc_erm_cmd_reg_mr r = {SMC_ERM_CMD_REG_MR, access, addr, len};
    int id = setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &r, sizeof r);

    if (id < 0)
        FAIL("register: %s", fl_errname(errno));
    return id;
}

static int dereg(int fd, int id)
{
    struct smc_erm_cmd_dereg_mr d = {SMC_ERM_CMD_DEREG_MR, id};

    return setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &d, sizeof d);
}

/* Memory the peer maps, from the library the program runs under. */
static void *shared_alloc(size_t len)
{
    void *(*alloc)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "usmc_erm_alloc");
    void *p = alloc ? alloc(len) : NULL;

    CHECK(p);
    return p;
}

static void command(int fd, uint32_t flags, int src, int dst, uint64_t len, uint64_t tag)
{
    struct smc_erm_cmd_copy c = {{SMC_ERM_CMD_COPY, flags}, len, src, dst, 0, 0, tag};
    union {
        char b[CMSG_SPACE(sizeof c)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_control = u.b, .msg_controllen = sizeof u.b};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

    memset(&u, 0, sizeof u);
    cm->cmsg_level = SOL_SMC;
    cm->cmsg_type = SMC_ERM_CMD;
    cm->cmsg_len = CMSG_LEN(sizeof c);
    memcpy(CMSG_DATA(cm), &c, sizeof c);
    if (sendmsg(fd, &mh, 0) < 0)
        FAIL("sendmsg: %s", fl_errname(errno));
}

/* Completions: waits up to 5 s for want of them; returns how many came (-1: recvmsg failed,
 * errno set). */
static int completions(int fd, struct smc_rmem_compl_event *ev, int want)
{
    union {
        char b[CMSG_SPACE(sizeof *ev) * 16];
        struct cmsghdr align;
    } u;
    int n = 0;
    uint64_t until = fl_now_ms() + 5000;

    while (n < want && fl_now_ms() < until) {
        struct pollfd pf = {fd, 0, 0};
        if (poll(&pf, 1, 100) != 1 || !(pf.revents & POLLERR))
            continue;
        struct msghdr mh = {.msg_control = u.b, .msg_controllen = sizeof u.b};
        if (recvmsg(fd, &mh, MSG_ERRQUEUE) < 0)
            return -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c && n < want; c = CMSG_NXTHDR(&mh, c))
            memcpy(&ev[n++], CMSG_DATA(c), sizeof *ev);
    }
    return n;
}

static void expect_status(int fd, const char *what, int want)
{
    struct smc_rmem_compl_event ev;

    if (completions(fd, &ev, 1) != 1)
        FAIL("%s: no completion", what);
    if (ev.status != want || (want && ev.copy.addr))
        FAIL("%s: status %s, expected %s", what, fl_errname(ev.status), fl_errname(want));
}

/* The areas this process maps, told apart by the pid in their header: its own and its
 * peer's. */
static void areas(struct erm_area **mine, struct erm_area **theirs)
{
    char line[512];
    FILE *f = fopen("/proc/self/maps", "r");

    *mine = *theirs = NULL;
    CHECK(f);
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (!strstr(line, "usmc-erm-area") || sscanf(line, "%lx-%lx", &lo, &hi) != 2 ||
            hi - lo != ERM_AREA_SIZE)
            continue;
        struct erm_area *a = (struct erm_area *)lo;
        if (atomic_load(&a->magic) != ERM_AREA_MAGIC)
            continue;
        if (atomic_load(&a->pid) == getpid())
            *mine = a;
        else
            *theirs = a;
    }
    fclose(f);
}

/* The stream still works both ways. */
static void stream_ok(int fd, bool victim)
{
    char c = 'v';

    if (victim) {
        CHECK(write(fd, &c, 1) == 1);
        CHECK(read(fd, &c, 1) == 1 && c == 'h');
    } else {
        CHECK(read(fd, &c, 1) == 1 && c == 'v');
        c = 'h';
        CHECK(write(fd, &c, 1) == 1);
    }
}

static struct fl_chan ch;

/* ------------------------------------------------------------ slots */

static void set(struct erm_slot *s, uint32_t gen, uint32_t access, uint32_t kind, uint32_t fdi,
                uint64_t base, uint64_t len)
{
    atomic_store(&s->state, erm_state(gen, 0));
    atomic_store(&s->access, access);
    atomic_store(&s->kind, kind);
    atomic_store(&s->fd_index, fdi);
    atomic_store(&s->base, base);
    atomic_store(&s->len, len);
    atomic_store(&s->state, erm_state(gen, 1));
}

static const struct {
    const char *what;
    uint32_t access, kind, fd_index;
    uint64_t base, len;
    int status;
} forged[] = {
    {"past its memfd", SMC_ACCESS_REMOTE_WRITE, ERM_MEM_SHM, 1, REGION, REGION, EPROTO},
    {"2^60 bytes", SMC_ACCESS_REMOTE_WRITE, ERM_MEM_SHM, 1, 0, 1ull << 60, EPROTO},
    {"unknown kind", SMC_ACCESS_REMOTE_WRITE, 7, 1, 0, REGION, EPROTO},
    {"unknown rights", 0xff, ERM_MEM_SHM, 1, 0, REGION, EPROTO},
    {"a memfd never sent", SMC_ACCESS_REMOTE_WRITE, ERM_MEM_SHM, 4000, 0, REGION, EPROTO},
    {"at address 0", SMC_ACCESS_REMOTE_WRITE, ERM_MEM_VM, 0, 0, REGION, EPROTO},
    {"read-only", SMC_ACCESS_REMOTE_READ, ERM_MEM_SHM, 1, 0, REGION, EACCES},
};
#define NFORGED (sizeof forged / sizeof forged[0])

/* The hostile side's region for the victim to write (its memory, so that a memfd went to the
 * victim as index 1), and its own area, where it forges. */
static struct erm_area *announce(int fd, int *id, unsigned char **buf)
{
    struct erm_area *mine, *theirs;

    *buf = shared_alloc(REGION);
    *id = reg(fd, *buf, REGION, SMC_ACCESS_REMOTE_WRITE);
    areas(&mine, &theirs);
    CHECK(mine);
    return mine;
}

static void slots_hostile(int fd)
{
    unsigned char *buf;
    int id;
    struct erm_area *mine = announce(fd, &id, &buf);
    uint32_t gen = atomic_load(&mine->slot[id].state) >> 1;
    fl_post(&ch, (uint64_t)id);
    for (size_t i = 0; i < NFORGED; i++) {
        fl_wait(&ch);
        set(&mine->slot[id], gen, forged[i].access, forged[i].kind, forged[i].fd_index,
            forged[i].base, forged[i].len);
        fl_post(&ch, i);
    }
    fl_wait(&ch);
    atomic_store(&mine->slot[id].state, erm_state(gen, 0));
    fl_post(&ch, 0);
    fl_wait(&ch);
    for (size_t i = 0; i < REGION; i++)
        if (buf[i])
            FAIL("byte %zu of the region was written", i);
    stream_ok(fd, false);
}

static void slots_victim(int fd)
{
    unsigned char *src = shared_alloc(REGION);
    memset(src, 0x5a, REGION);
    int mine = reg(fd, src, REGION, 0), theirs = (int)fl_wait(&ch);

    for (size_t i = 0; i < NFORGED; i++) {
        fl_post(&ch, 0);
        fl_wait(&ch);
        command(fd, 0, mine, theirs, 64, i);
        expect_status(fd, forged[i].what, forged[i].status);
    }
    fl_post(&ch, 0);
    fl_wait(&ch);
    command(fd, 0, mine, theirs, 64, 99);
    expect_status(fd, "not valid", ENOENT);
    fl_post(&ch, 0);
    stream_ok(fd, true);
}

/* ------------------------------------------------------------ pid */

static void pid_hostile(int fd)
{
    unsigned char *buf = malloc(REGION);
    struct erm_area *mine, *theirs;
    CHECK(buf);
    memset(buf, 0, REGION);
    int id = reg(fd, buf, REGION, SMC_ACCESS_REMOTE_WRITE);
    areas(&mine, &theirs);
    CHECK(mine);
    atomic_store(&mine->pid, getppid()); /* the victim */
    fl_post(&ch, (uint64_t)id);
    fl_wait(&ch);
    stream_ok(fd, false);
}

static void pid_victim(int fd)
{
    int theirs = (int)fl_wait(&ch);
    unsigned char *src = malloc(REGION);
    CHECK(src);
    memset(src, 0x5a, REGION);
    int mine = reg(fd, src, REGION, 0);
    command(fd, 0, mine, theirs, 64, 1);
    expect_status(fd, "the victim's own process", EPERM);
    fl_post(&ch, 0);
    stream_ok(fd, true);
}

/* ------------------------------------------------------------ events */

/* An event at cursor at of the victim's ring, with the sequence number of cursor seq. */
static void event(struct erm_area *a, uint64_t at, uint64_t seq, uint32_t type, uint32_t memid,
                  uint32_t gen, uint64_t off)
{
    struct erm_event *e = &a->ev[at % ERM_EVQ];

    atomic_store(&e->type, type);
    atomic_store(&e->memid, memid);
    atomic_store(&e->gen, gen);
    atomic_store(&e->src_memid, 0);
    atomic_store(&e->offset, off);
    atomic_store(&e->len, 16);
    atomic_store(&e->tag, 7);
    atomic_store(&e->seq, seq + 1);
}

static void events_hostile(int fd)
{
    unsigned char *src = shared_alloc(REGION);
    struct erm_area *mine, *theirs;
    int id = reg(fd, src, REGION, 0), target = (int)fl_wait(&ch);

    command(fd, SMC_ERM_CMD_FLAG_REMOTE_COMPL | SMC_ERM_CMD_FLAG_SILENT, id, target, 16, 1);
    areas(&mine, &theirs);
    CHECK(theirs);
    uint32_t gen = atomic_load(&theirs->slot[target].state) >> 1;
    /* the library posted one event, at cursor 0: these follow it */
    event(theirs, 1, 1, SMC_ERM_CMD_COPY, 9999, gen, 0);
    event(theirs, 2, 2, SMC_ERM_CMD_COPY, (uint32_t)target, gen, REGION);
    event(theirs, 3, 3, 99, (uint32_t)target, gen, 0);
    event(theirs, 4, 4, SMC_ERM_CMD_COPY, (uint32_t)target, gen + 1, 0);
    fl_post(&ch, 0);
    fl_wait(&ch);
    /* out of turn: a sequence number far ahead, one a lap ahead where the next is due */
    event(theirs, 9, 9, SMC_ERM_CMD_COPY, (uint32_t)target, gen, 0);
    event(theirs, 5, 5 + ERM_EVQ, SMC_ERM_CMD_COPY, (uint32_t)target, gen, 0);
    fl_post(&ch, 0);
    fl_wait(&ch);
    stream_ok(fd, false);
}

static void events_victim(int fd)
{
    unsigned char *region = shared_alloc(REGION);
    int id = reg(fd, region, REGION, SMC_ACCESS_REMOTE_WRITE);
    struct smc_rmem_compl_event ev[5];
    static const int want[5] = {0, EPROTO, EPROTO, EPROTO, ESTALE};

    fl_post(&ch, (uint64_t)id);
    fl_wait(&ch);
    CHECK(completions(fd, ev, 5) == 5);
    for (int i = 0; i < 5; i++)
        if (ev[i].status != want[i] || (i ? ev[i].copy.addr != NULL : ev[i].copy.addr != region))
            FAIL("event %d: status %s addr %p", i, fl_errname(ev[i].status), ev[i].copy.addr);
    fl_post(&ch, 0);
    fl_wait(&ch);
    /* entries out of turn are no events: nothing to report, nothing to take */
    struct pollfd pf = {fd, 0, 0};
    CHECK(poll(&pf, 1, 300) == 0);
    union {
        char b[CMSG_SPACE(sizeof ev[0]) * 4];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_control = u.b, .msg_controllen = sizeof u.b};
    EXPECT_ERRNO(recvmsg(fd, &mh, MSG_ERRQUEUE), EAGAIN);
    fl_post(&ch, 0);
    stream_ok(fd, true);
}

/* ------------------------------------------------------------ cons */

static void cons_hostile(int fd)
{
    unsigned char *buf;
    int id;
    struct erm_area *mine = announce(fd, &id, &buf);

    atomic_fetch_add(&mine->ev_cons, 5000);
    fl_post(&ch, (uint64_t)id);
    fl_wait(&ch);
    stream_ok(fd, false);
}

static void cons_victim(int fd)
{
    unsigned char *src = shared_alloc(REGION);
    int mine = reg(fd, src, REGION, 0), theirs = (int)fl_wait(&ch);

    command(fd, SMC_ERM_CMD_FLAG_REMOTE_COMPL, mine, theirs, 64, 1);
    expect_status(fd, "a consumer cursor ahead", EPROTO);
    command(fd, 0, mine, theirs, 64, 2); /* no event asked for: it runs */
    expect_status(fd, "no remote completion", 0);
    fl_post(&ch, 0);
    stream_ok(fd, true);
}

/* ------------------------------------------------------------ inflight */

static void inflight_hostile(int fd)
{
    unsigned char *src = shared_alloc(REGION);
    struct erm_area *mine, *theirs;
    int id = reg(fd, src, REGION, 0);

    for (int round = 0; round < 2; round++) {
        int target = (int)fl_wait(&ch);
        command(fd, SMC_ERM_CMD_FLAG_SILENT, id, target, 16, 1);
        areas(&mine, &theirs);
        CHECK(theirs);
        uint32_t gen = atomic_load(&theirs->slot[target].state) >> 1;
        atomic_store(&theirs->inflight, erm_inflight((uint32_t)target, gen));
        fl_post(&ch, 0);
        if (round == 0) {
            fl_wait(&ch);
            atomic_store(&theirs->inflight, 0);
            fl_post(&ch, 0);
            stream_ok(fd, false);
        }
    }
    fl_wait(&ch);
}

static void inflight_victim(int fd)
{
    unsigned char *region = shared_alloc(REGION);
    int id = reg(fd, region, REGION, SMC_ACCESS_REMOTE_WRITE);

    fl_post(&ch, (uint64_t)id);
    fl_wait(&ch);
    uint64_t t0 = fl_now_ms();
    EXPECT_ERRNO(dereg(fd, id), EBUSY);
    uint64_t took = fl_now_ms() - t0;
    if (took < 1900 || took > 4000)
        FAIL("EBUSY after %llu ms", (unsigned long long)took);
    fl_post(&ch, 0);
    fl_wait(&ch);
    CHECK(dereg(fd, id) == 0);
    stream_ok(fd, true);
    id = reg(fd, region, REGION, SMC_ACCESS_REMOTE_WRITE);
    fl_post(&ch, (uint64_t)id);
    fl_wait(&ch);
    t0 = fl_now_ms();
    close(fd);
    took = fl_now_ms() - t0;
    if (took > 2500)
        FAIL("close took %llu ms", (unsigned long long)took);
    fl_post(&ch, 0);
}

/* ------------------------------------------------------------ */

static const struct {
    const char *name;
    void (*hostile)(int fd);
    void (*victim)(int fd);
} variants[] = {
    {"slots", slots_hostile, slots_victim},
    {"pid", pid_hostile, pid_victim},
    {"events", events_hostile, events_victim},
    {"cons", cons_hostile, cons_victim},
    {"inflight", inflight_hostile, inflight_victim},
};

int main(int argc, char **argv)
{
    size_t v;

    fl_start(60);
    for (v = 0; argc == 2 && v < sizeof variants / sizeof variants[0]; v++)
        if (!strcmp(argv[1], variants[v].name))
            break;
    if (argc != 2 || v == sizeof variants / sizeof variants[0]) {
        fprintf(stderr, "usage: erm_hostile slots|pid|events|cons|inflight\n");
        return 2;
    }
    /* the victim accepts, the hostile side (a child) connects */
    uint16_t port;
    int l = fl_listen(&port);
    fl_chan_init(&ch);
    pid_t pid = fl_fork();
    fl_chan_side(&ch, pid == 0);
    int fd = pid ? fl_accept(l) : fl_connect(port);
    close(l);
    (pid ? variants[v].victim : variants[v].hostile)(fd);
    if (!pid)
        _exit(0);
    CHECK(fl_reap(pid) == 0);
    return 0;
}
