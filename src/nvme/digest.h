/* NVMe/TCP's header and data digests: CRC32C, from ISA-L where the build has it
 * (its AVX-512 kernels sum faster than anything here), fused with a copy from
 * usmc's own kernel (ISA-L has no copy that sums). */
#ifndef USMC_NVME_DIGEST_H
#define USMC_NVME_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "../util/crc32c.h"

/* The raw register, from CRC32C_INIT; the digest is crc32c_final() of it. */
uint32_t digest_sum(uint32_t crc, const void *buf, size_t n);
/* What sums: "isa-l" or usmc's kernel (crc32c_impl()). */
const char *digest_impl(void);

#endif
