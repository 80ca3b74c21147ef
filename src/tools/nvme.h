/* usmc nvme (the program usmc-nvme): an NVMe/TCP target and host tools, one
 * file a command, and the options they share. */
#ifndef USMC_TOOL_NVME_H
#define USMC_TOOL_NVME_H

#include <stdint.h>

#include "../nvme/host.h"

/* Prints the usage to stderr and exits with status 2. */
_Noreturn void nvme_usage(void);
/* "4096", "64K", "1M", "2G": bytes; exits with the usage on anything else. */
uint64_t nvme_size_arg(const char *arg);
/* A whole number in [min, max], or the usage. */
unsigned long nvme_num_arg(const char *arg, unsigned long min, unsigned long max);

/* The host options every host command takes: consumes argv[*i] (and its value)
 * when it is one of them and returns 1, else returns 0. */
struct host_args {
	struct nvme_host_opts o;
	char traddr[256], trsvcid[32], subnqn[256];
	int have_subnqn;
	uint32_t nsid;
};
void host_args_init(struct host_args *a);
int host_arg(struct host_args *a, int argc, char **argv, int *i);
/* Connects as the arguments say; without a subsystem NQN, to the first NVM
 * subsystem the discovery controller at the same address lists. Exits with
 * status 1 and a message when it cannot. */
struct nvme_host *host_connect(struct host_args *a);

int cmd_nvme_target(int argc, char **argv);
int cmd_nvme_perf(int argc, char **argv);
int cmd_nvme_identify(int argc, char **argv);
int cmd_nvme_discover(int argc, char **argv);

#endif
