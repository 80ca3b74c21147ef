#include "holders.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys.h"

#define HOLDERS_MAGIC 0x444c4f48u /* "HOLD" */

struct end_state {
	pthread_mutex_t lock;   /* process-shared and robust: a holder may die in it */
	uint64_t pos, peer;
	uint32_t last_rung;
	uint64_t urg;
	int urg_read;
	/* A send buffer is the socket's, not one holder's; and cap, which
	 * ring_room() trusts to be no less than what is outstanding, must move
	 * with the cursors another holder advanced. */
	uint64_t limit, cap;
};

struct holders {
	uint32_t magic;
	_Atomic unsigned count;
	struct end_state end[2];
};

static int lock_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int e = pthread_mutexattr_init(&a);

	if (!e)
		e = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	if (!e)
		e = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (!e)
		e = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return e;
}

static void save(struct end_state *s, const struct ring_end *e)
{
	s->pos = e->pos;
	s->peer = e->peer;
	s->last_rung = e->last_rung;
	s->urg = e->urg;
	s->urg_read = e->urg_read;
	s->limit = e->limit;
	s->cap = e->cap;
}

static struct holders *map_page(int fd)
{
	struct holders *h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	return h == MAP_FAILED ? NULL : h;
}

struct holders *holders_new(const struct ring_end *tx, const struct ring_end *rx, int *fd)
{
	struct holders *h = NULL;

	*fd = memfd_create("usmc-holders", MFD_CLOEXEC);
	if (*fd >= 0 && ftruncate(*fd, sizeof(*h)) == 0)
		h = map_page(*fd);
	if (!h || lock_init(&h->end[HOLD_TX].lock) || lock_init(&h->end[HOLD_RX].lock)) {
		if (h)
			munmap(h, sizeof(*h));
		if (*fd >= 0)
			real.close(*fd);
		return NULL;
	}
	*fd = sys_fd_high(*fd);
	h->magic = HOLDERS_MAGIC;
	atomic_init(&h->count, 1);
	save(&h->end[HOLD_TX], tx);
	save(&h->end[HOLD_RX], rx);
	return h;
}

void holders_add(struct holders *h)
{
	atomic_fetch_add(&h->count, 1);
}

unsigned holders_drop(struct holders *h)
{
	return atomic_fetch_sub(&h->count, 1) - 1;
}

struct holders *holders_adopt(int fd)
{
	struct stat st;
	struct holders *h = NULL;

	if (fstat(fd, &st) == 0 && st.st_size == (off_t)sizeof(*h))
		h = map_page(fd);
	if (h && h->magic != HOLDERS_MAGIC) {
		munmap(h, sizeof(*h));
		h = NULL;
	}
	return h;
}

void holders_unmap(struct holders *h)
{
	munmap(h, sizeof(*h));
}

/* An unsigned distance below this is a cursor ahead of another, not behind it. */
#define AHEAD (1ull << 62)

/* A holder died in the middle of an operation, after publishing its cursor
 * perhaps but before saving it in s. Our own line of the ring holds what the
 * peer was told: continue from there when it is ahead of s and plausible
 * against the peer's cursor as it stands now. That is the one to measure from
 * too: one operation may have gone round the ring several times while the
 * peer kept up (the state is saved at each wait, not at each lap), so what s
 * knew of the peer may lie more than a ring behind. */
static void recover(struct end_state *s, enum hold_dir d, const struct ring_end *e)
{
	uint64_t skip = d == HOLD_TX ? atomic_load(&e->sh->prod_skip) : 0;

	if (d == HOLD_TX) {
		uint64_t pub = atomic_load(&e->sh->prod), cons = atomic_load(&e->sh->cons);
		/* A producer that rewound on the way had found the consumer at its
		 * mark, which counts as standing at the ring's start. */
		if (cons == skip && skip < pub)
			cons = ring_round_up(cons, e->size);
		if (pub - s->pos < AHEAD && pub - cons <= e->size && cons - s->peer < AHEAD) {
			s->pos = pub;
			s->peer = cons;
		}
		/* A rewind it announced but published nothing behind did not
		 * happen: we go on from where it stood. */
		if (skip >= s->pos)
			atomic_store(&e->sh->prod_skip, 0);
	} else {
		/* The producer is at most a ring ahead of the consumer, and a lap
		 * more while the consumer stands at its rewind's mark. */
		uint64_t pub = atomic_load(&e->sh->cons), prod = atomic_load(&e->sh->prod);
		if (pub - s->pos < AHEAD && prod - pub <= 2 * e->size)
			s->pos = pub;
	}
	/* What it produced on a newer look at the consumer than ours may leave
	 * more outstanding than cap: no room until we look again. */
	if (s->pos - s->peer > s->cap)
		s->cap = s->pos - s->peer;
}

void holders_lock(struct holders *h, enum hold_dir d, struct ring_end *e)
{
	struct end_state *s = &h->end[d];

	if (pthread_mutex_lock(&s->lock) == EOWNERDEAD) {
		recover(s, d, e);
		pthread_mutex_consistent(&s->lock);
	}
	e->pos = s->pos;
	e->peer = s->peer;
	e->last_rung = s->last_rung;
	e->urg = s->urg;
	e->urg_read = s->urg_read;
	e->limit = s->limit;
	e->cap = s->cap;
}

void holders_peek(struct holders *h, enum hold_dir d, struct ring_end *e)
{
	holders_lock(h, d, e);
	pthread_mutex_unlock(&h->end[d].lock);
}

void holders_unlock(struct holders *h, enum hold_dir d, const struct ring_end *e)
{
	save(&h->end[d], e);
	pthread_mutex_unlock(&h->end[d].lock);
}
