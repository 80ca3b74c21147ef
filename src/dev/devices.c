/* The devices this process uses, in order of preference. */
#include "dev.h"

static const struct dev_ops *list[DEV_KINDS] = {&dev_lo};

const struct dev_ops *const *dev_list = list;
int dev_count = 1;
