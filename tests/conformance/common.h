/* Scaffolding shared by the differential conformance programs.
 *
 * Each program prints only what is the same on every run of plain TCP (return values, errno
 * names, readiness masks, byte totals) so that its stdout can be compared with a run under
 * usmc. A peer process runs in a child whose stdout goes through a pipe; the parent prints it,
 * prefixed, when it reaps the child, so output never interleaves by scheduling.
 */
#ifndef CONFORMANCE_COMMON_H
#define CONFORMANCE_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

/* Every program starts here: a watchdog alarm so nothing hangs, line-buffered stdout. */
void cf_start(void);

/* Failure of a program's own expectation: printed on stdout (so it shows in the diff) and
 * the process exits 1. */
_Noreturn void cf_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define FAIL(...) cf_fail(__FILE__, __LINE__, __VA_ARGS__)
#define CHECK(cond)                                  \
    do {                                             \
        if (!(cond))                                 \
            FAIL("check failed: %s", #cond);         \
    } while (0)

/* "EAGAIN", "ECONNRESET", ... */
const char *cf_errname(int err);

/* Prints "label: R" or "label: -1 ENAME" and returns R. Macros so errno is read right after
 * the call. */
long cf_report(const char *label, long r, int err);
#define SHOW(label, expr) ({ long r_ = (long)(expr); cf_report((label), r_, errno); })
/* SHOW, then insist on the result TCP gives. */
#define EXPECT_RET(label, expr, want)                                                 \
    ({                                                                                \
        long r2_ = SHOW(label, expr);                                                 \
        if (r2_ != (long)(want))                                                      \
            FAIL("%s: expected %ld", (label), (long)(want));                          \
        r2_;                                                                          \
    })
#define EXPECT_ERR(label, expr, want_errno)                                           \
    do {                                                                              \
        long r3_ = (long)(expr);                                                      \
        int e3_ = errno;                                                              \
        cf_report((label), r3_, e3_);                                                 \
        if (r3_ != -1 || e3_ != (want_errno))                                         \
            FAIL("%s: expected -1 %s", (label), cf_errname(want_errno));              \
    } while (0)

/* Loopback endpoints: 127.0.0.1 for AF_INET, ::1 for AF_INET6. */
void cf_loopback(int family, uint16_t port, struct sockaddr_storage *ss, socklen_t *len);
int cf_listen(int family);
uint16_t cf_port(int fd);
int cf_connect(int family, uint16_t port);
int cf_accept(int lfd);

/* The usual shape: listen on 127.0.0.1, run client(&port) in the peer process, return the
 * accepted connection. */
int cf_serve(void (*client)(void *port));
/* Listens on 127.0.0.1, runs client(&port) in the peer process, returns the listener. */
int cf_listen_spawn(void (*client)(void *port));
/* cf_serve, accepting only ms milliseconds after the peer started. */
int cf_serve_late(void (*client)(void *port), long ms);
/* An exchange the server ends with "ok". The client's end: shuts down writing, reads to
 * EOF, insists on "ok", closes. The server's: reads to EOF (at most 256 bytes), prints it,
 * insists on want[0..n), answers "ok" and closes. */
void cf_expect_ok(int fd);
void cf_answer_ok(int fd, const char *want, size_t n);

/* A peer for cf_serve: connects, then writes "data" (4 bytes) each time the parent
 * posts cf_cue_write(), and closes at cf_cue_close(). */
void cf_cued_writer(void *port);
void cf_cue_write(void);
void cf_cue_close(void);

/* The peer process. cf_spawn forks fn(arg) in a child (which dies with its parent);
 * cf_join reaps it, prints its output as "peer: ..." lines, and fails unless it exited 0.
 * One peer at a time. */
void cf_spawn(void (*fn)(void *), void *arg);
void cf_join(void);
pid_t cf_peer_pid(void);

/* A further local process (a worker sharing a socket): like the peer it gets the watchdog and
 * dies with its parent, but keeps stdout. cf_wait_child returns its exit status, or 128 plus
 * the signal that killed it. */
pid_t cf_fork(void);
int cf_wait_child(pid_t pid);

/* Lock-step between the two processes: post wakes the other side's wait. */
void cf_post(void);
void cf_wait(void);
void cf_post_u64(uint64_t v);
uint64_t cf_wait_u64(void);

/* Waits until the thread tid of process pid sleeps in the kernel, so that a signal or a
 * wake-up sent next finds it blocked. */
void cf_wait_sleeping(pid_t pid, pid_t tid);

/* Sends SIGUSR1 to the parent once it is blocked, and waits until its handler ran (the
 * handler calls cf_post). For the peer process of the EINTR programs. */
void cf_interrupt_parent(void);

/* Checked I/O: any error ends the program. */
void cf_write_all(int fd, const void *buf, size_t n);
size_t cf_read_full(int fd, void *buf, size_t n); /* stops early only at EOF */
void cf_read_exact(int fd, void *buf, size_t n);
/* Reads exactly n bytes from non-blocking fd, waiting in ep (fd in it, edge-triggered)
 * whenever it has nothing; a wait of 10 s ends the program. */
void cf_epoll_read_exact(int ep, int fd, void *buf, size_t n);
/* Makes fd non-blocking and watches it in ep for input, edge-triggered, with tag: what
 * cf_epoll_read_exact expects. */
void cf_epoll_watch_in(int ep, int fd, uint64_t tag);
/* Round trips on fd, as cf_epoll_read_exact reads: sends first, first + 1, ... (4 bytes
 * each, rounds of them), each expected back plus one. */
void cf_epoll_increments(int ep, int fd, uint32_t first, uint32_t rounds);
void cf_set_nonblock(int fd, bool on);
void cf_ignore_sigpipe(void);
void cf_on_signal(int sig, void (*handler)(int), int flags);

/* A thread that sends SIGUSR1 to target once per cf_signal_soon(): min_us after it took
 * the go, plus up to spread_us more (the same pseudo-random spread every run). */
struct cf_signaller {
    pthread_t thread, target;
    unsigned min_us, spread_us, seed;
    _Atomic int go, stop;
};
void cf_signaller_start(struct cf_signaller *s, pthread_t target, unsigned min_us,
                        unsigned spread_us);
void cf_signal_soon(struct cf_signaller *s);
/* Waits until the signaller took the last go (its signal is on its way). */
void cf_signal_taken(struct cf_signaller *s);
void cf_signaller_stop(struct cf_signaller *s);

/* A deterministic, non-repeating byte stream: byte at stream offset off for a given seed. */
void cf_fill(void *buf, size_t n, uint64_t off, unsigned seed);
bool cf_verify(const void *buf, size_t n, uint64_t off, unsigned seed);
/* Writes total bytes of the stream in writes of at most chunk bytes. */
void cf_send_pattern(int fd, uint64_t total, size_t chunk, unsigned seed);

/* The client of a server whose child runs CF_STDIO_SHELL with the connection as standard
 * input, output and error: it sends 100 000 pattern bytes, shuts down writing, and must get
 * them back in order, then CF_STDIO_LAST, then EOF. port: a uint16_t *, for cf_spawn. */
#define CF_STDIO_LAST "end\n"
#define CF_STDIO_SHELL "cat; printf '" CF_STDIO_LAST "' >&2"
void cf_stdio_echo_client(void *port);

/* SCM_RIGHTS over a Unix socket: n descriptors (at most CF_FDS_MAX) with one byte. The
 * receiving side fails unless exactly n came, in one header, untruncated. */
#define CF_FDS_MAX 4
void cf_send_fds(int unix_fd, const int *fds, int n);
void cf_recv_fds(int unix_fd, int *fds, int n);
/* Reads to EOF in reads of at most chunk bytes, verifying; returns the byte count. */
uint64_t cf_recv_pattern(int fd, size_t chunk, unsigned seed);
/* Reads exactly total bytes, verifying. */
void cf_recv_pattern_n(int fd, uint64_t total, size_t chunk, unsigned seed);

/* Sends one byte at a time with send(flags) until it fails on a connection whose peer has
 * closed: tries times in a row, then more slowly for up to 2 s; returns the errno of that
 * failure, 0 if none. */
int cf_send_until_error(int fd, int flags, int tries);

/* Echo server that needs no buffering in the connection: reads everything up to EOF, then
 * writes it all back and closes. Returns the byte count. */
size_t cf_echo_after_eof(int fd);
/* Its client: sends total bytes of the pattern, shuts down writing, reads the echo back to
 * EOF and verifies it; returns the byte count received. */
uint64_t cf_echo_client(int fd, uint64_t total, unsigned seed);

/* Readiness masks as names, e.g. "POLLIN|POLLRDHUP"; "0" when empty. */
const char *cf_poll_str(int revents);
const char *cf_epoll_str(uint32_t events);

/* Waits on ep (timeout in ms) and prints "label: N" and each event as "tag MASK", events
 * sorted by their data.u64 tag; returns N. */
int cf_epoll_report(const char *label, int ep, int timeout);
/* epoll_ctl with data.u64 = tag; failure ends the program. */
void cf_epoll_ctl(int ep, int op, int fd, uint32_t events, uint64_t tag);

/* Nonblocking writes of the pattern from stream offset off until the socket stays full (EAGAIN
 * and no POLLOUT); returns the new offset. Leaves fd nonblocking. Only once the peer has
 * accepted the connection: under usmc, one not accepted yet holds only what the client may
 * write before the server attaches (64 KB), and has room again when it does. */
uint64_t cf_fill_until_full(int fd, uint64_t off, unsigned seed);

/* The readiness programs over many connections (n <= 255). The peer connects n times, writes
 * each connection's index as one byte on every third one (index % 3 == 0) and posts; after
 * the parent's post it writes the index on all the others; then it expects index + 1 back on
 * every connection. The parent, once it has read the bytes of the ready connections into
 * idx[] (-1 for those not read), calls cf_fanout_answer to do the rest. */
void cf_fanout_peer(uint16_t port, int n);
void cf_fanout_answer(const int *fds, int *idx, int n);

/* Prefork: a worker that accepts on l forever, echoing one msg-byte message per connection
 * delay_ms after it came, and closes gate (unless -1) once it served its first connection;
 * and a client that makes rounds of at_once connections to port, opened together, each sending
 * msg bytes and reading them back. The client prints and checks that every round trip came
 * back intact. */
void cf_echo_worker(int l, size_t msg, long delay_ms, int gate) __attribute__((noreturn));
void cf_echo_rounds(uint16_t port, int rounds, int at_once, size_t msg);
/* One connection to listener l: a peer process sends 100 bytes, which this process accepts and
 * sends back, and the peer checks them (as cf_echo_rounds). */
void cf_echo_once(int l);

/* Urgent data as the reader of fd sees it, on one line: poll's POLLIN and POLLPRI, SIOCATMARK
 * and FIONREAD. */
void cf_show_urgent(int fd, const char *when);
/* recv(MSG_OOB | flags) of one byte: prints "label: 'c'", or the failure; returns recv's result. */
long cf_recv_oob(int fd, const char *label, int flags);

/* SIGURG, once cf_catch_sigurg() installed the handler (SA_RESTART): counted, and acknowledged
 * with a byte written to cf_urgent_ack unless it is -1. cf_wait_sigurg waits up to ms for the
 * count to reach want. */
extern volatile sig_atomic_t cf_urgent_signals;
extern int cf_urgent_ack;
void cf_catch_sigurg(void);
void cf_wait_sigurg(int want, int ms);
/* A peer (port: a uint16_t *, for cf_spawn) that sends one urgent byte and posts each time it
 * is told cf_post_u64(1), until told 0; then shuts down writing, reads to EOF and closes. */
void cf_urgent_sender(void *port);

/* A reader that closes with data unread: serves client (which must wait for the go, cf_wait,
 * then write the pattern of seed), shrinks its receive buffer, gives the go, reads 1 KB, and
 * closes once the writer had time to block on the full buffers; then joins the client. */
void cf_read_some_then_reset(void (*client)(void *port), unsigned seed);

/* The reader of a peer that filled the connection with the pattern of seed (cf_fill_until_full)
 * and posted how much (cf_post_u64), then shut down writing: reads and verifies it all, expects
 * EOF, closes s and joins the peer. */
void cf_recv_filled(int s, unsigned seed);

/* Raises RLIMIT_NOFILE to at least n. */
void cf_raise_nofile(rlim_t n);

#endif
