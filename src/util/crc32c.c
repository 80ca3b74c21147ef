/* CRC32C by carry-less multiplication.
 *
 * Folding: the bytes seen so far, as a polynomial, are congruent modulo P to a
 * 128-bit accumulator X; appending D more bits multiplies X by x^D, which two
 * carry-less products by 32-bit constants (x^(D+64) and x^D mod P) bring back
 * to 128 bits, ready to take the next block by XOR. At the end, the CRC of the
 * accumulator's 16 bytes, which the SSE4.2 crc32 instruction computes, is the
 * CRC of everything folded into it. The register is bit-reflected (the first
 * bit of the stream is the highest power), in which a carry-less product comes
 * out multiplied by x once more: the constants are x^(D+63) and x^(D-1) mod P.
 *
 * With VPCLMULQDQ, eight 16-byte lanes in four 256-bit registers fold 128
 * bytes a step, each lane by 1024 bits, and are folded into one at the end; the
 * copy, when there is one, stores the very registers that were loaded to fold,
 * so the source is read once. Without it, one 128-bit lane folds 16 bytes a
 * step. Without PCLMULQDQ, a byte table. */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Bit-reflected P: x^32 + x^28 + x^27 + ... + 1, the iSCSI polynomial. */
#define POLY_REFLECTED 0x82f63b78u
#define POLY_NORMAL 0x1edc6f41u

uint32_t crc32c_xpow(unsigned n)
{
	uint64_t r = 1;

	while (n--) {
		r <<= 1;
		if (r >> 32)
			r ^= (1ull << 32) | POLY_NORMAL;
	}
	return (uint32_t)r;
}

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_make(void)
{
	for (uint32_t b = 0; b < 256; b++) {
		uint32_t c = b;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (POLY_REFLECTED & -(c & 1u));
		table[b] = c;
	}
}

static uint32_t crc_table(uint32_t crc, unsigned char *dst, const unsigned char *src, size_t n)
{
	pthread_once(&table_once, table_make);
	if (dst)
		memcpy(dst, src, n);
	while (n--)
		crc = (crc >> 8) ^ table[(crc ^ *src++) & 0xff];
	return crc;
}

#if defined(__x86_64__)
/* The folding constants, x^(D+63) and x^(D-1) mod P bit-reflected into a
 * 64-bit lane's upper half (tests/unit/test_crc32c.c derives them again). */
#define K128_HI 0x3743f7bd00000000ull
#define K128_LO 0x3171d43000000000ull
#define K1024_HI 0x6577b24500000000ull
#define K1024_LO 0x7417153f00000000ull

/* Below this, the crc32 instruction alone: folding has a fixed cost. */
#define FOLD_MIN 64u
#define WIDE_MIN 256u

#define SSE_TARGET __attribute__((target("sse4.2,pclmul")))
#define WIDE_TARGET __attribute__((target("sse4.2,pclmul,avx2,vpclmulqdq")))

SSE_TARGET static inline uint32_t crc_words(uint32_t crc, unsigned char *dst,
					     const unsigned char *src, size_t n)
{
	uint64_t c = crc, w;

	for (; n >= 8; n -= 8, src += 8) {
		memcpy(&w, src, 8);
		if (dst) {
			memcpy(dst, &w, 8);
			dst += 8;
		}
		c = _mm_crc32_u64(c, w);
	}
	for (; n; n--, src++) {
		if (dst)
			*dst++ = *src;
		c = _mm_crc32_u8((uint32_t)c, *src);
	}
	return (uint32_t)c;
}

SSE_TARGET static inline __m128i fold128(__m128i x, __m128i k)
{
	return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* Folds the 16-byte blocks left after *done bytes into x, then the CRC of x and
 * of the bytes past the last whole block. */
SSE_TARGET static inline uint32_t fold_finish(__m128i x, unsigned char *dst,
					      const unsigned char *src, size_t n, size_t done)
{
	const __m128i k = _mm_set_epi64x((long long)K128_LO, (long long)K128_HI);
	uint64_t c;

	for (; n - done >= 16; done += 16) {
		__m128i d = _mm_loadu_si128((const __m128i *)(src + done));

		if (dst)
			_mm_storeu_si128((__m128i *)(dst + done), d);
		x = _mm_xor_si128(fold128(x, k), d);
	}
	c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x));
	c = _mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(x, 1));
	return crc_words((uint32_t)c, dst ? dst + done : NULL, src + done, n - done);
}

/* One lane: n >= 16. */
SSE_TARGET static inline uint32_t crc_lane(uint32_t crc, unsigned char *dst,
					   const unsigned char *src, size_t n)
{
	__m128i x = _mm_loadu_si128((const __m128i *)src);

	if (dst)
		_mm_storeu_si128((__m128i *)dst, x);
	return fold_finish(_mm_xor_si128(x, _mm_cvtsi32_si128((int)crc)), dst, src, n, 16);
}

SSE_TARGET static uint32_t crc_pclmul(uint32_t crc, unsigned char *dst, const unsigned char *src,
				      size_t n)
{
	return n < FOLD_MIN ? crc_words(crc, dst, src, n) : crc_lane(crc, dst, src, n);
}

SSE_TARGET static uint32_t crc_pclmul_sum(uint32_t crc, const unsigned char *src, size_t n)
{
	return crc_pclmul(crc, NULL, src, n);
}

WIDE_TARGET static inline __attribute__((always_inline)) __m256i
load_store(unsigned char *dst, const unsigned char *src, size_t at)
{
	__m256i d = _mm256_loadu_si256((const __m256i *)(src + at));

	if (dst)
		_mm256_storeu_si256((__m256i *)(dst + at), d);
	return d;
}

WIDE_TARGET static inline __m256i fold256(__m256i a, __m256i k, __m256i d)
{
	return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00),
						 _mm256_clmulepi64_epi128(a, k, 0x11)),
				d);
}

/* Eight lanes, 128 bytes a step: n >= 128. Inlined twice, with and without a
 * destination, so that the loop carries no test for it. */
WIDE_TARGET static inline __attribute__((always_inline)) uint32_t
crc_wide(uint32_t crc, unsigned char *dst, const unsigned char *src, size_t n)
{
	const __m256i k = _mm256_set_epi64x((long long)K1024_LO, (long long)K1024_HI,
					    (long long)K1024_LO, (long long)K1024_HI);
	const __m128i k1 = _mm_set_epi64x((long long)K128_LO, (long long)K128_HI);
	__m256i a0 = load_store(dst, src, 0), a1 = load_store(dst, src, 32);
	__m256i a2 = load_store(dst, src, 64), a3 = load_store(dst, src, 96);
	__m128i x;
	size_t done;

	a0 = _mm256_xor_si256(a0, _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)crc)));
	for (done = 128; n - done >= 128; done += 128) {
		a0 = fold256(a0, k, load_store(dst, src, done));
		a1 = fold256(a1, k, load_store(dst, src, done + 32));
		a2 = fold256(a2, k, load_store(dst, src, done + 64));
		a3 = fold256(a3, k, load_store(dst, src, done + 96));
	}
	/* The lanes in stream order, each folded past the next. */
	x = _mm_xor_si128(fold128(_mm256_castsi256_si128(a0), k1), _mm256_extracti128_si256(a0, 1));
	x = _mm_xor_si128(fold128(x, k1), _mm256_castsi256_si128(a1));
	x = _mm_xor_si128(fold128(x, k1), _mm256_extracti128_si256(a1, 1));
	x = _mm_xor_si128(fold128(x, k1), _mm256_castsi256_si128(a2));
	x = _mm_xor_si128(fold128(x, k1), _mm256_extracti128_si256(a2, 1));
	x = _mm_xor_si128(fold128(x, k1), _mm256_castsi256_si128(a3));
	x = _mm_xor_si128(fold128(x, k1), _mm256_extracti128_si256(a3, 1));
	return fold_finish(x, dst, src, n, done);
}

WIDE_TARGET static uint32_t crc_vpclmul(uint32_t crc, unsigned char *dst,
					const unsigned char *src, size_t n)
{
	if (n < WIDE_MIN)
		return crc_pclmul(crc, dst, src, n);
	return dst ? crc_wide(crc, dst, src, n) : crc_wide(crc, NULL, src, n);
}

WIDE_TARGET static uint32_t crc_vpclmul_sum(uint32_t crc, const unsigned char *src, size_t n)
{
	return n < WIDE_MIN ? crc_pclmul(crc, NULL, src, n) : crc_wide(crc, NULL, src, n);
}
#endif

static uint32_t crc_table_sum(uint32_t crc, const unsigned char *src, size_t n)
{
	return crc_table(crc, NULL, src, n);
}

typedef uint32_t copy_fn(uint32_t, unsigned char *, const unsigned char *, size_t);
typedef uint32_t sum_fn(uint32_t, const unsigned char *, size_t);

static struct {
	copy_fn *copy;
	sum_fn *sum;
	const char *name;
} impl = {crc_table, crc_table_sum, "table"};

/* Chosen before anything can call in: the choice is then read, never raced. */
__attribute__((constructor)) static void crc32c_choose(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("sse4.2") || !__builtin_cpu_supports("pclmul"))
		return;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq")) {
		impl.copy = crc_vpclmul;
		impl.sum = crc_vpclmul_sum;
		impl.name = "vpclmulqdq";
	} else {
		impl.copy = crc_pclmul;
		impl.sum = crc_pclmul_sum;
		impl.name = "pclmulqdq";
	}
#endif
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t n)
{
	return impl.sum(crc, buf, n);
}

uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n)
{
	return impl.copy(crc, dst, src, n);
}

const char *crc32c_impl(void)
{
	return impl.name;
}
