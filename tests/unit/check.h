/* A minimal unit-test harness. A test case is a void function; a failed CHECK
 * marks the current case failed but lets it go on, so one run shows every broken
 * expectation. Each test program includes this once and ends with
 * `return check_report();`, whose last line the runner sums up. */
#ifndef USMC_TEST_CHECK_H
#define USMC_TEST_CHECK_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

/* Checks inside loops can fail thousands of times for one cause; past this many
 * the rest of a case's failures are only counted. */
#define CHECK_PRINT_MAX 10

static int check_case_failures;
static int check_cases_passed, check_cases_failed;

static inline int check_fail_note(const char *file, int line)
{
	if (++check_case_failures > CHECK_PRINT_MAX)
		return 0;
	printf("    %s:%d: ", file, line);
	return 1;
}

static inline int check_true(int ok, const char *expr, const char *file, int line)
{
	if (!ok && check_fail_note(file, line))
		printf("CHECK(%s) failed\n", expr);
	return ok;
}

/* Values are shown both signed (error codes) and in hex (cursors, flags). */
static inline int check_eq(uint64_t a, uint64_t b, const char *ea, const char *eb,
			   const char *file, int line)
{
	if (a != b && check_fail_note(file, line))
		printf("%s == %s failed: %" PRId64 " (0x%" PRIx64 ") != %" PRId64 " (0x%" PRIx64
		       ")\n", ea, eb, (int64_t)a, a, (int64_t)b, b);
	return a == b;
}

#define CHECK(cond) check_true(!!(cond), #cond, __FILE__, __LINE__)
#define CHECK_EQ(a, b) check_eq((uint64_t)(a), (uint64_t)(b), #a, #b, __FILE__, __LINE__)

static inline void check_run(const char *name, void (*fn)(void))
{
	check_case_failures = 0;
	fn();
	if (check_case_failures) {
		if (check_case_failures > CHECK_PRINT_MAX)
			printf("    ... %d failed checks in all\n", check_case_failures);
		printf("FAIL %s\n", name);
		check_cases_failed++;
	} else {
		printf("ok   %s\n", name);
		check_cases_passed++;
	}
	fflush(stdout);
}

#define RUN(fn) check_run(#fn, fn)

static inline int check_report(void)
{
	printf("%d passed, %d failed\n", check_cases_passed, check_cases_failed);
	return check_cases_failed ? 1 : 0;
}

#endif
