/* What every benchmark program needs to time a run and read its arguments. */
#ifndef BENCH_MEASURE_H
#define BENCH_MEASURE_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A positive number from the command line, or exit with the usage line. */
static inline double parse_positive(const char *arg, const char *usage)
{
    char *end;
    double v = strtod(arg, &end);
    if (*arg == '\0' || *end != '\0' || !(v > 0)) {
        fprintf(stderr, "usage: %s\n", usage);
        exit(2);
    }
    return v;
}

#endif
