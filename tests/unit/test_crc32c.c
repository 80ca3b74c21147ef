/* CRC32C: the standard check value, every implementation the processor has
 * against the byte table at every length and alignment up to a few blocks,
 * split sums, the fused copy, and the folding constants derived again. The
 * implementation file is included so that each one can be called by name. */
#include "check.h"

#include "../../src/util/crc32c.c"

#include <stdlib.h>

#define LEN_MAX 1200

struct impl_case {
	const char *name;
	copy_fn *copy;
	int present;
};

static struct impl_case impls[3];
static int nimpls;

static void find_impls(void)
{
	impls[nimpls++] = (struct impl_case){"table", crc_table, 1};
#if defined(__x86_64__)
	impls[nimpls++] = (struct impl_case){"pclmulqdq", crc_pclmul,
					     __builtin_cpu_supports("sse4.2") &&
						     __builtin_cpu_supports("pclmul")};
	impls[nimpls++] = (struct impl_case){"vpclmulqdq", crc_vpclmul,
					     __builtin_cpu_supports("avx2") &&
						     __builtin_cpu_supports("vpclmulqdq")};
#endif
}

static void check_value(void)
{
	CHECK_EQ(crc32c_final(crc32c(CRC32C_INIT, "123456789", 9)), 0xe3069283u);
	CHECK_EQ(crc32c_final(crc32c(CRC32C_INIT, "", 0)), 0);
	/* 32 zero bytes: the iSCSI test vector (RFC 3720, B.4). */
	static const unsigned char zeros[32];
	CHECK_EQ(crc32c_final(crc32c(CRC32C_INIT, zeros, 32)), 0x8a9136aau);
	static unsigned char ones[32];
	memset(ones, 0xff, sizeof(ones));
	CHECK_EQ(crc32c_final(crc32c(CRC32C_INIT, ones, 32)), 0x62a8ab43u);
}

static uint64_t k_reg(unsigned n)
{
	uint32_t v = crc32c_xpow(n), r = 0;

	for (int i = 0; i < 32; i++)
		if (v & (1u << i))
			r |= 1u << (31 - i);
	return (uint64_t)r << 32;
}

static void check_constants(void)
{
#if defined(__x86_64__)
	CHECK_EQ(K128_HI, k_reg(128 + 63));
	CHECK_EQ(K128_LO, k_reg(128 - 1));
	CHECK_EQ(K1024_HI, k_reg(1024 + 63));
	CHECK_EQ(K1024_LO, k_reg(1024 - 1));
#endif
	CHECK_EQ(crc32c_xpow(0), 1);
	CHECK_EQ(crc32c_xpow(32), POLY_NORMAL);
}

static void check_all_lengths(void)
{
	unsigned char *src = malloc(LEN_MAX + 64), *dst = malloc(LEN_MAX + 64 + 2);

	for (int i = 0; i < LEN_MAX + 64; i++)
		src[i] = (unsigned char)(rand() >> 7);
	for (int m = 0; m < nimpls; m++) {
		if (!impls[m].present) {
			printf("     (%s: not on this processor)\n", impls[m].name);
			continue;
		}
		for (size_t n = 0; n <= LEN_MAX; n += n < 300 ? 1 : 7) {
			for (size_t off = 0; off < 3; off++) {
				uint32_t want = crc_table(0x1234567u, NULL, src + off, n);

				CHECK_EQ(impls[m].copy(0x1234567u, NULL, src + off, n), want);
				memset(dst, 0xa5, LEN_MAX + 66);
				CHECK_EQ(impls[m].copy(0x1234567u, dst + 1, src + off, n), want);
				CHECK(!memcmp(dst + 1, src + off, n));
				CHECK(dst[0] == 0xa5 && dst[n + 1] == 0xa5);
			}
		}
	}
	free(src);
	free(dst);
}

/* The register carries over: any split of a buffer sums the same. */
static void check_splits(void)
{
	enum { N = 70000 };
	unsigned char *b = malloc(N), *d = malloc(N);

	for (int i = 0; i < N; i++)
		b[i] = (unsigned char)(i * 131 + (i >> 9));
	uint32_t whole = crc32c(CRC32C_INIT, b, N);
	CHECK_EQ(whole, crc_table(CRC32C_INIT, NULL, b, N));
	for (size_t cut = 1; cut < N; cut = cut * 3 + 1) {
		uint32_t c = crc32c(CRC32C_INIT, b, cut);

		CHECK_EQ(crc32c(c, b + cut, N - cut), whole);
		c = crc32c_copy(CRC32C_INIT, d, b, cut);
		CHECK_EQ(crc32c_copy(c, d + cut, b + cut, N - cut), whole);
	}
	CHECK(!memcmp(b, d, N));
	free(b);
	free(d);
}

int main(void)
{
	find_impls();
	printf("     (dispatched: %s)\n", crc32c_impl());
	RUN(check_value);
	RUN(check_constants);
	RUN(check_all_lengths);
	RUN(check_splits);
	return check_report();
}
