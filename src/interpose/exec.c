/* exec(): accelerated connections the next program inherits keep their state.
 *
 * Before the exec, every attached connection whose descriptor survives it
 * (no FD_CLOEXEC) is described in a memfd the next program inherits, with
 * inheritable copies of its arena, doorbell and holders' page; the environment
 * names the memfd. The library's constructor in the next program maps them back
 * and takes up the connections where they were: the peer notices nothing. If
 * the exec fails, the copies go and nothing changed. The next program must run
 * under usmc as well, so LD_PRELOAD is kept naming the library. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../core/conn.h"
#include "../core/sys.h"
#include "fdtab.h"
#include "init.h"

#define HANDOVER_ENV "USMC_HANDOVER"
#define HANDOVER_MAGIC 0x33564448u /* "HDV3" */
#define HANDOVER_MAX 4096

/* The memfd: this header, then count records. */
struct handover_hdr {
	uint32_t magic;
	uint32_t count;
};

/* One exec or spawn at a time builds its handover: one record per connection,
 * however many descriptors it has (inetd-style children dup2 the socket onto
 * standard input, output and error). The next program finds every descriptor
 * of it by the socket's inode, whatever numbers they got on the way. */
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct conn_export *x;
	struct usock **owner;          /* whose record x[i] is */
	uint32_t n, cap;
	int share;                     /* spawn: we go on holding what we hand over */
} ho;

static void collect(int fd, struct obj *o)
{
	struct usock *s = sock_of(o);
	int fl;

	if (!s || ho.n == HANDOVER_MAX || (fl = real.fcntl(fd, F_GETFD)) < 0 || (fl & FD_CLOEXEC))
		return;
	conn_settle(s, fd);
	if (!conn_attached(s))
		return;
	for (uint32_t i = 0; i < ho.n; i++)
		if (ho.owner[i] == s)
			return;
	if (ho.n == ho.cap) {
		uint32_t cap = ho.cap ? ho.cap * 2 : 16;
		struct conn_export *x = realloc(ho.x, cap * sizeof(*x));
		if (x)
			ho.x = x;
		struct usock **w = x ? realloc(ho.owner, cap * sizeof(*w)) : NULL;
		if (w)
			ho.owner = w;
		if (!x || !w)
			return;
		ho.cap = cap;
	}
	/* A spawned program becomes one more holder, as a forked child does. */
	if (ho.share && conn_share(s) < 0)
		return;
	if (conn_export(s, fd, &ho.x[ho.n]) == 0)
		ho.owner[ho.n++] = s;
	else if (ho.share)
		conn_unshare(s);
}

/* undo: the handover did not happen; a spawn's shares are taken back. */
static void drop_exports(int undo)
{
	for (uint32_t i = 0; i < ho.n; i++) {
		conn_export_close(&ho.x[i]);
		if (undo && ho.share)
			conn_unshare(ho.owner[i]);
	}
	ho.n = 0;
}

/* The library's own path, for the next program's LD_PRELOAD. */
static const char *self_path(void)
{
	Dl_info info;

	return dladdr((void *)self_path, &info) && info.dli_fname ? info.dli_fname : NULL;
}

/* envp plus HANDOVER_ENV=fd, with LD_PRELOAD naming the library. */
static char **handover_env(char *const envp[], int fd)
{
	const char *lib = self_path();
	size_t n = 0;
	char *pre = NULL, *var = NULL;

	while (envp && envp[n])
		n++;
	char **env = calloc(n + 3, sizeof(*env));
	if (!env || asprintf(&var, "%s=%d", HANDOVER_ENV, fd) < 0) {
		free(env);
		return NULL;
	}
	size_t k = 0;
	const char *old_pre = NULL;
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(envp[i], HANDOVER_ENV "=", sizeof(HANDOVER_ENV)))
			continue;
		if (!strncmp(envp[i], "LD_PRELOAD=", 11)) {
			old_pre = envp[i] + 11;
			continue;
		}
		env[k++] = envp[i];
	}
	env[k++] = var;
	if (old_pre && (!lib || strstr(old_pre, lib)))
		asprintf(&pre, "LD_PRELOAD=%s", old_pre);
	else if (lib)
		asprintf(&pre, "LD_PRELOAD=%s%s%s", lib, old_pre ? ":" : "", old_pre ? old_pre : "");
	if (pre)
		env[k++] = pre;
	return env;
}

static void free_env(char **env)
{
	if (!env)
		return;
	/* Only the two strings made here were allocated: they come last. */
	size_t n = 0;
	while (env[n])
		n++;
	for (size_t i = n >= 2 ? n - 2 : 0; i < n; i++)
		if (!strncmp(env[i], HANDOVER_ENV "=", sizeof(HANDOVER_ENV)) ||
		    !strncmp(env[i], "LD_PRELOAD=", 11))
			free(env[i]);
	free(env);
}

/* Prepares the handover; returns the environment to exec with (NULL: envp as
 * it is) and leaves exec_lock held until handover_end(). share: the caller
 * goes on (posix_spawn), so what it hands over becomes shared. */
static char **handover_begin(char *const envp[], int *memfd, int share)
{
	*memfd = -1;
	pthread_mutex_lock(&exec_lock);
	if (!usmc_active())
		return NULL;
	ho.share = share;
	fdtab_foreach(collect);
	if (!ho.n)
		return NULL;
	struct handover_hdr h = {HANDOVER_MAGIC, ho.n};
	size_t len = ho.n * sizeof(ho.x[0]);
	int fd = memfd_create("usmc-handover", 0);
	char **env = NULL;
	if (fd >= 0 && pwrite(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
	    pwrite(fd, ho.x, len, sizeof(h)) == (ssize_t)len)
		env = handover_env(envp, fd);
	if (!env) {
		if (fd >= 0)
			real.close(fd);
		drop_exports(1);
		return NULL;
	}
	*memfd = fd;
	return env;
}

/* done: the program started (a spawn; an exec that returns failed), holding
 * its own copies of what went with the handover. */
static void handover_end(char **env, int memfd, int done)
{
	int e = errno;

	if (memfd >= 0)
		real.close(memfd);
	drop_exports(!done);
	free_env(env);
	pthread_mutex_unlock(&exec_lock);
	errno = e;
}

/* Every socket descriptor of this process and its inode, from /proc/self/fd;
 * 0 when it cannot be read. */
static size_t socket_fds(int **fds, uint64_t **inodes)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	size_t n = 0, cap = 0;

	*fds = NULL;
	*inodes = NULL;
	while (d && (e = readdir(d))) {
		char path[64], link[64];
		unsigned long long ino;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t l = readlink(path, link, sizeof(link) - 1);
		if (l <= 0 || (link[l] = 0, sscanf(link, "socket:[%llu]", &ino) != 1))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			int *f = realloc(*fds, cap * sizeof(*f));
			if (f)
				*fds = f;
			uint64_t *i = f ? realloc(*inodes, cap * sizeof(*i)) : NULL;
			if (i)
				*inodes = i;
			if (!f || !i)
				break;
		}
		(*fds)[n] = atoi(e->d_name);
		(*inodes)[n++] = ino;
	}
	if (d)
		closedir(d);
	return n;
}

/* Takes up one record: on the first descriptor of its socket (its own number
 * when /proc says nothing), with every other one as an alias. */
static void adopt(struct conn_export *x, const int *fds, const uint64_t *inodes, size_t n)
{
	struct usock *s = NULL;
	int type = 0;
	socklen_t tl = sizeof(type);
	size_t i = 0;

	while (i < n && inodes[i] != x->inode)
		i++;
	if (i < n)
		x->fd = fds[i];
	/* The socket must still be a stream socket where it was. */
	if ((n && i == n) || real.getsockopt(x->fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
	    type != SOCK_STREAM) {
		conn_export_close(x);
		return;
	}
	if (!(s = conn_import(x)))
		return;
	if (fdtab_set(x->fd, &s->o) < 0) {
		usock_put(s);
		return;
	}
	for (size_t k = i + 1; k < n; k++)
		if (inodes[k] == x->inode)
			fdtab_alias(fds[k], &s->o);
}

void exec_adopt(void)
{
	const char *v = getenv(HANDOVER_ENV);
	char *end;
	struct handover_hdr h;
	int *fds;
	uint64_t *inodes;

	if (!v)
		return;
	long fd = strtol(v, &end, 10);
	unsetenv(HANDOVER_ENV);
	if (*end || fd < 0 || fd > 0x7fffffff)
		return;
	size_t n = socket_fds(&fds, &inodes);
	if (pread((int)fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && h.magic == HANDOVER_MAGIC &&
	    h.count <= HANDOVER_MAX) {
		for (uint32_t i = 0; i < h.count; i++) {
			struct conn_export x;
			if (pread((int)fd, &x, sizeof(x), (off_t)(sizeof(h) + i * sizeof(x))) !=
			    (ssize_t)sizeof(x))
				break;
			adopt(&x, fds, inodes, n);
		}
	}
	free(fds);
	free(inodes);
	real.close((int)fd);
}

/* vfork(): the child would share our memory until it execs, while the library
 * keeps state there that the child's calls change (the exec handover and its
 * lock, descriptor tables): a handover begun in the child would leave the
 * parent's lock taken for good, and the next exec would hang. fork() gives the
 * child its own copy and shares connections as a fork does. POSIX lets vfork()
 * be fork(); programs that use it only to exec, as Python's subprocess does,
 * notice only that it costs more. */
pid_t vfork(void)
{
	return fork();
}

int execve(const char *path, char *const argv[], char *const envp[])
{
	int memfd;
	char **env = handover_begin(envp, &memfd, 0);

	real.execve(path, argv, env ? env : envp);
	handover_end(env, memfd, 0);
	return -1;
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	int memfd;
	char **env = handover_begin(envp, &memfd, 0);

	real.execvpe(file, argv, env ? env : envp);
	handover_end(env, memfd, 0);
	return -1;
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
	int memfd;
	char **env = handover_begin(envp, &memfd, 0);

	real.fexecve(fd, argv, env ? env : envp);
	handover_end(env, memfd, 0);
	return -1;
}

/* posix_spawn(): the C library's child execs out of our sight, so the handover
 * is made here, in the parent, which goes on holding the connections it hands
 * over (as at fork). The program finds them wherever the file actions put them. */
static int spawn(int (*fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			   const posix_spawnattr_t *, char *const[], char *const[]),
		 pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
		 const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	int memfd;
	char **env = handover_begin(envp, &memfd, 1);
	int r = fn(pid, file, fa, attr, argv, env ? env : envp);

	handover_end(env, memfd, r == 0);
	return r;
}

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return spawn(real.posix_spawn, pid, path, fa, attr, argv, envp);
}

int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
		 const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return spawn(real.posix_spawnp, pid, file, fa, attr, argv, envp);
}

int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* The list forms: arguments up to the NULL, then (execle) the environment. */
static char **list_argv(const char *first, va_list ap, char ***envp)
{
	va_list c;
	size_t n = 1;

	va_copy(c, ap);
	while (va_arg(c, char *))
		n++;
	va_end(c);
	char **argv = malloc((n + 1) * sizeof(*argv));
	if (!argv)
		return NULL;
	argv[0] = (char *)first;
	for (size_t i = 1; i <= n; i++)
		argv[i] = va_arg(ap, char *);
	if (envp)
		*envp = va_arg(ap, char **);
	return argv;
}

int execl(const char *path, const char *arg, ...)
{
	va_list ap;

	va_start(ap, arg);
	char **argv = list_argv(arg, ap, NULL);
	va_end(ap);
	if (!argv)
		return errno = ENOMEM, -1;
	execve(path, argv, environ);
	int e = errno;
	free(argv);
	errno = e;
	return -1;
}

int execlp(const char *file, const char *arg, ...)
{
	va_list ap;

	va_start(ap, arg);
	char **argv = list_argv(arg, ap, NULL);
	va_end(ap);
	if (!argv)
		return errno = ENOMEM, -1;
	execvpe(file, argv, environ);
	int e = errno;
	free(argv);
	errno = e;
	return -1;
}

int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char **envp;

	va_start(ap, arg);
	char **argv = list_argv(arg, ap, &envp);
	va_end(ap);
	if (!argv)
		return errno = ENOMEM, -1;
	execve(path, argv, envp);
	int e = errno;
	free(argv);
	errno = e;
	return -1;
}
