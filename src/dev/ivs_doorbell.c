/* Interrupts across kernels, where an ivshmem server hands them out
 * (USMC_DEVICE=ivshmem:unix:SOCKET, `usmc region serve`, ivs_proto.h): a host
 * process joins the server as QEMU's ivshmem-doorbell device does, maps the
 * region from the descriptor it is sent, publishes its peer ID in its slot, and
 * keeps every other peer's vector eventfds.
 *
 * Ringing: after queuing a ring on a channel (ivs_bells.c), or opening,
 * writing to or closing one, the peer's vector 0 is written, when the peer's
 * slot names an ID the server announced; a slot without one, or naming one the
 * server never did (the region is anyone's to write), is left to poll. A ring
 * goes only where a queue was empty before: a peer with rings waiting was rung
 * already, and interrupts cost.
 *
 * Receiving: our own vector 0 joins every sleep with the poller's timer
 * (poller.c), which then fires only for our lease while every live peer can
 * ring us; the server's socket too, for the peers it announces later.
 *
 * In a guest whose ivshmem-doorbell device is bound to vfio-pci (ivs_vfio.c),
 * the same with the device's registers: our ID is its IVPosition, a ring is a
 * write of (peer << 16 | 0) to its doorbell register, and its MSI-X vector 0
 * signals an eventfd of ours. The guest cannot know which IDs the server
 * announced: an ID in range is rung, and QEMU drops a ring to one it does not
 * know.
 *
 * A forked child shares its parent's slot and so its peer ID: it rings with
 * the descriptors it inherited, but leaves our vector and the socket to the
 * parent, and polls at the usual rate. */
#include "ivs.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "../core/stats.h"
#include "../core/sys.h"
#include "ivs_proto.h"

/* How long the server may take to say who we are. */
#define HELLO_MS 2000

static struct {
	pthread_mutex_t lock;        /* the peer table: ringing takes no ivs.lock */
	int sock;                    /* to the server, -1 when none (or gone) */
	int hears;                   /* our vector is ours to read (not a forked child's) */
	_Atomic int on;              /* joined a server: rings may go (read without the lock) */
	struct ivsp_client cl;
	/* In a guest: the device's vector 0 and our ID (-1 on the host). */
	int guest_irq;
	int64_t guest_self;
} db = {.lock = PTHREAD_MUTEX_INITIALIZER, .sock = -1, .guest_irq = -1, .guest_self = -1};

/* Our own vector 0, or -1. Under db.lock. */
static int own_fd(void)
{
	if (db.guest_self >= 0)
		return db.guest_irq;
	const struct ivsp_peer *p = ivsp_client_peer(&db.cl, db.cl.self);
	return p && p->nfd ? p->fd[0] : -1;
}

void ivs_doorbell_guest(int64_t self, int irq)
{
	pthread_mutex_lock(&db.lock);
	db.guest_self = self;
	db.guest_irq = irq;
	db.hears = irq >= 0;
	atomic_store(&db.on, 1);
	pthread_mutex_unlock(&db.lock);
}

/* Takes what the server sent. Returns -1 once it broke the protocol or left:
 * the peers we know keep their descriptors, and we ring them still. Under
 * db.lock. */
static int hear_server(void)
{
	int64_t v;
	int fd, e;
	const char *why;

	while ((e = ivsp_recv(db.sock, &v, &fd)) == 1)
		if (ivsp_client_take(&db.cl, v, fd, &why) < 0) {
			fprintf(stderr, "usmc: ivshmem: the doorbell server sent %s: no more "
					"peers will be heard of\n",
				why);
			e = -EPROTO;
			break;
		}
	if (e == -EAGAIN)
		return 0;
	/* Out of our sleeps first: a forked child's copy would keep it there,
	 * readable for good. */
	poller_forget(db.sock);
	real.close(db.sock);
	db.sock = -1;
	return -1;
}

int ivs_doorbell_connect(const char *path, char *why, size_t len)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};

	if (strlen(path) >= sizeof(a.sun_path)) {
		snprintf(why, len, "%s: the socket's path is too long", path);
		return -1;
	}
	strcpy(a.sun_path, path);
	pthread_mutex_lock(&db.lock);
	ivsp_client_init(&db.cl);
	db.sock = real.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (db.sock < 0 || real.connect(db.sock, (struct sockaddr *)&a, sizeof(a)) < 0) {
		snprintf(why, len, "%s: %s (is `usmc region serve` running?)", path,
			 strerror(errno));
		goto fail;
	}
	db.sock = sys_fd_high(db.sock);
	/* Until it told us our own vector: the peers before us come first. */
	for (uint64_t end = sys_now_ns() + HELLO_MS * 1000000ull; own_fd() < 0;) {
		struct pollfd pf = {db.sock, POLLIN, 0};
		uint64_t now = sys_now_ns();
		if (now >= end || real.poll(&pf, 1, (int)((end - now) / 1000000) + 1) == 0) {
			snprintf(why, len, "%s: the server did not say who we are within %d ms",
				 path, HELLO_MS);
			goto fail;
		}
		if (hear_server() < 0) {
			snprintf(why, len, "%s: the server broke the protocol or hung up", path);
			goto fail;
		}
	}
	int memory = db.cl.memory;
	db.cl.memory = -1;
	db.hears = 1;
	atomic_store(&db.on, 1);
	pthread_mutex_unlock(&db.lock);
	return memory;
fail:
	if (db.sock >= 0)
		real.close(db.sock);
	db.sock = -1;
	ivsp_client_clear(&db.cl);
	pthread_mutex_unlock(&db.lock);
	return -1;
}

void ivs_doorbell_publish(void)
{
	if (!ivs.key)
		return;
	pthread_mutex_lock(&db.lock);
	int64_t self = db.guest_self >= 0 ? db.guest_self : db.cl.self;
	uint32_t v = own_fd() >= 0 ? (uint32_t)self + 1 : 0;
	pthread_mutex_unlock(&db.lock);
	atomic_store(&slot_at(&ivs.r, slot_of_key(ivs.key))->doorbell, v);
}

/* The peer ID slot idx says it has, or -1 for none (or out of range). */
static int64_t id_of(uint32_t idx)
{
	uint32_t d = atomic_load_explicit(&slot_at(&ivs.r, idx)->doorbell, memory_order_relaxed);

	return d && d - 1 <= IVSP_ID_MAX ? (int64_t)d - 1 : -1;
}

/* The vector 0 of the slot key names, when its peer ID is one the server
 * announced, else -1. Under db.lock. */
static int vector_of(uint64_t key)
{
	if (!ivs.attached || !slot_key_valid(&ivs.r, key))
		return -1;
	const struct ivsp_peer *p = ivsp_client_peer(&db.cl, id_of(slot_of_key(key)));
	return p && p->nfd ? p->fd[0] : -1;
}

void ivs_doorbell_ring(uint64_t key)
{
	uint64_t one = 1;

	if (!atomic_load_explicit(&db.on, memory_order_relaxed))
		return;
	pthread_mutex_lock(&db.lock);
	if (db.guest_self >= 0) {
		int64_t id = ivs.attached && slot_key_valid(&ivs.r, key) ? id_of(slot_of_key(key)) : -1;
		if (id >= 0) {
			ivs_vfio_ring((uint32_t)id);
			stat_add(STAT_IVS_IRQ_SENT, 1);
		}
	} else {
		int fd = vector_of(key);
		if (fd >= 0 && real.write(fd, &one, sizeof(one)) == (ssize_t)sizeof(one))
			stat_add(STAT_IVS_IRQ_SENT, 1);
	}
	pthread_mutex_unlock(&db.lock);
}

int ivs_doorbell_fds(int fds[2])
{
	pthread_mutex_lock(&db.lock);
	fds[0] = db.hears ? own_fd() : -1;
	fds[1] = db.hears ? db.sock : -1;
	pthread_mutex_unlock(&db.lock);
	return fds[0] >= 0;
}

int ivs_doorbell_heard(void)
{
	uint64_t n = 0;
	int rung = 0;

	pthread_mutex_lock(&db.lock);
	int fd = db.hears ? own_fd() : -1;
	if (fd >= 0 && real.read(fd, &n, sizeof(n)) == (ssize_t)sizeof(n)) {
		stat_add(STAT_IVS_IRQ_RECV, 1);
		rung = 1;
	}
	/* A peer that left may leave connections to end: a look now. */
	int before = db.cl.npeers;
	if (db.hears && db.sock >= 0)
		hear_server();
	rung |= db.cl.npeers < before;
	pthread_mutex_unlock(&db.lock);
	return rung;
}

int ivs_doorbell_covers(void)
{
	int all = 1;

	pthread_mutex_lock(&db.lock);
	if (!db.hears || own_fd() < 0)
		all = 0;
	/* A slot with a peer ID rings us, announced or not: one the server no
	 * longer knows is a process that exited (its slot dies soon), or one that
	 * holds our vector from before the server restarted. One that lies only
	 * makes its own connections with us slow. */
	for (uint32_t i = 0; all && i < ivs.r.h.nslots; i++) {
		uint64_t w = atomic_load_explicit(&slot_at(&ivs.r, i)->word, memory_order_relaxed);
		if ((w & 0xff) == SLOT_LIVE && slot_key(i, w >> 8) != ivs.key && id_of(i) < 0)
			all = 0;
	}
	pthread_mutex_unlock(&db.lock);
	return all;
}

void ivs_doorbell_atfork_child(void)
{
	pthread_mutex_init(&db.lock, NULL);
	db.hears = 0;
}
