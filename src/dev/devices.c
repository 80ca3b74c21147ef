/* The devices this process uses, in order of preference (USMC_DEVICE). */
#include "dev.h"

#include "../core/config.h"
#include "../core/stats.h"

_Static_assert(DEV_KINDS == CONFIG_DEVICES_MAX, "config.c names every device");
_Static_assert(DEV_KINDS == STAT_DEVICES, "stats.c names every device");

static const struct dev_ops *const all[DEV_KINDS] = {&dev_lo, &dev_ivshmem};
static const struct dev_ops *list[DEV_KINDS] = {&dev_lo};

const struct dev_ops *const *dev_list = list;
int dev_count = 1;

int dev_wakes_none(void)
{
	for (int i = 0; i < dev_count; i++)
		if (list[i]->wake_fd)
			return 1;
	return 0;
}

const struct dev_ops *dev_of_kind(int kind)
{
	for (int i = 0; i < dev_count; i++)
		if ((int)list[i]->kind == kind)
			return list[i];
	return NULL;
}

void dev_configure(void)
{
	for (int i = 0; i < cfg.ndevices; i++)
		list[i] = all[cfg.devices[i]];
	dev_count = cfg.ndevices;
}
