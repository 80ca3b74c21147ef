#include "digest.h"

#include <limits.h>

#ifdef USMC_ISAL
#include <isa-l/crc.h>

uint32_t digest_sum(uint32_t crc, const void *buf, size_t n)
{
	const unsigned char *p = buf;

	/* ISA-L takes an int length. */
	while (n > INT_MAX) {
		crc = crc32_iscsi((unsigned char *)p, INT_MAX, crc);
		p += INT_MAX;
		n -= INT_MAX;
	}
	return crc32_iscsi((unsigned char *)p, (int)n, crc);
}

const char *digest_impl(void)
{
	return "isa-l";
}
#else
uint32_t digest_sum(uint32_t crc, const void *buf, size_t n)
{
	return crc32c(crc, buf, n);
}

const char *digest_impl(void)
{
	return crc32c_impl();
}
#endif
