/* link: src/core/export.c */
/* conn_export_valid on arbitrary records: what a socket passed with SCM_RIGHTS
 * brings from another process, and what exec() leaves in USMC_HANDOVER. Besides
 * memory safety: an accepted record places both rings inside the segment and the
 * segment inside its arena without overflow, its cursors leave the bytes in
 * flight within each ring, and its timeouts turn into nanoseconds without
 * overflow; a record's descriptor indexes claim each appended descriptor at most
 * once. Each rule is restated here independently of export.c. */
#include "export.h"
#include "fuzz.h"
#include "segment.h"

#include <string.h>
#include <sys/socket.h>

#include "clc.h"

static int pow2(uint64_t v)
{
	return v && __builtin_popcountll(v) == 1;
}

/* The descriptor indexes of a passed record, with the message's shape taken from
 * the two bytes after it and the earlier records' claims from the third. */
static void check_claim(const struct conn_export *x, const uint8_t *shape)
{
	enum { MAX = 65 };
	unsigned char taken[MAX], before[MAX];
	int first = shape[0] % MAX, last = first + shape[1] % (MAX - first + 1);
	const int f[] = {x->arena_fd, x->bell, x->hold_fd};

	for (int i = 0; i < MAX; i++)
		taken[i] = (unsigned char)((shape[2] >> (i % 8)) & 1);
	memcpy(before, taken, sizeof(taken));
	if (!conn_export_claim(x, first, last, taken)) {
		FUZZ_ASSERT(!memcmp(before, taken, sizeof(taken)));
		return;
	}
	FUZZ_ASSERT(x->fd >= 0 && x->fd < first);
	int newly = 0;
	for (int i = 0; i < (int)(sizeof(f) / sizeof(f[0])); i++) {
		if (f[i] == -1)
			continue;
		FUZZ_ASSERT(f[i] >= first && f[i] < last && !before[f[i] - first] && taken[f[i] - first]);
		for (int j = 0; j < i; j++)
			FUZZ_ASSERT(f[j] != f[i]);
		newly++;
	}
	for (int i = 0; i < MAX; i++)
		newly -= taken[i] != before[i];
	FUZZ_ASSERT(newly == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conn_export x;

	if (size < sizeof(x))
		return 0;
	memcpy(&x, data, sizeof(x));
	if (size >= sizeof(x) + 3)
		check_claim(&x, data + sizeof(x));
	if (!conn_export_valid(&x))
		return 0;
	FUZZ_ASSERT(x.family == AF_INET || x.family == AF_INET6);
	FUZZ_ASSERT((x.server | x.nonblock | x.shut_rd | x.shut_wr | x.abortive) <= 1 &&
		    x.server >= 0 && x.nonblock >= 0 && x.shut_rd >= 0 && x.shut_wr >= 0 &&
		    x.abortive >= 0);
	for (int i = 0; i < 2; i++)
		FUZZ_ASSERT(pow2(x.ring_size[i]) && x.ring_size[i] >= CLC_RING_MIN &&
			    x.ring_size[i] <= CLC_RING_MAX);
	/* Header page, ring 0, ring 1, all inside the segment, inside the arena. */
	FUZZ_ASSERT(x.seg_off % 4096 == 0);
	unsigned __int128 end = (unsigned __int128)x.seg_off + x.seg_size;
	FUZZ_ASSERT(end <= x.arena_size);
	FUZZ_ASSERT((unsigned __int128)SEG_HDR_SIZE + x.ring_size[0] + x.ring_size[1] <= x.seg_size);
	uint64_t tx = x.ring_size[x.server], rx = x.ring_size[!x.server];
	/* Bytes written and not yet consumed, and bytes readable: at most a ring each. */
	FUZZ_ASSERT(x.tx_pos - x.tx_peer <= tx && x.tx_peer <= x.tx_pos);
	FUZZ_ASSERT(x.rx_peer - x.rx_pos <= rx && x.rx_pos <= x.rx_peer);
	FUZZ_ASSERT(x.tx_cap >= 1 && x.tx_cap <= tx);
	const struct timeval *t[] = {&x.rcvtimeo, &x.sndtimeo};
	for (int i = 0; i < 2; i++) {
		FUZZ_ASSERT(t[i]->tv_usec >= 0 && t[i]->tv_usec < 1000000);
		/* What a deadline is computed from: usec * 1000 cannot overflow. */
		FUZZ_ASSERT((uint64_t)t[i]->tv_usec * 1000u < 1000000000u);
	}
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	struct conn_export x = {
		.fd = 5, .family = AF_INET, .arena_fd = 6, .bell = 7, .hold_fd = -1,
		.arena_size = 1u << 20, .seg_off = 0, .seg_size = 4096 + 2 * 65536,
		.ring_size = {65536, 65536}, .tx_pos = 100, .tx_peer = 40, .tx_cap = 65536,
		.rx_pos = 7, .rx_peer = 90, .rcvtimeo = {1, 500000},
	};

	emit(&x, sizeof(x));
	/* A record passed with two sockets of the application's: indexes 5..7 appended. */
	struct {
		struct conn_export x;
		uint8_t shape[3];
	} passed = {x, {5, 5, 0}};
	passed.x.fd = 1;
	passed.x.arena_fd = 5;
	passed.x.bell = 6;
	emit(&passed, sizeof(passed));
	x.server = 1;
	x.family = AF_INET6;
	x.ring_size[1] = 1u << 20;
	x.arena_size = 8u << 20;
	x.seg_off = 4096 * 3;
	x.seg_size = 4096 + 65536 + (1u << 20);
	emit(&x, sizeof(x));
	x.tx_pos = x.tx_peer = UINT64_MAX - 10;
	x.sndtimeo.tv_usec = 999999;
	emit(&x, sizeof(x));
}
