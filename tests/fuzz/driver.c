/* Stands in for libFuzzer where clang's fuzzer runtime is missing: runs a harness
 * on its seeds, then on a deterministic stream of mutations of them for a given
 * time, and saves the input that crashed it.
 *
 *   driver --write-seeds DIR        write the harness's seeds as DIR/seed-N
 *   driver -seconds=N ARTIFACT      fuzz for N seconds (FUZZ_SEED varies the stream)
 *   driver FILE...                  run the harness once on each file, to reproduce
 */
#include "fuzz.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#define MAX_LEN 4096
#define SEEDS_MAX 256

static const char *seed_dir;
static int seeds_written;
static struct {
	unsigned char *b;
	size_t n;
} seeds[SEEDS_MAX];
static int nseeds;

static const char *artifact;
static const unsigned char *current;
static size_t current_len;

static int write_file(const char *path, const void *b, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int ok;

	if (fd < 0)
		return -1;
	ok = write(fd, b, n) == (ssize_t)n;
	return close(fd) == 0 && ok ? 0 : -1;
}

static void emit_file(const void *b, size_t n)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/seed-%d", seed_dir, seeds_written++);
	if (write_file(path, b, n) < 0) {
		perror(path);
		exit(1);
	}
}

static void emit_keep(const void *b, size_t n)
{
	if (nseeds == SEEDS_MAX || n > MAX_LEN)
		return;
	seeds[nseeds].b = malloc(n + 1);
	if (!seeds[nseeds].b)
		abort();
	memcpy(seeds[nseeds].b, b, n);
	seeds[nseeds++].n = n;
}

/* Runs on the way down from a sanitizer report or a fatal signal. */
static void save_current(void)
{
	if (artifact && current && write_file(artifact, current, current_len) == 0) {
		static const char msg[] = "driver: crashing input saved\n";

		if (write(2, msg, sizeof(msg) - 1) < 0)
			return;
	}
}

static void on_fatal(int sig)
{
	save_current();
	raise(sig);
}

static void catch_crashes(void)
{
	static const int sigs[] = { SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fatal;
	sa.sa_flags = (int)SA_RESETHAND;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
#if defined(__SANITIZE_ADDRESS__)
	__sanitizer_set_death_callback(save_current);
#endif
}

static void run(const unsigned char *b, size_t n)
{
	/* An exact-size copy, so reading past the input is caught. */
	unsigned char *copy = malloc(n ? n : 1);

	if (!copy)
		abort();
	memcpy(copy, b, n);
	current = copy;
	current_len = n;
	LLVMFuzzerTestOneInput(copy, n);
	current = NULL;
	free(copy);
}

/* Boundary values decoders get wrong; written in 1, 2, 4 or 8 bytes. */
static const uint64_t interesting[] = {
	0, 1, 2, 7, 8, 0x7f, 0x80, 0xff, 0x100, 4095, 4096, 4097, 0x7fff, 0x8000, 0xffff,
	1ull << 20, 64ull << 20, (64ull << 20) + 1, 0x7fffffff, 0x80000000u, 0xffffffffu,
	1ull << 32, (1ull << 32) + 4096, 1ull << 63, UINT64_MAX - 4095, UINT64_MAX,
};

static void mutate(unsigned char *b, size_t *n, unsigned short rs[3])
{
	size_t at = *n ? (size_t)nrand48(rs) % *n : 0;
	int width = 1 << (nrand48(rs) % 4);

	switch (nrand48(rs) % 7) {
	case 0:
		if (*n)
			b[at] ^= (unsigned char)(1u << (nrand48(rs) % 8));
		break;
	case 1:
		if (*n)
			b[at] = (unsigned char)nrand48(rs);
		break;
	case 2: {
		uint64_t v = interesting[nrand48(rs) % (sizeof(interesting) / sizeof(interesting[0]))];

		if (nrand48(rs) % 2)
			v = -v;
		for (int i = 0; i < width && at + i < *n; i++)
			b[at + i] = (unsigned char)(v >> (8 * i));
		break;
	}
	case 3:
		if (*n < MAX_LEN) {
			memmove(b + at + 1, b + at, *n - at);
			b[at] = (unsigned char)nrand48(rs);
			++*n;
		}
		break;
	case 4:
		if (*n) {
			memmove(b + at, b + at + 1, *n - at - 1);
			--*n;
		}
		break;
	case 5:
		*n = at;
		break;
	default:
		while (width-- && *n < MAX_LEN)
			b[(*n)++] = (unsigned char)nrand48(rs);
	}
}

static int fuzz_for(long seconds)
{
	static unsigned char b[MAX_LEN];
	const char *seed_env = getenv("FUZZ_SEED");
	unsigned long seed = seed_env ? strtoul(seed_env, NULL, 0) : 1;
	unsigned short rs[3] = { (unsigned short)seed, (unsigned short)(seed >> 16), 0x5eed };
	struct timespec start, now;
	size_t n = 0;
	unsigned long runs = 0;

	fuzz_seeds(emit_keep);
	for (int i = 0; i < nseeds; i++)
		run(seeds[i].b, seeds[i].n);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		if (runs % 256 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - start.tv_sec >= seconds)
				break;
		}
		/* Mostly mutations of a seed, sometimes of the previous input (to go
		 * deeper), sometimes noise. */
		switch (nrand48(rs) % 8) {
		case 0:
			n = (size_t)nrand48(rs) % 256;
			for (size_t i = 0; i < n; i++)
				b[i] = (unsigned char)nrand48(rs);
			break;
		case 1:
		case 2:
			break;
		default:
			if (nseeds) {
				int s = nrand48(rs) % nseeds;

				memcpy(b, seeds[s].b, seeds[s].n);
				n = seeds[s].n;
			}
		}
		for (int k = 1 + nrand48(rs) % 8; k > 0; k--)
			mutate(b, &n, rs);
		run(b, n);
		runs++;
	}
	printf("driver: %d seeds and %lu mutated inputs in %lds (FUZZ_SEED=%lu), no failure\n",
	       nseeds, runs, seconds, seed);
	return 0;
}

static int replay(char **files, int n)
{
	static unsigned char b[1 << 20];

	for (int i = 0; i < n; i++) {
		int fd = open(files[i], O_RDONLY);
		ssize_t len = fd < 0 ? -1 : read(fd, b, sizeof(b));

		if (len < 0) {
			perror(files[i]);
			return 1;
		}
		close(fd);
		run(b, (size_t)len);
		printf("driver: %s: no failure\n", files[i]);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) {
		seed_dir = argv[2];
		fuzz_seeds(emit_file);
		return 0;
	}
	if (argc == 3 && strncmp(argv[1], "-seconds=", 9) == 0) {
		artifact = argv[2];
		catch_crashes();
		return fuzz_for(strtol(argv[1] + 9, NULL, 10));
	}
	if (argc >= 2 && argv[1][0] != '-')
		return replay(argv + 1, argc - 1);
	fprintf(stderr, "usage: %s --write-seeds DIR | -seconds=N ARTIFACT | FILE...\n", argv[0]);
	return 2;
}
