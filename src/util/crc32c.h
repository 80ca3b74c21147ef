/* CRC32C (Castagnoli), the checksum of iSCSI and of NVMe/TCP's digests, alone
 * or fused with a copy: the bytes are read once, copied and summed in the same
 * pass, so a receiver that must copy them anyway gets the checksum almost free.
 *
 * The running value is the raw register, as ISA-L's crc32_iscsi() keeps it:
 * start from CRC32C_INIT, feed the bytes in order, any split, and the digest is
 * the register's complement (crc32c_final()). */
#ifndef USMC_CRC32C_H
#define USMC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#define CRC32C_INIT 0xffffffffu

static inline uint32_t crc32c_final(uint32_t crc)
{
	return crc ^ 0xffffffffu;
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t n);
/* Copies n bytes from src to dst (which must not overlap) and returns the
 * register after src's bytes. */
uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n);

/* The implementation the processor got: "vpclmulqdq" (256-bit carry-less
 * folding, 128 bytes a step), "pclmulqdq" (one 16-byte lane), or "table". */
const char *crc32c_impl(void);

/* x^n mod P for CRC32C's polynomial, as a 32-bit polynomial (bit d holds the
 * coefficient of x^d): what the folding constants are made of, exposed so that
 * tests can derive them independently. */
uint32_t crc32c_xpow(unsigned n);

#endif
