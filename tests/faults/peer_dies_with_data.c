/* The server of an accelerated connection is killed (SIGKILL: its library cleans nothing up)
 * while the client is blocked on the connection. The client must learn it like on TCP and
 * not hang.
 *
 * usage: peer_dies_with_data writer|reader
 *   writer  the client is blocked writing into a ring the server never drains: the write
 *           ends (short count or -1 EPIPE/ECONNRESET) and further writes fail with one of those
 *   reader  the client is blocked reading after it received everything the server sent: EOF
 *           (or -1 ECONNRESET)
 * The time from the kill to the client's answer is measured; beyond 2 s counts as a hang. */
/* threads */
#include "faults.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HANG_MS 2000u
#define SENT 200000u /* fits in the default ring: the server finishes without the client reading */

struct killer {
    pid_t victim, self, tid;
    uint64_t at_ms;
};

static void *kill_when_blocked(void *arg)
{
    struct killer *k = arg;

    fl_wait_sleeping(k->self, k->tid);
    k->at_ms = fl_now_ms();
    if (kill(k->victim, SIGKILL) < 0)
        FAIL("kill: %s", fl_errname(errno));
    return NULL;
}

static bool reset_or_pipe(int e)
{
    return e == EPIPE || e == ECONNRESET;
}

/* Writes until an error; returns its errno. */
static int write_until_error(int fd)
{
    static char buf[1 << 20];

    for (int i = 0; i < 1000; i++) {
        ssize_t r = send(fd, buf, sizeof(buf), MSG_NOSIGNAL);
        if (r < 0 && errno != EINTR)
            return errno;
    }
    FAIL("1000 MB written to a dead peer without an error");
}

int main(int argc, char **argv)
{
    struct fl_chan ch;
    struct killer k;
    pthread_t t;
    bool writer;
    char c;

    fl_start(50);
    if (argc != 2 || (strcmp(argv[1], "writer") && strcmp(argv[1], "reader"))) {
        fprintf(stderr, "usage: peer_dies_with_data writer|reader\n");
        return 2;
    }
    writer = !strcmp(argv[1], "writer");
    fl_chan_init(&ch);
    pid_t server = fl_fork();
    if (server == 0) {
        uint16_t port;
        fl_chan_side(&ch, 1);
        int l = fl_listen(&port);
        fl_post(&ch, port);
        int s = fl_accept(l);
        fl_recv_stream(s, false, 0, 1000, 1);
        if (!writer)
            fl_send_stream(s, false, 0, SENT, 2);
        fl_post(&ch, 1);
        for (;;)
            pause();
    }
    fl_chan_side(&ch, 0);
    int fd = fl_connect((uint16_t)fl_wait(&ch));
    fl_send_stream(fd, false, 0, 1000, 1);
    fl_wait(&ch); /* the server is attached and done */
    struct fl_arena a;
    fl_arena_find(&a);
    fl_seg_of(&a, fd, 1000, writer ? 0 : SENT);
    if (!writer)
        fl_recv_stream(fd, false, 0, SENT, 2);

    k = (struct killer){server, getpid(), (pid_t)syscall(SYS_gettid), 0};
    CHECK(pthread_create(&t, NULL, kill_when_blocked, &k) == 0);
    int e;
    if (writer) {
        e = write_until_error(fd);
    } else {
        ssize_t r = recv(fd, &c, 1, 0);
        e = r == 0 ? 0 : r < 0 ? errno : -1;
    }
    uint64_t answered = fl_now_ms();
    CHECK(pthread_join(t, NULL) == 0);
    /* The killer's clock reading is ours only once it is joined. */
    uint64_t took = answered - k.at_ms;
    if (writer ? !reset_or_pipe(e) : e && e != ECONNRESET)
        FAIL("%s after the server's death: %s", argv[1], e > 0 ? fl_errname(e) : e ? "data" : "EOF");
    if (took > HANG_MS)
        FAIL("the client learnt of the server's death only after %llu ms",
             (unsigned long long)took);
    if (writer)
        CHECK(reset_or_pipe(write_until_error(fd)));
    if (fl_reap(server) != 128 + SIGKILL)
        FAIL("the server did not die by SIGKILL");
    close(fd);
    printf("%s: %s under 2 s\n", argv[1], e ? fl_errname(e) : "EOF");
    return 0;
}
