/* Verification data: each 8-byte word of a namespace a function of a seed and
 * of the word's byte offset, so that whoever reads any block back, by whatever
 * path (usmc nvme perf, a kernel host's block device, the target's backing
 * file), can tell what it should hold. */
#ifndef USMC_NVME_PATTERN_H
#define USMC_NVME_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t pattern_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Fills b (len bytes, those at byte off of the namespace). */
static inline void pattern_fill(uint64_t seed, uint64_t off, uint8_t *b, size_t len)
{
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint64_t w = pattern_mix(seed ^ (off + i));

		memcpy(b + i, &w, 8);
	}
}

/* The first byte of b that differs from the data, or -1. */
static inline long pattern_check(uint64_t seed, uint64_t off, const uint8_t *b, size_t len)
{
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint64_t w = pattern_mix(seed ^ (off + i));

		if (memcmp(b + i, &w, 8))
			return (long)i;
	}
	return -1;
}

#endif
