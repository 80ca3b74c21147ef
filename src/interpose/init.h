#ifndef USMC_INIT_H
#define USMC_INIT_H

/* False when usmc is disabled or failed to start: interposed calls pass through. */
int usmc_active(void);
/* At start-up: take up the connections a program before exec() handed over. */
void exec_adopt(void);

#endif
