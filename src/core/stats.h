/* Per-process counters in a small file under <rundir>/stats/, mapped shared so
 * that `usmc stats` can sum them while the process runs and after it exits, and
 * so that a forked child keeps adding to the same totals. */
#ifndef USMC_STATS_H
#define USMC_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "decline.h"

enum stat_id {
	STAT_CONN_ACCEL,
	STAT_CONN_FALLBACK,
	STAT_CONN_ABORT,       /* accelerated connections aborted on corrupt shared state */
	STAT_HANDSHAKE_ERR,    /* malformed or unusable control messages */
	STAT_BYTES_SENT,
	STAT_BYTES_RECV,
	STAT_SEND_CALLS,
	STAT_RECV_CALLS,
	STAT_RING_FULL,        /* a writer found the peer's ring full */
	STAT_DOORBELLS,        /* doorbells rung */
	STAT_FALLBACK_REASON,  /* DECL_MAX counters follow */
	STAT_MAX = STAT_FALLBACK_REASON + DECL_MAX
};

#define STATS_MAGIC 0x5354534355534d43ull
#define STATS_VERSION 1u

struct stats_file {
	uint64_t magic;
	uint32_t version;
	uint32_t nstats;
	_Atomic uint64_t v[STAT_MAX];
};

const char *stat_name(enum stat_id id);

/* Adds to this process's counters; maps the file on first use. Never fails
 * visibly: without a runtime directory the counts are kept in memory only. */
void stat_add(enum stat_id id, uint64_t n);
void stat_fallback(enum decline reason);

#endif
