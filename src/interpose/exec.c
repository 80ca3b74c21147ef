/* exec(): accelerated connections the next program inherits keep their state.
 *
 * Before the exec, every attached connection whose descriptor survives it
 * (no FD_CLOEXEC) is described in a memfd the next program inherits, with
 * inheritable copies of its arena, doorbells and holders' page; the environment
 * names the memfd. The library's constructor in the next program maps them back
 * and takes up the connections where they were: the peer notices nothing. If
 * the exec fails, the copies go and nothing changed. The next program must run
 * under usmc as well, so LD_PRELOAD is kept naming the library. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
#define HANDOVER_MAGIC 0x32564448u /* "HDV2" */
#define HANDOVER_MAX 4096

/* The memfd: this header, count records, then naliases aliases. */
struct handover_hdr {
	uint32_t magic;
	uint32_t count;
	uint32_t naliases;
	uint32_t pad;
};

/* One exec at a time builds its handover. */
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct conn_export *x;
	struct usock **owner;          /* whose record x[i] is */
	uint32_t n, cap;
	struct conn_alias *alias;
	uint32_t naliases, alias_cap;
} ho;

/* Room for one more of something ho keeps: grows *v (and *w alike, if given). */
static int grow(void **v, void **w, size_t size, size_t wsize, uint32_t n, uint32_t *cap)
{
	if (n < *cap)
		return 0;
	uint32_t c = *cap ? *cap * 2 : 16;
	void *nv = realloc(*v, c * size);
	if (nv)
		*v = nv;
	void *nw = nv && w ? realloc(*w, c * wsize) : NULL;
	if (nw)
		*w = nw;
	if (!nv || (w && !nw))
		return -1;
	*cap = c;
	return 0;
}

static void collect(int fd, struct obj *o)
{
	struct usock *s = sock_of(o);
	int fl;

	if (!s || ho.n == HANDOVER_MAX || (fl = real.fcntl(fd, F_GETFD)) < 0 || (fl & FD_CLOEXEC))
		return;
	for (uint32_t i = 0; i < ho.n; i++)
		if (ho.owner[i] == s) {
			if (ho.naliases < HANDOVER_MAX &&
			    grow((void **)&ho.alias, NULL, sizeof(*ho.alias), 0, ho.naliases,
				 &ho.alias_cap) == 0)
				ho.alias[ho.naliases++] = (struct conn_alias){fd, i};
			return;
		}
	if (grow((void **)&ho.x, (void **)&ho.owner, sizeof(*ho.x), sizeof(*ho.owner), ho.n,
		 &ho.cap) < 0)
		return;
	if (conn_export(s, fd, &ho.x[ho.n]) == 0)
		ho.owner[ho.n++] = s;
}

static void drop_exports(void)
{
	for (uint32_t i = 0; i < ho.n; i++)
		conn_export_close(&ho.x[i]);
	ho.n = ho.naliases = 0;
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
 * it is) and leaves exec_lock held until handover_end(). */
static char **handover_begin(char *const envp[], int *memfd)
{
	*memfd = -1;
	pthread_mutex_lock(&exec_lock);
	if (!usmc_active())
		return NULL;
	fdtab_foreach(collect);
	if (!ho.n)
		return NULL;
	struct handover_hdr h = {HANDOVER_MAGIC, ho.n, ho.naliases, 0};
	size_t len = ho.n * sizeof(ho.x[0]), alen = ho.naliases * sizeof(ho.alias[0]);
	int fd = memfd_create("usmc-handover", 0);
	char **env = NULL;
	if (fd >= 0 && pwrite(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
	    pwrite(fd, ho.x, len, sizeof(h)) == (ssize_t)len &&
	    (!alen || pwrite(fd, ho.alias, alen, (off_t)(sizeof(h) + len)) == (ssize_t)alen))
		env = handover_env(envp, fd);
	if (!env) {
		if (fd >= 0)
			real.close(fd);
		drop_exports();
		return NULL;
	}
	*memfd = fd;
	return env;
}

/* The exec failed (it returns only then): nothing was handed over. */
static void handover_end(char **env, int memfd)
{
	int e = errno;

	if (memfd >= 0)
		real.close(memfd);
	drop_exports();
	free_env(env);
	pthread_mutex_unlock(&exec_lock);
	errno = e;
}

/* The aliases of the records taken up into s[]: each descriptor that is still
 * the same socket as its record's gets the connection too. */
static void adopt_aliases(int memfd, const struct handover_hdr *h, struct usock **s,
			  const int *fds)
{
	for (uint32_t i = 0; i < h->naliases; i++) {
		struct conn_alias a;
		off_t at = (off_t)(sizeof(*h) + h->count * sizeof(struct conn_export) + i * sizeof(a));
		if (pread(memfd, &a, sizeof(a), at) != (ssize_t)sizeof(a))
			return;
		if (a.index >= h->count || !s[a.index] || a.fd < 0 || a.fd == fds[a.index] ||
		    !sys_same_socket(a.fd, fds[a.index]))
			continue;
		fdtab_alias(a.fd, &s[a.index]->o);
	}
}

void exec_adopt(void)
{
	const char *v = getenv(HANDOVER_ENV);
	char *end;
	struct handover_hdr h;
	struct usock **s = NULL;
	int *fds = NULL;

	if (!v)
		return;
	long fd = strtol(v, &end, 10);
	unsetenv(HANDOVER_ENV);
	if (*end || fd < 0 || fd > 0x7fffffff)
		return;
	if (pread((int)fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && h.magic == HANDOVER_MAGIC &&
	    h.count <= HANDOVER_MAX && h.naliases <= HANDOVER_MAX &&
	    (s = calloc(h.count + 1, sizeof(*s))) && (fds = calloc(h.count + 1, sizeof(*fds)))) {
		for (uint32_t i = 0; i < h.count; i++) {
			struct conn_export x;
			int type = 0;
			socklen_t tl = sizeof(type);
			if (pread((int)fd, &x, sizeof(x), (off_t)(sizeof(h) + i * sizeof(x))) !=
			    (ssize_t)sizeof(x))
				break;
			/* The socket must still be a stream socket where it was. */
			if (real.getsockopt(x.fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
			    type != SOCK_STREAM) {
				conn_export_close(&x);
				continue;
			}
			fds[i] = x.fd;
			s[i] = conn_import(&x);
			if (s[i] && fdtab_set(x.fd, &s[i]->o) < 0) {
				usock_put(s[i]);
				s[i] = NULL;
			}
		}
		adopt_aliases((int)fd, &h, s, fds);
	}
	free(s);
	free(fds);
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
	char **env = handover_begin(envp, &memfd);

	real.execve(path, argv, env ? env : envp);
	handover_end(env, memfd);
	return -1;
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	int memfd;
	char **env = handover_begin(envp, &memfd);

	real.execvpe(file, argv, env ? env : envp);
	handover_end(env, memfd);
	return -1;
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
	int memfd;
	char **env = handover_begin(envp, &memfd);

	real.fexecve(fd, argv, env ? env : envp);
	handover_end(env, memfd);
	return -1;
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
