/* The C library's own entry points for every call usmc interposes. Library code
 * calls these, never the plain names, so it cannot recurse into itself. */
#ifndef USMC_SYS_H
#define USMC_SYS_H

#include <poll.h>
#include <spawn.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>

struct sys_calls {
	int (*socket)(int, int, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*close)(int);
	int (*close_range)(unsigned, unsigned, int);
	void (*closefrom)(int);
	int (*shutdown)(int, int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*recvmmsg)(int, struct mmsghdr *, unsigned int, int, struct timespec *);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned int, int);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*splice)(int, loff_t *, int, loff_t *, size_t, unsigned int);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
		       const sigset_t *);
	int (*epoll_create)(int);
	int (*epoll_create1)(int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
	int (*epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *,
			    const sigset_t *);
	int (*sigaction)(int, const struct sigaction *, struct sigaction *);
	int (*open)(const char *, int, ...);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
	int (*posix_spawn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			   const posix_spawnattr_t *, char *const[], char *const[]);
	int (*posix_spawnp)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			    const posix_spawnattr_t *, char *const[], char *const[]);
};

extern struct sys_calls sys_real;
extern int sys_ready;

/* Resolves every entry. Normally the library's constructor does it, but a
 * sanitizer runtime preloaded ahead of us calls in before that. */
void sys_init(void);
/* The program calls the C library's socket(), not ours: it was linked with -lc
 * ahead of -lusmc. (A sanitizer's interceptor in front of ours does not count.) */
int sys_libc_first(void);

static inline struct sys_calls *sys_calls(void)
{
	if (__builtin_expect(!sys_ready, 0))
		sys_init();
	return &sys_real;
}

#define real (*sys_calls())

/* Moves a descriptor usmc keeps for itself out of the range applications expect
 * theirs in (some size tables by the highest descriptor, select() stops at
 * FD_SETSIZE). Returns the new descriptor, or fd if it cannot be moved. */
int sys_fd_high(int fd);

uint64_t sys_now_ns(void);
/* A zeroed object of n bytes, for those made and freed with every connection. The C
 * library's calloc() goes past its per-thread cache of freed blocks every time, which
 * costs several times malloc() and a memset(). */
void *sys_zalloc(size_t n);
/* getpid(), asked once per process: accepting connections asks it often.
 * sys_atfork_child() forgets it in a child. */
pid_t sys_pid(void);
void sys_atfork_child(void);
/* Reads at most n - 1 bytes of a small file (under /proc) into buf, terminated;
 * returns how many, -1 if it cannot. Async-signal-safe. */
ssize_t sys_read_file(const char *path, char *buf, size_t n);
/* p is from, or a descendant of it, as /proc/PID/stat's parent links tell
 * (which anyone may read): a prefork worker of the process that listens, a
 * forked child of the one that connected. */
int sys_descends(pid_t p, pid_t from);
/* Whether process pid (of our pid namespace) has ended: gone, or a zombie its
 * parent has not reaped yet. */
int sys_pid_gone(pid_t pid);
/* The receive buffer of a TCP socket nobody set one for, as getsockopt(SO_RCVBUF)
 * reports it (the second value of net.ipv4.tcp_rmem: a socket whose bytes go
 * through shared memory keeps it, the kernel never tunes it), read once. */
uint32_t sys_tcp_rcvbuf(void);
/* When a SO_RCVTIMEO or SO_SNDTIMEO timeout started now ends (0: it has none). */
uint64_t sys_deadline(const struct timeval *tv);
/* Milliseconds left until deadline_ns (0 = none: -1, infinite). */
int sys_ms_left(uint64_t deadline_ns);

/* The application's signal handlers run inside a wrapper of ours (signal.c), which marks
 * where on the stack each begins: sys_signal_enter(its frame) returns the mark to give
 * sys_signal_leave() when it returns. sys_in_signal() tells whether its caller runs inside
 * a handler, where only async-signal-safe work may be done: no lock the interrupted code
 * may hold, no malloc(). A handler left by longjmp() keeps its mark, which then claims only
 * calls made deeper in the stack than it ran: they take the signal-safe path, which is
 * slower, never wrong. */
uintptr_t sys_signal_enter(uintptr_t frame);
void sys_signal_leave(uintptr_t mark);
int sys_in_signal(void);

#endif
