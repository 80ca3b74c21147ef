/* SIGURG for urgent data is sent by the sender, to the process the receiver names as its
 * socket's owner, and only where the link group's channel vouches for that process: a
 * receiver cannot make the sender signal anyone else, and a receiver the sender cannot vouch
 * for gets no signal. Either way the sender counts the signal it did not send, and the urgent
 * byte itself arrives.
 *
 * usage: sigurg forged|pidns|denied
 *   forged  the client, which receives the urgent byte, writes another process's pid (a child
 *           of the server, waiting for SIGURG) as its socket's owner into its line of the
 *           ring: the server sends that process nothing
 *   pidns   the server runs in a pid namespace of its own (root only) and owns its socket; the
 *           client's urgent byte reaches it, but the pid it names means another process in the
 *           client's namespace: the client sends no SIGURG, where TCP's kernel would
 *   denied  the client becomes another user (root only) before it sends the urgent byte to the
 *           server, which owns its socket: the kernel refuses the client's SIGURG, which TCP's
 *           kernel would have sent */
#include "faults.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t urgent_signals;
static int tell = -1;

static void on_urg(int sig)
{
    (void)sig;
    urgent_signals++;
    if (tell >= 0 && write(tell, "!", 1) != 1)
        _exit(3);
}

static void catch_urg(void)
{
    struct sigaction sa = {.sa_handler = on_urg, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGURG, &sa, NULL) == 0);
}

/* The urgent byte, once it is there (POLLPRI), within 10 s. */
static void expect_urgent(int fd, char want)
{
    struct pollfd p = {fd, POLLPRI, 0};
    char c = 0;

    if (poll(&p, 1, 10000) != 1)
        FAIL("no urgent data within 10 s");
    if (recv(fd, &c, 1, MSG_OOB) != 1 || c != want)
        FAIL("urgent byte: got '%c' (%s), expected '%c'", c, fl_errname(errno), want);
}

static void forged(void)
{
    struct fl_chan ch;
    int heard[2];
    uint16_t port;

    CHECK(pipe(heard) == 0);
    pid_t victim = fl_fork();
    if (victim == 0) {
        close(heard[0]);
        tell = heard[1];
        catch_urg();
        for (;;)
            pause();
    }
    close(heard[1]);
    int l = fl_listen(&port);
    fl_chan_init(&ch);
    pid_t client = fl_fork();
    if (client == 0) {
        struct fl_arena arena;
        fl_chan_side(&ch, 1);
        close(l);
        int fd = fl_connect(port);
        fl_send_stream(fd, false, 0, 100, 1);
        fl_recv_stream(fd, false, 0, 100, 2);
        fl_arena_find(&arena);
        struct seg_hdr *h = fl_seg_of(&arena, fd, 100, 100);
        /* Our line of the ring we read: the victim as our socket's owner. */
        atomic_store(&h->ring[1].cons_sigurg, (int32_t)victim);
        fl_post(&ch, 1);
        expect_urgent(fd, '!');
        fl_post(&ch, 2);
        fl_wait(&ch);
        close(fd);
        _exit(0);
    }
    fl_chan_side(&ch, 0);
    int s = fl_accept(l);
    fl_recv_stream(s, false, 0, 100, 1);
    fl_send_stream(s, false, 0, 100, 2);
    fl_wait(&ch);
    CHECK(send(s, "!", 1, MSG_OOB) == 1);
    fl_wait(&ch);
    if (fl_readable(heard[0], 300))
        FAIL("the process the peer named got SIGURG");
    fl_post(&ch, 3);
    CHECK(fl_reap(client) == 0);
    close(s);
    kill(victim, SIGKILL);
    fl_reap(victim);
    printf("forged: the process the peer named got nothing, the peer got its byte\n");
}

static void pidns(void)
{
    struct fl_chan ch;

    fl_chan_init(&ch);
    /* The client first, in our namespace: every child forked after unshare() goes into the
     * new one. */
    pid_t client = fl_fork();
    if (client == 0) {
        fl_chan_side(&ch, 1);
        int fd = fl_connect((uint16_t)fl_wait(&ch));
        fl_send_stream(fd, false, 0, 100, 1);
        fl_recv_stream(fd, false, 0, 100, 2);
        fl_wait(&ch);
        CHECK(send(fd, "!", 1, MSG_OOB) == 1);
        fl_wait(&ch);
        close(fd);
        _exit(0);
    }
    if (unshare(CLONE_NEWPID) < 0) {
        kill(client, SIGKILL);
        printf("a pid namespace needs root\n");
        exit(77);
    }
    fflush(stdout);
    pid_t server = fork();
    CHECK(server >= 0);
    if (server == 0) {
        uint16_t port;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        fl_chan_side(&ch, 0);
        catch_urg();
        int l = fl_listen(&port);
        fl_post(&ch, port);
        int s = fl_accept(l);
        fl_recv_stream(s, false, 0, 100, 1);
        fl_send_stream(s, false, 0, 100, 2);
        CHECK(fcntl(s, F_SETOWN, getpid()) == 0);
        fl_post(&ch, 1);
        expect_urgent(s, '!');
        fl_sleep_ms(300);
        fl_post(&ch, 2);
        close(s);
        _exit(urgent_signals ? 4 : 0);
    }
    int st = fl_reap(server);
    if (st == 4)
        FAIL("the server in its own pid namespace got SIGURG");
    CHECK(st == 0);
    CHECK(fl_reap(client) == 0);
    printf("pidns: the byte arrived, no SIGURG was sent\n");
}

static void denied(void)
{
    struct fl_chan ch;
    uint16_t port;

    if (geteuid() != 0) {
        printf("becoming another user needs root\n");
        exit(77);
    }
    catch_urg();
    int l = fl_listen(&port);
    fl_chan_init(&ch);
    pid_t client = fl_fork();
    if (client == 0) {
        fl_chan_side(&ch, 1);
        close(l);
        int fd = fl_connect(port);
        fl_send_stream(fd, false, 0, 100, 1);
        fl_recv_stream(fd, false, 0, 100, 2);
        CHECK(setgid(65534) == 0 && setuid(65534) == 0);
        fl_wait(&ch);
        CHECK(send(fd, "!", 1, MSG_OOB) == 1);
        fl_wait(&ch);
        close(fd);
        _exit(0);
    }
    fl_chan_side(&ch, 0);
    int s = fl_accept(l);
    fl_recv_stream(s, false, 0, 100, 1);
    fl_send_stream(s, false, 0, 100, 2);
    CHECK(fcntl(s, F_SETOWN, getpid()) == 0);
    fl_post(&ch, 1);
    expect_urgent(s, '!');
    fl_sleep_ms(300);
    if (urgent_signals)
        FAIL("the other user's SIGURG arrived");
    fl_post(&ch, 2);
    CHECK(fl_reap(client) == 0);
    close(s);
    printf("denied: the byte arrived, the kernel refused the SIGURG\n");
}

int main(int argc, char **argv)
{
    fl_start(50);
    if (argc == 2 && !strcmp(argv[1], "forged"))
        forged();
    else if (argc == 2 && !strcmp(argv[1], "pidns"))
        pidns();
    else if (argc == 2 && !strcmp(argv[1], "denied"))
        denied();
    else {
        fprintf(stderr, "usage: sigurg forged|pidns|denied\n");
        return 2;
    }
    return 0;
}
