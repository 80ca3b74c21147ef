/* What every fuzz harness provides: libFuzzer's entry point, and its seeds as code
 * so that the runner generates the corpus instead of keeping binaries in the tree,
 * and the fallback driver can mutate the same seeds. */
#ifndef USMC_TEST_FUZZ_H
#define USMC_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef void fuzz_emit_fn(const void *buf, size_t len);
void fuzz_seeds(fuzz_emit_fn *emit);

/* An invariant broken by the code under test: abort, which both libFuzzer and the
 * driver report as a crash and save the input for. */
_Noreturn static inline void fuzz_fail(const char *expr, const char *file, int line)
{
	fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, expr);
	abort();
}

#define FUZZ_ASSERT(cond) ((cond) ? (void)0 : fuzz_fail(#cond, __FILE__, __LINE__))

#endif
