/* link: src/dev/ivs_proto.c src/core/sys.c */
/* What an ivshmem server may send a host process (src/dev/ivs_proto.h): the
 * input is a run of messages, nine bytes each, a flag byte (bit 0: a
 * descriptor comes with it) and the little-endian int64, taken as the library
 * takes them until the decoder says the server broke the protocol. Besides
 * memory safety: the stages come in order, every peer kept has an ID in range
 * and no more vectors than the limit, no peer is kept twice, and once cleared
 * the decoder holds no descriptor (the lowest free one is what it was). */
#include "fuzz.h"

#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../../src/dev/ivs_proto.h"

static struct ivsp_client cl;

static int lowest_free(void)
{
	int fd = eventfd(0, 0);

	close(fd);
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int before = lowest_free();
	const char *why;

	ivsp_client_init(&cl);
	for (; size >= 9; data += 9, size -= 9) {
		int64_t v = 0;
		for (int i = 8; i >= 1; i--)
			v = (int64_t)((uint64_t)v << 8 | data[i]);
		int fd = data[0] & 1 ? eventfd(0, 0) : -1;
		enum ivsp_stage was = cl.stage;
		if (ivsp_client_take(&cl, v, fd, &why) < 0) {
			FUZZ_ASSERT(why && *why);
			break;
		}
		FUZZ_ASSERT(cl.stage == was || cl.stage == was + 1);
		FUZZ_ASSERT(cl.npeers >= 0 && cl.npeers <= IVSP_PEERS_MAX);
		for (int i = 0; i < cl.npeers; i++) {
			FUZZ_ASSERT(cl.peers[i].id >= 0 && cl.peers[i].id <= IVSP_ID_MAX);
			FUZZ_ASSERT(cl.peers[i].nfd >= 1 && cl.peers[i].nfd <= IVSP_VECTORS_MAX);
			for (int k = 0; k < i; k++)
				FUZZ_ASSERT(cl.peers[k].id != cl.peers[i].id);
		}
		if (cl.stage == IVSP_READY)
			FUZZ_ASSERT(cl.self >= 0 && cl.self <= IVSP_ID_MAX && cl.memory >= 0);
	}
	ivsp_client_clear(&cl);
	FUZZ_ASSERT(lowest_free() == before);
	return 0;
}

/* A message: flag and value. */
static size_t put(uint8_t *b, int fd, int64_t v)
{
	b[0] = (uint8_t)fd;
	for (int i = 1; i <= 8; i++, v = (int64_t)((uint64_t)v >> 8))
		b[i] = (uint8_t)v;
	return 9;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	uint8_t b[9 * 16];
	size_t n = 0;

	/* A welcome: version, ID 1, memory, peer 0's two vectors, ours. */
	n += put(b + n, 0, 0);
	n += put(b + n, 0, 1);
	n += put(b + n, 1, -1);
	n += put(b + n, 1, 0);
	n += put(b + n, 1, 0);
	n += put(b + n, 1, 1);
	n += put(b + n, 1, 1);
	emit(b, n);
	/* Then a newcomer, and peer 0 leaving. */
	n += put(b + n, 1, 2);
	n += put(b + n, 0, 0);
	n += put(b + n, 0, 2);
	emit(b, n);
	/* Told that we left. */
	n += put(b + n, 0, 1);
	emit(b, n);
}
