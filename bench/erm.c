/* SMC-ERM's figures, beside the socket path and the physical limit.
 *   erm server ENDPOINT                   serves one client after the other
 *   erm client ENDPOINT OP SIZE SECONDS   prints the figure of OP
 *   erm local memcpy SIZE SECONDS         a bare memcpy() of SIZE bytes, MiB/s
 * OP:
 *   stream         SIZE-byte writes through the socket: MiB/s the server reads
 *   write          ERM writes of SIZE bytes into memory the server shares (usmc_erm_alloc()):
 *                  MiB/s; write-vm: into its own memory (the kernel copies)
 *   pingpong       a SIZE-byte round trip through the socket, usec; oneway: half of it
 *   erm-pingpong   a SIZE-byte ERM write each way, each side busy-polling its completion
 *                  queue for the other's remote completion: usec a round trip; erm-oneway:
 *                  half of it; -vm: into the sides' own memory
 *   reg            registering SIZE bytes of fresh usmc_erm_alloc() memory for the peer to
 *                  write: usec; reg-vm: of the application's own memory
 *   rereg          registering the same memory again (deregistered in between): usec
 * The ERM calls come from the library `usmc run` preloads (ops that need it fail without). */
#include "endpoint.h"
#include "measure.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <usmc/erm.h>

#define USAGE "erm server ENDPOINT | erm client ENDPOINT OP SIZE SECONDS | erm local memcpy SIZE SECONDS"
#define MAX_SIZE (64u << 20)
/* operations between clock readings, and before timing starts */
#define BATCH 64
#define WARMUP 200
/* fresh registrations per run: each sends the peer a memfd, which it keeps (and with it the
 * memory) until the connection ends */
#define FRESH_MAX 100
#define STOP UINT64_MAX

enum op { STREAM, WRITE, PINGPONG, ERM_PINGPONG, REG, REREG, OPS };
static const char *const op_names[OPS] = {"stream", "write", "pingpong", "erm-pingpong", "reg",
                                          "rereg"};

struct request {
    uint32_t op, vm;
    uint64_t size;
};

static struct {
    void *(*alloc)(size_t);
    int (*free)(void *);
    int (*reg)(int, void *, size_t, unsigned);
    int (*dereg)(int, int);
    int (*write)(int, int, uint64_t, int, uint64_t, uint64_t, unsigned, uint64_t);
    struct usmc_erm_cq *(*cq_open)(int);
    int (*poll)(struct usmc_erm_cq *, struct smc_rmem_compl_event *, int);
    void (*cq_close)(struct usmc_erm_cq *);
} erm;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void need_erm(void)
{
    static const char *const names[] = {"usmc_erm_alloc", "usmc_erm_free", "usmc_erm_reg_mr",
                                        "usmc_erm_dereg_mr", "usmc_erm_write", "usmc_erm_cq_open",
                                        "usmc_erm_poll", "usmc_erm_cq_close"};
    void **slot = (void **)&erm;

    _Static_assert(sizeof erm == sizeof names / sizeof names[0] * sizeof(void *), "one each");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(slot[i] = dlsym(RTLD_DEFAULT, names[i]))) {
            fprintf(stderr, "erm: the usmc library is not loaded (usmc run)\n");
            exit(1);
        }
}

/* Memory of size bytes, touched: shared with the peer, or the application's own. */
static unsigned char *memory(size_t size, int vm)
{
    unsigned char *p = vm ? aligned_alloc(4096, (size + 4095) & ~(size_t)4095) : erm.alloc(size);

    if (!p)
        die("erm: memory");
    memset(p, 0x5a, size);
    return p;
}

/* Region id goes, and its memory. */
static void release(int fd, int id, unsigned char *p, int vm)
{
    if (erm.dereg(fd, id) < 0 || (vm ? (free(p), 0) : erm.free(p)) < 0)
        die("erm: release");
}

static int reg(int fd, void *p, size_t size, unsigned access)
{
    int id = erm.reg(fd, p, size, access);

    if (id < 0)
        die("erm: register");
    return id;
}

static void send_u64(int fd, uint64_t v)
{
    if (write_all(fd, &v, sizeof v) < 0)
        die("erm: write");
}

static uint64_t recv_u64(int fd)
{
    uint64_t v;

    if (read_all(fd, &v, sizeof v) < 0)
        die("erm: read");
    return v;
}

/* The next remote completion, busy-polling: its tag. */
static uint64_t next_event(struct usmc_erm_cq *cq)
{
    struct smc_rmem_compl_event ev;
    int n;

    while ((n = erm.poll(cq, &ev, 1)) == 0)
        ;
    if (n < 0 || ev.status)
        die("erm: completion");
    return ev.tag;
}

/* ERM ping-pong: each side's region of size bytes the other writes; the client starts. */
static double erm_pingpong(int fd, const struct request *rq, int client, double seconds)
{
    unsigned char *mine = memory(rq->size, (int)rq->vm);
    int id = reg(fd, mine, rq->size, SMC_ACCESS_REMOTE_WRITE);
    const unsigned flags = SMC_ERM_CMD_FLAG_REMOTE_COMPL | SMC_ERM_CMD_FLAG_SILENT;
    struct usmc_erm_cq *cq = erm.cq_open(fd);

    send_u64(fd, (uint64_t)id);
    int theirs = (int)recv_u64(fd);
    if (!cq)
        die("erm: completion queue");
    if (!client) {
        uint64_t tag;
        while ((tag = next_event(cq)) != STOP)
            if (erm.write(fd, id, 0, theirs, 0, rq->size, flags, tag) < 0)
                die("erm: write");
        erm.cq_close(cq);
        release(fd, id, mine, (int)rq->vm);
        return 0;
    }
    unsigned long count = 0;
    double start = 0, elapsed = 0;
    for (uint64_t i = 0;; i++) {
        if (i == WARMUP)
            start = now_seconds();
        if (erm.write(fd, id, 0, theirs, 0, rq->size, flags, i) < 0)
            die("erm: write");
        if (next_event(cq) != i)
            die("erm: out of order");
        if (i >= WARMUP && ++count % BATCH == 0 && (elapsed = now_seconds() - start) >= seconds)
            break;
    }
    if (erm.write(fd, id, 0, theirs, 0, rq->size, flags, STOP) < 0)
        die("erm: write");
    return elapsed / (double)count * 1e6;
}

/* Registration of size bytes, fresh memory each time or the same again: usec each. The first
 * registration on a connection waits for the server's attach (a server that accepts late, or
 * is busy with what the last client left) and makes our area: not timed. */
static double registration(int fd, const struct request *rq, double seconds)
{
    unsigned char *same = rq->op == REREG ? memory(rq->size, (int)rq->vm) : NULL;
    double spent = 0, start = now_seconds();
    unsigned long count = 0;
    unsigned char first[1];

    if (erm.dereg(fd, reg(fd, first, sizeof first, SMC_ACCESS_REMOTE_WRITE)) < 0)
        die("erm: deregister");
    do {
        unsigned char *p = same ? same : memory(rq->size, (int)rq->vm);
        double t0 = now_seconds();
        int id = reg(fd, p, rq->size, SMC_ACCESS_REMOTE_WRITE);
        spent += now_seconds() - t0;
        count++;
        if (same && erm.dereg(fd, id) < 0)
            die("erm: deregister");
        if (!same)
            release(fd, id, p, (int)rq->vm);
    } while (now_seconds() - start < seconds && (same || count < FRESH_MAX));
    return spent / (double)count * 1e6;
}

/* ERM writes for seconds: MiB/s. */
static double writes(int fd, const struct request *rq, double seconds)
{
    unsigned char *src = memory(rq->size, 0);
    int id = reg(fd, src, rq->size, 0), theirs = (int)recv_u64(fd);
    unsigned long count = 0;
    double start = 0, elapsed = 0;

    for (unsigned long i = 0;; i++) {
        if (i == WARMUP / 10)
            start = now_seconds();
        if (erm.write(fd, id, 0, theirs, 0, rq->size, SMC_ERM_CMD_FLAG_SILENT, i) < 0)
            die("erm: write");
        if (i >= WARMUP / 10 && ++count % 8 == 0 && (elapsed = now_seconds() - start) >= seconds)
            break;
    }
    return (double)count * (double)rq->size / elapsed / (1 << 20);
}

/* The socket's part of stream and pingpong. */
static double socket_op(int fd, const struct request *rq, double seconds)
{
    static char buf[MAX_SIZE];
    unsigned long count = 0;
    double start = now_seconds(), elapsed;

    if (rq->op == STREAM) {
        do {
            for (int i = 0; i < 8; i++)
                if (write_all(fd, buf, rq->size) < 0)
                    die("erm: write");
            count += 8;
        } while ((elapsed = now_seconds() - start) < seconds);
        shutdown(fd, SHUT_WR);
        if (recv_u64(fd) != count * rq->size)
            die("erm: the server read another count");
        elapsed = now_seconds() - start;
        return (double)count * (double)rq->size / elapsed / (1 << 20);
    }
    for (int i = 0; i < WARMUP; i++)
        if (write_all(fd, buf, rq->size) < 0 || read_all(fd, buf, rq->size) < 0)
            die("erm: round trip");
    start = now_seconds();
    do {
        for (int i = 0; i < BATCH; i++)
            if (write_all(fd, buf, rq->size) < 0 || read_all(fd, buf, rq->size) < 0)
                die("erm: round trip");
        count += BATCH;
    } while ((elapsed = now_seconds() - start) < seconds);
    return elapsed / (double)count * 1e6;
}

static void serve(int fd)
{
    static char buf[MAX_SIZE];
    struct request rq;
    ssize_t n;

    if (read_all(fd, &rq, sizeof rq) < 0 || rq.op >= OPS || !rq.size || rq.size > MAX_SIZE)
        goto done;
    if (rq.op == STREAM) {
        uint64_t total = 0;
        while ((n = read(fd, buf, sizeof buf)) > 0)
            total += (uint64_t)n;
        send_u64(fd, total);
    } else if (rq.op == PINGPONG) {
        while ((n = read(fd, buf, rq.size)) > 0)
            if (write_all(fd, buf, (size_t)n) < 0)
                break;
    } else if (rq.op == ERM_PINGPONG) {
        need_erm();
        erm_pingpong(fd, &rq, 0, 0);
    } else {
        unsigned char *region = NULL;
        int id = -1;
        if (rq.op == WRITE) {
            need_erm();
            region = memory(rq.size, (int)rq.vm);
            send_u64(fd, (uint64_t)(id = reg(fd, region, rq.size, SMC_ACCESS_REMOTE_WRITE)));
        }
        recv_u64(fd); /* the client is done */
        if (region)
            release(fd, id, region, (int)rq.vm);
    }
done:
    close(fd);
}

static double local_memcpy(size_t size, double seconds)
{
    unsigned char *src = aligned_alloc(4096, size), *dst = aligned_alloc(4096, size);
    unsigned long count = 0;
    double start, elapsed;

    if (!src || !dst)
        die("erm: memory");
    memset(src, 0x5a, size);
    memset(dst, 0, size);
    for (int i = 0; i < WARMUP / 10; i++)
        memcpy(dst, src, size);
    start = now_seconds();
    do {
        for (int i = 0; i < 8; i++) {
            memcpy(dst, src, size);
            __asm__ volatile("" : : "r"(dst) : "memory");
        }
        count += 8;
    } while ((elapsed = now_seconds() - start) < seconds);
    return (double)count * (double)size / elapsed / (1 << 20);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "server")) {
        endpoint_serve(argv[2], serve);
        return 1;
    }
    if (argc == 5 && !strcmp(argv[1], "local") && !strcmp(argv[2], "memcpy")) {
        double size = parse_positive(argv[3], USAGE);
        if (size > MAX_SIZE)
            goto usage;
        printf("%.1f\n", local_memcpy((size_t)size, parse_positive(argv[4], USAGE)));
        return 0;
    }
    if (argc != 6 || strcmp(argv[1], "client"))
        goto usage;
    struct request rq = {OPS, 0, (uint64_t)parse_positive(argv[4], USAGE)};
    char name[32];
    snprintf(name, sizeof name, "%s", argv[3]);
    char *vm = strstr(name, "-vm"), *oneway = strstr(name, "oneway");
    if (vm)
        *vm = 0;
    if (oneway) /* a round trip, halved */
        strcpy(oneway, "pingpong");
    rq.vm = vm != NULL;
    for (uint32_t i = 0; i < OPS; i++)
        if (!strcmp(name, op_names[i]))
            rq.op = i;
    double seconds = parse_positive(argv[5], USAGE), figure;
    if (rq.op == OPS || rq.size > MAX_SIZE)
        goto usage;
    if (rq.op != STREAM && rq.op != PINGPONG)
        need_erm();
    int fd = endpoint_connect(argv[2]);
    if (fd < 0)
        die("erm: connect");
    if (write_all(fd, &rq, sizeof rq) < 0)
        die("erm: write");
    switch (rq.op) {
    case WRITE: figure = writes(fd, &rq, seconds); break;
    case ERM_PINGPONG: figure = erm_pingpong(fd, &rq, 1, seconds); break;
    case REG:
    case REREG: figure = registration(fd, &rq, seconds); break;
    default: figure = socket_op(fd, &rq, seconds);
    }
    if (oneway)
        figure /= 2;
    if (rq.op == WRITE || rq.op == REG || rq.op == REREG)
        send_u64(fd, 0);
    close(fd);
    printf("%.3f\n", figure);
    return 0;
usage:
    fprintf(stderr, "usage: %s\n", USAGE);
    return 2;
}
