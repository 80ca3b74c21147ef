#include "export.h"

#include <sys/socket.h>

#include "../dev/dev.h"
#include "clc.h"
#include "segment.h"

static int ring_size_ok(uint64_t v)
{
	return v >= CLC_RING_MIN && v <= CLC_RING_MAX && !(v & (v - 1));
}

/* Our own cursors as the last program left them: whatever the peer did since is
 * checked by the ring as usual. The producer is ahead of what the peer consumed
 * by at most the ring; the consumer is behind what the peer produced. */
static int cursors_hold(uint64_t pos, uint64_t peer, uint64_t size, int producer)
{
	return producer ? peer <= pos && pos - peer <= size : pos <= peer && peer - pos <= size;
}

static int flag(int v)
{
	return v == 0 || v == 1;
}

/* As setsockopt() takes SO_RCVTIMEO and SO_SNDTIMEO: microseconds below a second
 * (it refuses others with EDOM; a negative second count it takes, as no wait). */
static int timeout_ok(const struct timeval *tv)
{
	return tv->tv_usec >= 0 && tv->tv_usec < 1000000;
}

int conn_export_claim(const struct conn_export *x, int first, int last, unsigned char *taken)
{
	const int f[] = {x->arena_fd, x->bell, x->hold_fd};
	const unsigned n = sizeof(f) / sizeof(f[0]);

	if (x->fd < 0 || x->fd >= first)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		if (f[i] == -1)
			continue;
		if (f[i] < first || f[i] >= last || taken[f[i] - first])
			return 0;
		for (unsigned j = 0; j < i; j++)
			if (f[j] == f[i])
				return 0;
	}
	for (unsigned i = 0; i < n; i++)
		if (f[i] != -1)
			taken[f[i] - first] = 1;
	return 1;
}

int conn_export_valid(const struct conn_export *x)
{
	if ((x->family != AF_INET && x->family != AF_INET6) || x->dev < 0 || x->dev >= DEV_KINDS ||
	    !flag(x->server) ||
	    !flag(x->nonblock) || !flag(x->shut_rd) || !flag(x->shut_wr) || !flag(x->abortive) ||
	    !flag(x->rx_urg_read) || !flag(x->oobinline) || x->sndbuf_eff < 0 || x->rcvbuf_eff < 0 ||
	    x->rcvlowat < 0 || x->notsent_lowat < 0)
		return 0;
	if (!ring_size_ok(x->ring_size[0]) || !ring_size_ok(x->ring_size[1]) ||
	    x->seg_size < seg_bytes(x->ring_size) || x->seg_off > x->arena_size ||
	    x->seg_size > x->arena_size - x->seg_off || (x->seg_off & (SEG_HDR_SIZE - 1)))
		return 0;
	/* The server writes ring 1 and reads ring 0 (segment.h). */
	uint64_t tx = x->ring_size[x->server], rx = x->ring_size[!x->server];
	return cursors_hold(x->tx_pos, x->tx_peer, tx, 1) &&
	       cursors_hold(x->rx_pos, x->rx_peer, rx, 0) && x->rx_urg <= x->rx_peer &&
	       x->tx_cap && x->tx_cap <= tx &&
	       timeout_ok(&x->rcvtimeo) && timeout_ok(&x->sndtimeo);
}
