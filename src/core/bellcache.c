#include "bellcache.h"

#include <stdlib.h>

#include "hooks.h"
#include "sys.h"

void bell_close(int *fd)
{
	if (*fd < 0)
		return;
	epoll_bell_gone(*fd);
	real.close(*fd);
	*fd = -1;
}

static uint32_t slot_of(const struct bellcache *c, uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (c->cap - 1);
}

/* The slot holding key, or the empty one where it would go. */
static struct bell_slot *find(const struct bellcache *c, uint64_t key)
{
	for (uint32_t i = slot_of(c, key);; i = (i + 1) & (c->cap - 1))
		if (!c->tab[i].used || c->tab[i].key == key)
			return &c->tab[i];
}

static int grow(struct bellcache *c)
{
	struct bellcache n = {calloc(c->cap ? c->cap * 2 : 64, sizeof(struct bell_slot)),
			      c->cap ? c->cap * 2 : 64, c->n};

	if (!n.tab)
		return -1;
	for (uint32_t i = 0; i < c->cap; i++)
		if (c->tab[i].used)
			*find(&n, c->tab[i].key) = c->tab[i];
	free(c->tab);
	*c = n;
	return 0;
}

/* Empties slot s, moving later entries of its probe run back so that no lookup
 * stops short at the hole. */
static void remove_at(struct bellcache *c, struct bell_slot *s)
{
	uint32_t hole = (uint32_t)(s - c->tab);

	c->n--;
	for (uint32_t i = (hole + 1) & (c->cap - 1); c->tab[i].used; i = (i + 1) & (c->cap - 1)) {
		uint32_t home = slot_of(c, c->tab[i].key);
		/* Movable when its home lies cyclically outside (hole, i]. */
		if (((i - home) & (c->cap - 1)) >= ((i - hole) & (c->cap - 1))) {
			c->tab[hole] = c->tab[i];
			hole = i;
		}
	}
	c->tab[hole].used = 0;
}

int bellcache_put(struct bellcache *c, uint64_t key, int fd, uint32_t unread)
{
	if ((c->n + 1) * 2 > c->cap && grow(c) < 0)
		return -1;
	struct bell_slot *s = find(c, key);
	if (s->used)
		bell_close(&s->fd);
	else
		c->n++;
	s->used = 1;
	s->key = key;
	s->fd = fd;
	s->unread = unread;
	return 0;
}

int bellcache_take(struct bellcache *c, uint64_t key, uint32_t *unread)
{
	if (!c->cap)
		return -1;
	struct bell_slot *s = find(c, key);
	if (!s->used)
		return -1;
	int fd = s->fd;
	if (unread)
		*unread = s->unread;
	remove_at(c, s);
	return fd;
}

void bellcache_drop(struct bellcache *c, uint64_t key)
{
	int fd = bellcache_take(c, key, NULL);

	bell_close(&fd);
}

void bellcache_clear(struct bellcache *c)
{
	for (uint32_t i = 0; i < c->cap; i++)
		if (c->tab[i].used)
			bell_close(&c->tab[i].fd);
	free(c->tab);
	*c = (struct bellcache){NULL, 0, 0};
}
