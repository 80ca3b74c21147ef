#include "sys.h"
#undef real

#include <dlfcn.h>
#include <errno.h>
#include <gnu/lib-names.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

struct sys_calls sys_real;
int sys_ready;

/* Opened only when needed, never while a sanitizer runtime calls in ahead of the
 * program's start: a dlopen() that early runs the C library's initialisation
 * before its time, with no environment, and getenv() finds nothing from then on. */
static void *libc_handle(void)
{
	static void *libc;

	if (!libc)
		libc = dlopen(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
	return libc;
}

static void *must(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	/* A program linked with the C library ahead of us has no next definition
	 * after ours: libc's own is the real one. */
	if (!p && libc_handle())
		p = dlsym(libc_handle(), name);
	if (!p) {
		fprintf(stderr, "usmc: cannot resolve %s: %s\n", name, dlerror());
		abort();
	}
	return p;
}

/* epoll_pwait2 is missing from older C libraries; the interposer then reports ENOSYS. */
static void *maybe(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

void sys_init(void)
{
#define R(n) (*(void **)&sys_real.n = must(#n))
	R(socket); R(connect); R(bind); R(listen); R(accept4); R(close);
	R(shutdown); R(dup); R(dup2); R(dup3); R(fcntl); R(ioctl); R(setsockopt);
	R(getsockopt); R(read); R(write); R(readv); R(writev); R(recv); R(send);
	R(recvfrom); R(sendto); R(recvmsg); R(sendmsg); R(recvmmsg); R(sendmmsg);
	R(sendfile); R(splice); R(poll); R(ppoll); R(select); R(pselect); R(epoll_create);
	R(epoll_create1); R(epoll_ctl); R(epoll_wait); R(epoll_pwait); R(sigaction);
	R(open); R(execve); R(execvpe); R(fexecve); R(posix_spawn); R(posix_spawnp);
#undef R
	*(void **)&sys_real.epoll_pwait2 = maybe("epoll_pwait2");
	/* C libraries before 2.34 have neither: their callers make the system call. */
	*(void **)&sys_real.close_range = maybe("close_range");
	*(void **)&sys_real.closefrom = maybe("closefrom");
	sys_ready = 1;
}

int sys_libc_first(void)
{
	void *libc = libc_handle();

	return libc && dlsym(RTLD_DEFAULT, "socket") == dlsym(libc, "socket");
}

static int fd_high_base(void)
{
	struct rlimit rl;
	rlim_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;

	if (lim > (1u << 20))
		lim = 1u << 20;
	return (int)(lim - lim / 4);
}

int sys_fd_high(int fd)
{
	static _Atomic int base;

	if (fd < 0)
		return fd;
	int b = atomic_load_explicit(&base, memory_order_relaxed);
	if (!b)
		atomic_store_explicit(&base, b = fd_high_base(), memory_order_relaxed);
	if (fd >= b)
		return fd;
	int n = sys_real.fcntl(fd, F_DUPFD_CLOEXEC, b);
	if (n < 0 && errno == EINVAL) {
		/* The limit was lowered since (nginx's worker_rlimit_nofile does so
		 * in each worker): aim below the new one from now on. */
		atomic_store_explicit(&base, b = fd_high_base(), memory_order_relaxed);
		if (fd >= b)
			return fd;
		n = sys_real.fcntl(fd, F_DUPFD_CLOEXEC, b);
	}
	if (n < 0)
		return fd;
	sys_real.close(fd);
	return n;
}

static _Atomic pid_t my_pid;

pid_t sys_pid(void)
{
	pid_t me = atomic_load_explicit(&my_pid, memory_order_relaxed);

	if (!me)
		atomic_store_explicit(&my_pid, me = getpid(), memory_order_relaxed);
	return me;
}

void sys_atfork_child(void)
{
	atomic_store(&my_pid, 0);
}

void *sys_zalloc(size_t n)
{
	void *p = malloc(n);

	/* Hides where p came from: compilers turn malloc() and memset() back into calloc(). */
	__asm__("" : "+r"(p));
	return p ? memset(p, 0, n) : NULL;
}

uint64_t sys_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

ssize_t sys_read_file(const char *path, char *buf, size_t n)
{
	struct sys_calls *c = sys_calls();
	int fd = c->open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r = fd < 0 ? -1 : c->read(fd, buf, n - 1);

	if (fd >= 0)
		c->close(fd);
	buf[r > 0 ? r : 0] = 0;
	return r;
}

int sys_descends(pid_t p, pid_t from)
{
	char path[32], buf[512];

	for (int depth = 0; from > 0 && depth < 64; depth++) {
		if (p == from)
			return 1;
		if (p <= 1)
			return 0;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)p);
		/* The fields follow the last ')': the command name may hold any. */
		char *e = sys_read_file(path, buf, sizeof(buf)) > 0 ? strrchr(buf, ')') : NULL;
		int parent;
		if (!e || sscanf(e + 1, " %*c %d", &parent) != 1)
			return 0;
		p = parent;
	}
	return 0;
}

uint32_t sys_tcp_rcvbuf(void)
{
	static _Atomic uint32_t v;
	uint32_t got = atomic_load_explicit(&v, memory_order_relaxed);
	char buf[64], *p = buf;
	uint64_t mid = 0;

	if (got)
		return got;
	/* "min default max": the second number, parsed by hand (a readiness look
	 * may ask inside a signal handler). */
	if (sys_read_file("/proc/sys/net/ipv4/tcp_rmem", buf, sizeof(buf)) > 0) {
		while (*p >= '0' && *p <= '9')
			p++;
		while (*p == ' ' || *p == '\t')
			p++;
		while (*p >= '0' && *p <= '9' && mid <= UINT32_MAX)
			mid = mid * 10 + (uint64_t)(*p++ - '0');
	}
	/* The kernel's own default, should the file be out of reach. */
	got = mid && mid <= UINT32_MAX ? (uint32_t)mid : 131072;
	atomic_store_explicit(&v, got, memory_order_relaxed);
	return got;
}

uint64_t sys_deadline(const struct timeval *tv)
{
	if (!tv->tv_sec && !tv->tv_usec)
		return 0;
	return sys_now_ns() + (uint64_t)tv->tv_sec * 1000000000ull + (uint64_t)tv->tv_usec * 1000ull;
}

int sys_ms_left(uint64_t deadline_ns)
{
	if (!deadline_ns)
		return -1;
	uint64_t now = sys_now_ns();
	if (now >= deadline_ns)
		return 0;
	uint64_t ms = (deadline_ns - now + 999999) / 1000000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

/* Initial-exec: every close() looks at it, and the library is preloaded, so its
 * thread-local block is allocated with the program's, without __tls_get_addr(). */
static __thread uintptr_t signal_frame __attribute__((tls_model("initial-exec")));

uintptr_t sys_signal_enter(uintptr_t frame)
{
	uintptr_t mark = signal_frame;

	signal_frame = frame;
	return mark;
}

void sys_signal_leave(uintptr_t mark)
{
	signal_frame = mark;
}

int sys_in_signal(void)
{
	uintptr_t f = signal_frame;

	/* The stack grows down: a caller inside the handler runs below its frame. */
	return f && (uintptr_t)__builtin_frame_address(0) < f;
}

int sys_pid_gone(pid_t pid)
{
	char path[32], buf[256];

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	/* The state follows the last ')': the command name may hold any. */
	char *e = sys_read_file(path, buf, sizeof(buf)) > 0 ? strrchr(buf, ')') : NULL;
	return e && (e[2] == 'Z' || e[2] == 'X');
}
