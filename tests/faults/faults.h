/* Scaffolding for the fault-injection programs: each plays a hostile peer against processes
 * running under usmc and checks that the damage stops at the connection concerned.
 *
 * Programs fork their own peers (which die with their parent), synchronise through channels
 * the library does not touch, and inspect the shared state the library keeps: the arena
 * mapping, segment headers, a process's counters and its descriptor table. Layouts come from
 * the library's own headers (src/core) so a change there breaks the build here, not the tests.
 */
#ifndef FAULTS_H
#define FAULTS_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "clc.h"
#include "segment.h"
#include "stats.h"

/* Watchdog (the program dies by SIGALRM after seconds) and line-buffered stdout. */
void fl_start(unsigned seconds);

_Noreturn void fl_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define FAIL(...) fl_fail(__FILE__, __LINE__, __VA_ARGS__)
#define CHECK(cond)                                  \
    do {                                             \
        if (!(cond))                                 \
            FAIL("check failed: %s", #cond);         \
    } while (0)
/* expr must fail with exactly this errno. */
#define EXPECT_ERRNO(expr, want)                                                         \
    do {                                                                                 \
        long r_ = (long)(expr);                                                          \
        int e_ = errno;                                                                  \
        if (r_ != -1 || e_ != (want))                                                    \
            FAIL("%s: got %ld %s, expected -1 %s", #expr, r_, r_ < 0 ? fl_errname(e_) : "", \
                 fl_errname(want));                                                      \
    } while (0)

const char *fl_errname(int err);
/* rm -rf. */
void fl_remove_tree(const char *path);
uint64_t fl_now_ms(void);
void fl_sleep_ms(unsigned ms);

/* ---- TCP on 127.0.0.1. The fl_* calls go through libc, so under usmc the library handles
 * them; the fl_raw_* calls are system calls the library never sees (a process "without usmc"
 * inside a program that runs under it). */
int fl_listen(uint16_t *port);
int fl_connect(uint16_t port);
/* The same, returning -1 and errno (as connect() does) when it fails. */
int fl_try_connect(uint16_t port);
int fl_accept(int lfd);
int fl_raw_socket(void);
/* Binds to local_port first when it is not 0. */
int fl_raw_connect(int fd, uint16_t port, uint16_t local_port);
uint16_t fl_local_port(int fd);
/* A local port nobody uses right now. */
uint16_t fl_free_port(void);
/* Moves the calling process into a network namespace of its own (root only) and returns a
 * socket connected there from local_port to a listener on port: the 4-tuple of a
 * connection to port from local_port here, which is not that connection. */
int fl_netns_twin(uint16_t port, uint16_t local_port);

/* Bytes of a stream that never contains an upper-case letter (so never a segment magic):
 * byte at stream offset off for a seed. Send or receive n bytes from offset off, verifying
 * what arrives; raw selects system calls over libc. Any error or early EOF fails. */
unsigned char fl_stream_byte(uint64_t off, unsigned seed);
void fl_send_stream(int fd, bool raw, uint64_t off, size_t n, unsigned seed);
void fl_recv_stream(int fd, bool raw, uint64_t off, size_t n, unsigned seed);
/* The same streams without an end: send until a send fails, or receive (verifying) until
 * EOF or an error. *off advances by what went through (it may be read by another thread);
 * returns the errno that ended it, 0 for EOF. */
int fl_send_until_error(int fd, _Atomic uint64_t *off, unsigned seed);
int fl_recv_until_end(int fd, _Atomic uint64_t *off, unsigned seed);
/* Reads must now report EOF. */
void fl_expect_eof(int fd, bool raw);
/* Waits up to ms for fd to become readable; the second fails the program naming what was
 * awaited. */
bool fl_readable(int fd, unsigned ms);
void fl_expect_readable(int fd, unsigned ms, const char *what);

/* A short plain connection from outside the library (system calls only): an echo of n
 * bytes must come back within 10 s. Against a server under usmc it also makes the server's
 * library accept, and so drain its control channels. */
void fl_probe_plain(uint16_t port, size_t n);
/* A client through the library: an echo of n bytes that must have gone through an attached
 * segment of this process's arena. */
void fl_probe_accelerated(uint16_t port, size_t n);

/* ---- processes */
/* fork(); the child gets the watchdog and dies with its parent. */
pid_t fl_fork(void);
/* fork() of a child that may outlive its parent (a forked pair whose parent is killed):
 * it keeps the watchdog, and the process that called fl_adopt_orphans() (a subreaper)
 * inherits it. */
pid_t fl_fork_orphanable(void);
void fl_adopt_orphans(void);
/* Exit status, or 128 + the signal that ended it. */
int fl_reap(pid_t pid);
bool fl_alive(pid_t pid);
/* Returns once thread tid of pid has been seen sleeping in the kernel twice in a row. */
void fl_wait_sleeping(pid_t pid, pid_t tid);
int fl_count_fds(pid_t pid);
/* Prints every descriptor of pid and what it is. */
void fl_list_fds(pid_t pid);

/* A lock-step channel between two processes (a Unix socketpair: the library leaves it
 * alone). Create before fork; each side then uses its end. */
struct fl_chan {
    int fd[2];
    int side;
};
void fl_chan_init(struct fl_chan *c);
void fl_chan_side(struct fl_chan *c, int side);
void fl_post(struct fl_chan *c, uint64_t v);
uint64_t fl_wait(struct fl_chan *c);

/* Single-threaded poll() echo server on lfd, until killed: one stuck connection stalls it,
 * which is exactly what a hostile peer must not be able to cause. */
_Noreturn void fl_echo_server(int lfd);
/* Echoes one connection until EOF, then exits. */
_Noreturn void fl_echo_fd(int fd);

/* A process that does something (sends a forged proposal, takes resources), then keeps
 * what it holds (descriptors, mappings, its network namespace) until it is let go. */
struct fl_actor {
    pid_t pid;
    struct fl_chan ch;
};
/* Forks it; it runs act(arg). Returns once act() has returned. */
void fl_actor_start(struct fl_actor *a, void (*act)(void *), void *arg);
/* Lets it go and reaps it; fails the program if it failed. */
void fl_actor_end(struct fl_actor *a);

/* ---- the library's state */
/* The run directory every process of the test shares (USMC_RUNDIR). */
const char *fl_rundir(void);
/* A counter of one process, read from its file under <rundir>/stats (0 before it has one). */
uint64_t fl_stat(pid_t pid, enum stat_id id);
/* This process's own counter (or its parent's, whose file a forked child shares), read
 * from its mapping of the stats file: it holds even when the file is gone, and is 0 when it
 * was never mapped. */
uint64_t fl_stat_self(enum stat_id id);
/* What became of this process's latest connection, from its connecting side's counters: take a tally
 * before, then fl_outcome() names it: "accelerated", the fallback reason, or "nothing". */
struct fl_tally {
    uint64_t accel, fallback[DECL_MAX];
};
void fl_tally(struct fl_tally *t);
const char *fl_outcome(const struct fl_tally *before);
/* The control socket the library of process pid listens on. */
void fl_ctl_path(pid_t pid, char *buf, size_t len);
/* Entries of the run directory (not stats/) that name process pid: its control socket
 * and listener links pointing at it. Prints them; returns how many. */
int fl_rundir_leftovers(pid_t pid);

/* What the library holds in a process: descriptors, and arena mappings. */
struct fl_footprint {
    int fds;
    int arenas;
};
void fl_footprint(pid_t pid, struct fl_footprint *f);
/* Fails naming what differs. */
void fl_expect_footprint(pid_t pid, const struct fl_footprint *before, const char *when);

/* This process's arena as mapped by the library: base, size, and the /proc/self/map_files
 * name that opens the memfd behind it. */
struct fl_arena {
    unsigned char *base;
    size_t size;
    char file[96];
};
void fl_arena_find(struct fl_arena *a);
/* The segment of this process's connection fd (where the process's socket table says, or
 * without a table the first that matches), which must be attached and whose rings must have
 * carried c2s and s2c bytes: exactly, or more where a ring rewound (ring.h), as the cursor
 * then counts the gap too. */
struct seg_hdr *fl_seg_of(const struct fl_arena *a, int fd, uint64_t c2s, uint64_t s2c);

/* ---- forged control messages */
/* A hand-made link group: a control connection to a listener's library, and an arena with
 * one pending segment at seg_off, as a client library would lay it out. */
struct fl_forge {
    int ctl;
    int memfd;
    unsigned char *base;
    uint64_t arena_size;
    int bell;
    struct clc_proposal p;
};
/* The memfd is arena_size bytes long; the proposal announces it as a new arena (flags
 * CLC_F_NEW_ARENA, id 1) holding the segment at seg_off with two rings of ring bytes. */
void fl_forge_init(struct fl_forge *f, const char *ctl_path, uint64_t arena_size,
                   uint64_t seg_off, uint64_t ring, uint64_t conn_id);
void fl_forge_close(struct fl_forge *f);
/* Descriptors of the proposal in wire order: tcp, the doorbell end, and the arena when announced. */
int fl_forge_fds(const struct fl_forge *f, int tcp, int *fds);
/* f's segment must still be pending, nothing produced into it by a server: fails the
 * program otherwise, saying when. */
void fl_forge_expect_pending(const struct fl_forge *f, const char *when);
/* Sends f's proposal naming TCP socket tcp, with its descriptors. */
void fl_forge_send(const struct fl_forge *f, int tcp);
/* One datagram with these descriptors; fails the program unless all of it was sent. */
void fl_ctl_send(int ctl, const void *msg, size_t len, const int *fds, int nfds);
/* Receives one message if one arrives within ms; returns its length or -1. */
ssize_t fl_ctl_recv(int ctl, void *buf, size_t len, unsigned ms);

#endif
