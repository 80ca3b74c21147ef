/* Reading the socket tables processes publish (src/core/socktab.h): every
 * number in them was written by another process and is checked here first. */
#ifndef USMC_TOOL_SOCKS_H
#define USMC_TOOL_SOCKS_H

#include <stdint.h>
#include <sys/types.h>

#include "../core/procfile.h"
#include "../core/socktab.h"

/* The table in f if its header holds together, else NULL. */
const struct socktab_hdr *socks_table(const struct procfile *f);
/* The table's process as this view's /proc names it (the table holds its pid in
 * its own pid namespace): inside a container, its pid there; on the host, the
 * host's. 0 when it cannot be seen from here (another container's). */
pid_t socks_pid(const struct socktab_hdr *h);
/* Slots below this may be in use. */
uint32_t socks_used(const struct socktab_hdr *h);
/* A consistent copy of slot i naming a socket in a known state; 0 when the slot
 * is free, kept changing, or holds values no library writes. */
int socks_slot(const struct socktab_hdr *h, uint32_t i, struct socktab_slot *out);

#endif
