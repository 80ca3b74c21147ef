/* QEMU's ivshmem server protocol (docs/specs/ivshmem-spec.rst in QEMU), as both
 * ends speak it: `usmc region serve` and a host process joining the region as a
 * doorbell peer (ivs_doorbell.c). A message is one little-endian int64 over a
 * Unix stream socket, with at most one descriptor (SCM_RIGHTS). The server
 * sends, and the client never does:
 *
 *   0                        the protocol version
 *   ID                       the client's own peer ID
 *   -1   + the memory's fd   the shared memory
 *   ID   + an eventfd        one per vector, for every peer there (the client
 *                            itself last), and later for each peer that joins
 *   ID   (no fd)             that peer left
 *
 * Writing 1 to a peer's vector eventfd interrupts it; QEMU turns that into the
 * guest's MSI-X vector, and a guest rings a peer through its device's doorbell
 * register instead. Everything the server sends is untrusted to the client,
 * and a client is untrusted to the server. */
#ifndef USMC_IVS_PROTO_H
#define USMC_IVS_PROTO_H

#include <stdint.h>

#define IVSP_VERSION 0
/* A guest names a peer in the doorbell register's upper 16 bits. */
#define IVSP_ID_MAX 0xffff
/* QEMU's own server and client stop at 64 vectors a peer. */
#define IVSP_VECTORS_MAX 64
/* The peers a client keeps the vectors of: as many as a region has slots. */
#define IVSP_PEERS_MAX 256

/* One message: 0, or -errno (EAGAIN when the socket would block, EPIPE when the
 * peer left). fd -1 sends none. */
int ivsp_send(int sock, int64_t v, int fd);
/* One message: 1 with *v and *fd (-1: none, ours to close otherwise), 0 at end
 * of stream, -EAGAIN when none is waiting, -EPROTO for a message that is not
 * one (cut short, more than one descriptor, other ancillary data: whatever it
 * carried is closed), or -errno. */
int ivsp_recv(int sock, int64_t *v, int *fd);

/* What a client learnt so far: the decoder of what the server says. */
struct ivsp_peer {
	int64_t id;
	int nfd;
	int fd[IVSP_VECTORS_MAX];
};

enum ivsp_stage { IVSP_WANT_VERSION, IVSP_WANT_ID, IVSP_WANT_MEMORY, IVSP_READY };

struct ivsp_client {
	enum ivsp_stage stage;
	int64_t self;
	int memory;                     /* the shared memory's fd, -1 before */
	struct ivsp_peer peers[IVSP_PEERS_MAX];   /* ourselves among them */
	int npeers;
	int dropped;                    /* vectors beyond what we keep, closed */
};

void ivsp_client_init(struct ivsp_client *c);
/* Takes one message from the server, and fd with it (kept or closed). Returns
 * 0, or -1 with why when the server broke the protocol: the client then
 * disconnects. */
int ivsp_client_take(struct ivsp_client *c, int64_t v, int fd, const char **why);
/* The peer with that ID the server announced (ourselves included), or NULL. */
const struct ivsp_peer *ivsp_client_peer(const struct ivsp_client *c, int64_t id);
/* Closes every descriptor it holds. */
void ivsp_client_clear(struct ivsp_client *c);

#endif
