/* One end in several processes, which a kernel socket gets from its file alone:
 * after fork() the holders share its state, and exec() or a descriptor passed on
 * takes the end along whole. */
#include "conn.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "../dev/dev.h"
#include "conn_int.h"
#include "segment.h"
#include "socktab.h"

/* Marks our lines: our end is going to other processes. */
void mark_handed(struct usock *s)
{
	atomic_fetch_or(&s->tx.sh->prod_flags, RING_F_HANDED);
	atomic_fetch_or(&s->rx.sh->cons_flags, RING_F_HANDED);
}

void conn_atfork_prepare(struct usock *s, int fd)
{
	if (mode_of(s) == MODE_LISTEN) {
		s->forked = 1;
		return;
	}
	conn_settle(s, fd);
	if (conn_accel(s))
		conn_share(s);
}

void conn_atfork_child(struct usock *s)
{
	if (ext_of(s))
		conn_ext->forget(s);
}

int conn_share(struct usock *s)
{
	/* Operations never sleep holding these, so this waits only for those in
	 * progress; the state seeded into the holders' page is then final. */
	pthread_mutex_lock(&s->tx_lock);
	pthread_mutex_lock(&s->rx_lock);
	mark_handed(s);
	if (s->dev->seg_shared)
		s->dev->seg_shared(&s->seg);
	/* And the socket's, under which an epoll wait takes an arm back only
	 * from an end no other process holds (conn_unarm). */
	pthread_mutex_lock(&s->lock);
	if (!s->hold)
		s->hold = holders_new(&s->tx, &s->rx, &s->hold_fd);
	pthread_mutex_unlock(&s->lock);
	if (s->hold)
		holders_add(s->hold);
	pthread_mutex_unlock(&s->rx_lock);
	pthread_mutex_unlock(&s->tx_lock);
	return s->hold ? 0 : -1;
}

void conn_unshare(struct usock *s)
{
	holders_drop(s->hold);
}

/* ------------------------------------------------------------ exec */

static int dup_inheritable(int fd)
{
	return fd < 0 ? -1 : real.fcntl(fd, F_DUPFD, 0);
}

int conn_export(struct usock *s, int fd, struct conn_export *x)
{
	struct stat st;

	if (!conn_attached(s) || !s->seg.hdr || atomic_load(&s->peer_gone) ||
	    fstat(fd, &st) < 0)
		return -1;
	/* The next program starts without the extension's state: what the peer
	 * was given of ours goes now. */
	ext_teardown(s);
	mark_handed(s);
	if (s->dev->seg_shared)
		s->dev->seg_shared(&s->seg);
	op_lock(s, HOLD_TX);
	op_lock(s, HOLD_RX);
	*x = (struct conn_export){
		.fd = fd, .inode = (uint64_t)st.st_ino, .family = s->family, .server = s->server,
		.nonblock = s->nonblock,
		.shut_rd = s->shut_rd, .shut_wr = s->shut_wr, .abortive = s->abortive,
		.arena_fd = dup_inheritable(s->seg.arena->fd), .bell = dup_inheritable(s->bell),
		.dev = (int)s->dev->kind, .arena_id = s->seg.arena->id,
		.hold_fd = s->hold ? dup_inheritable(s->hold_fd) : -1,
		.arena_size = s->seg.arena->size, .seg_off = s->seg.off, .seg_size = s->seg.size,
		.ring_size = {s->seg.ring_size[0], s->seg.ring_size[1]},
		.tx_pos = s->tx.pos, .tx_peer = s->tx.peer, .tx_cap = s->tx.limit,
		.rx_pos = s->rx.pos, .rx_peer = s->rx.peer, .rx_urg = s->rx.urg,
		.tx_rung = s->tx.last_rung, .rx_rung = s->rx.last_rung,
		.rx_urg_read = s->rx.urg_read, .oobinline = s->oobinline,
		.rcvtimeo = s->rcvtimeo, .sndtimeo = s->sndtimeo,
		.sndbuf = s->sndbuf, .rcvbuf = s->rcvbuf, .sndbuf_eff = s->sndbuf_eff,
		.rcvbuf_eff = s->rcvbuf_eff, .rcvlowat = s->rcvlowat, .notsent_lowat = s->notsent_lowat,
	};
	op_unlock(s, HOLD_RX);
	op_unlock(s, HOLD_TX);
	if (s->dev->ctl_export)
		s->dev->ctl_export(s->seg.arena->ctl, x->link);
	if ((s->seg.arena->fd >= 0 && x->arena_fd < 0) || x->bell < 0 || (s->hold && x->hold_fd < 0)) {
		conn_export_close(x);
		return -1;
	}
	return 0;
}

void conn_export_close(struct conn_export *x)
{
	int *fds[] = {&x->arena_fd, &x->bell, &x->hold_fd};

	for (unsigned i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			real.close(*fds[i]);
		*fds[i] = -1;
	}
}

struct usock *conn_import(const struct conn_export *in)
{
	struct conn_export x = *in;
	struct usock *s = NULL;
	struct arena *a = NULL;

	const struct dev_ops *dev = dev_of_kind(x.dev);

	if (!dev || !conn_export_valid(&x) || x.bell < 0)
		goto fail;
	a = lgr_arena_adopt(dev, x.arena_fd, x.arena_id, x.arena_size, x.link);
	x.arena_fd = -1;
	if (!a || !(s = usock_new(x.family, x.nonblock)))
		goto fail;
	s->server = x.server;
	s->seg = (struct seg_loc){NULL, a, x.seg_off, x.seg_size, {x.ring_size[0], x.ring_size[1]},
				  (struct seg_hdr *)(a->base + x.seg_off), SEG_BELL_UNKNOWN, 0};
	a = NULL;
	rings_setup(s);
	s->tx.pos = x.tx_pos;
	s->tx.peer = x.tx_peer;
	ring_limit(&s->tx, x.tx_cap);
	s->tx.last_rung = x.tx_rung;
	s->rx.pos = x.rx_pos;
	s->rx.peer = x.rx_peer;
	s->rx.last_rung = x.rx_rung;
	s->rx.urg = x.rx_urg;
	s->rx.urg_read = x.rx_urg_read;
	s->oobinline = x.oobinline;
	if (x.hold_fd >= 0) {
		if (!(s->hold = holders_adopt(x.hold_fd)))
			goto fail;
		s->hold_fd = sys_fd_high(x.hold_fd);
		x.hold_fd = -1;
	}
	bell_take(s, sys_fd_high(x.bell));
	x.bell = -1;
	s->connected = 1;
	s->shut_rd = x.shut_rd;
	s->shut_wr = x.shut_wr;
	s->abortive = x.abortive;
	s->rcvtimeo = x.rcvtimeo;
	s->sndtimeo = x.sndtimeo;
	s->sndbuf = x.sndbuf;
	s->rcvbuf = x.rcvbuf;
	s->sndbuf_eff = x.sndbuf_eff;
	s->rcvbuf_eff = x.rcvbuf_eff;
	s->rcvlowat = x.rcvlowat;
	s->notsent_lowat = x.notsent_lowat;
	atomic_store(&s->mode, MODE_SHM);
	socktab_note(x.fd, s);
	return s;
fail:
	conn_export_close(&x);
	if (s) {
		if (s->hold) {
			holders_unmap(s->hold);
			real.close(s->hold_fd);
		}
		conn_bell_release(s);
		bell_close(&s->bell);
		if (s->seg.arena)
			lgr_seg_forget(&s->seg);
		usock_put(s);
	}
	return NULL;
}
