#ifndef USMC_INIT_H
#define USMC_INIT_H

/* False when usmc is disabled or failed to start: interposed calls pass through. */
int usmc_active(void);

#endif
