/* Library start-up: resolve the C library, read settings, and arrange for fork. */
#include "init.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/accept.h"
#include "../core/admit.h"
#include "../core/config.h"
#include "../core/handoff.h"
#include "../core/lgr.h"
#include "../core/registry.h"
#include "../core/shortlived.h"
#include "../core/socktab.h"
#include "../core/stats.h"
#include "../core/sys.h"
#include "../erm/erm.h"
#include "../dev/dev.h"
#include "epoll.h"
#include "fdtab.h"

static int active;

int usmc_active(void)
{
	return active;
}

static void prepare_one(int fd, struct obj *o)
{
	if (o->kind == OBJ_SOCK)
		conn_atfork_prepare((struct usock *)o, fd);
}

static void atfork_prepare(void)
{
	fdtab_foreach(prepare_one);
	obj_atfork_prepare();
}

/* A listener's accept instance came from the parent: the child opens its own.
 * A connection's extension state (ERM) is the parent's alone. */
static void child_one(int fd, struct obj *o)
{
	(void)fd;
	if (o->kind == OBJ_SOCK) {
		accept_forget((struct usock *)o);
		conn_atfork_child((struct usock *)o);
	}
}

static void atfork_child(void)
{
	/* A child of a process with an accelerated listener may be a worker that
	 * will accept on it as another user. */
	int server = lgr_server_listening();

	obj_atfork_release();
	fdtab_foreach(child_one);
	epoll_atfork_child();
	for (int i = 0; i < dev_count; i++)
		if (dev_list[i]->atfork_child)
			dev_list[i]->atfork_child();
	lgr_atfork_child();
	handoff_atfork_child();
	sys_atfork_child();
	socktab_atfork_child(server);
	registry_atfork_child();
	shortlived_atfork_child();
	stat_atfork_child();
}

/* Whether the library was preloaded (usmc run, LD_PRELOAD) rather than linked. */
static int preloaded(void)
{
	Dl_info self;
	const char *pre = getenv("LD_PRELOAD");

	if (!pre || !dladdr((void *)preloaded, &self) || !self.dli_fname)
		return 0;
	const char *base = strrchr(self.dli_fname, '/');
	base = base ? base + 1 : self.dli_fname;
	for (const char *p = pre; *p;) {
		size_t n = strcspn(p, ": ");
		const char *b = memrchr(p, '/', n);
		b = b ? b + 1 : p;
		if ((size_t)(p + n - b) == strlen(base) && !memcmp(b, base, strlen(base)))
			return 1;
		p += n + (p[n] != 0);
	}
	return 0;
}

__attribute__((constructor)) static void usmc_init(void)
{
	sys_init();
	if (sys_libc_first()) {
		fprintf(stderr, "usmc: the C library comes before libusmc in this program's link "
				"order (-lusmc must precede -lc); running without acceleration\n");
		return;
	}
	if (config_load() < 0 || admit_load(preloaded()) < 0) {
		fprintf(stderr, "usmc: bad settings; running without acceleration\n");
		return;
	}
	if (cfg.disabled)
		return;
	/* Before our own fork handlers: its lock is let go first in a child. */
	erm_init();
	dev_configure();
	pthread_atfork(atfork_prepare, obj_atfork_release, atfork_child);
	active = 1;
	exec_adopt();
}
