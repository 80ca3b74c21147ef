/* CRC32C on one core: ISA-L's crc32_iscsi, usmc's own (src/util/crc32c.c), usmc's
 * copy that sums in the same pass, and plain memcpy for the copy's ceiling; in
 * GB/s over buffers of a given size, each run over the same two buffers (hot in
 * the caches up to their size).
 *
 *   crc isal|own|fused|memcpy SIZE SECONDS     prints GB/s (10^9 bytes a second) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef USMC_ISAL
#include <isa-l/crc.h>
#endif

#include "../src/util/crc32c.h"
#include "measure.h"

static const char usage[] = "crc isal|own|fused|memcpy SIZE SECONDS";

int main(int argc, char **argv)
{
	size_t n;
	double secs, t0, t;
	unsigned char *a, *b;
	volatile uint32_t sink = 0;
	uint64_t bytes = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: %s\n", usage);
		return 2;
	}
	n = (size_t)parse_positive(argv[2], usage);
	secs = parse_positive(argv[3], usage);
	a = aligned_alloc(64, (n + 63) & ~(size_t)63);
	b = aligned_alloc(64, (n + 63) & ~(size_t)63);
	if (!a || !b)
		return 1;
	for (size_t i = 0; i < n; i++)
		a[i] = (unsigned char)(i * 7);
	memset(b, 1, n);
	t0 = now_seconds();
	do {
		for (int k = 0; k < 64; k++) {
			if (!strcmp(argv[1], "own")) {
				sink += crc32c(CRC32C_INIT, a, n);
			} else if (!strcmp(argv[1], "fused")) {
				sink += crc32c_copy(CRC32C_INIT, b, a, n);
			} else if (!strcmp(argv[1], "memcpy")) {
				memcpy(b, a, n);
				sink += b[k % n];
#ifdef USMC_ISAL
			} else if (!strcmp(argv[1], "isal")) {
				sink += crc32_iscsi(a, (int)n, CRC32C_INIT);
#endif
			} else {
				fprintf(stderr, "crc: %s is not in this build\n", argv[1]);
				return 2;
			}
			bytes += n;
		}
		t = now_seconds() - t0;
	} while (t < secs);
	printf("%.2f\n", (double)bytes / t / 1e9);
	if (!strcmp(argv[1], "fused") || !strcmp(argv[1], "own"))
		printf("usmc's kernel: %s\n", crc32c_impl());
	return 0;
}
