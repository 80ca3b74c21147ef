#include "shortlived.h"

#include <pthread.h>
#include <string.h>

/* Destinations a process connects to are few: one entry per bucket, a new
 * destination taking the place of the one there (which then learns anew). */
#define NDEST 64

struct dest {
	struct addr dst;
	int used;
	uint32_t streak;  /* short connections in a row */
	int held;         /* a hold began, and no long connection ended since */
	uint64_t until;   /* the hold's end */
	uint64_t hold_ns; /* its length */
};

static struct dest table[NDEST];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct dest *bucket(const struct addr *dst)
{
	uint32_t h = 2166136261u;

	for (int i = 0; i < 16; i++)
		h = (h ^ dst->ip[i]) * 16777619u;
	h = (h ^ dst->port) * 16777619u;
	return &table[h % NDEST];
}

int shortlived_hold(const struct addr *dst, uint64_t now)
{
	pthread_mutex_lock(&lock);
	struct dest *d = bucket(dst);
	int hold = d->used && d->held && now < d->until && addr_equal(&d->dst, dst);
	pthread_mutex_unlock(&lock);
	return hold;
}

void shortlived_ended(const struct addr *dst, uint64_t bytes, uint64_t lived_ns, int same_core,
		      uint64_t now)
{
	int is_short = same_core && bytes < SHORT_BYTES && lived_ns < SHORT_LIFE_NS;

	pthread_mutex_lock(&lock);
	struct dest *d = bucket(dst);
	if (!d->used || !addr_equal(&d->dst, dst)) {
		memset(d, 0, sizeof(*d));
		d->dst = *dst;
		d->used = 1;
	}
	if (!is_short) {
		d->streak = 0;
		d->held = 0;
	} else if (d->held) {
		/* Tried again after the hold, and short again: a longer hold.
		 * Connections made before the hold that end during it say
		 * nothing new. */
		if (now >= d->until) {
			d->hold_ns = d->hold_ns * 2 < SHORT_HOLD_MAX_NS ? d->hold_ns * 2
									: SHORT_HOLD_MAX_NS;
			d->until = now + d->hold_ns;
		}
	} else if (++d->streak >= SHORT_STREAK) {
		d->held = 1;
		d->hold_ns = SHORT_HOLD_MIN_NS;
		d->until = now + d->hold_ns;
	}
	pthread_mutex_unlock(&lock);
}

void shortlived_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
}
