/* Library start-up: resolve the C library, read settings, and arrange for fork. */
#include "init.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../core/config.h"
#include "../core/lgr.h"
#include "../core/sys.h"
#include "fdtab.h"

static int active;

int usmc_active(void)
{
	return active;
}

static void prepare_one(int fd, struct obj *o)
{
	(void)fd;
	if (o->kind == OBJ_SOCK)
		conn_atfork_prepare((struct usock *)o);
}

static void atfork_prepare(void)
{
	fdtab_foreach(prepare_one);
}

static void atfork_child(void)
{
	lgr_atfork_child();
	conn_atfork_child();
}

__attribute__((constructor)) static void usmc_init(void)
{
	sys_init();
	if (config_load() < 0) {
		fprintf(stderr, "usmc: bad settings; running without acceleration\n");
		return;
	}
	if (cfg.disabled)
		return;
	pthread_atfork(atfork_prepare, NULL, atfork_child);
	active = 1;
	exec_adopt();
}
