/* Copying a large block into memory another core will read.
 *
 * A ring line the writer fills was last read by the other core, so an ordinary
 * store first fetches it back and invalidates the reader's copy (a read for
 * ownership), then the reader fetches it again: every line crosses twice before
 * it is read once. Streaming stores skip the fetch and write whole lines out, so
 * a bulk copy into a ring runs at memory speed instead of being throttled by
 * that traffic. For small blocks the reader's next access would find them in a
 * cache instead, so they are copied the ordinary way.
 *
 * Header-only: the bare ring benchmark (bench/bare_ring.c) uses the same copy,
 * so the ceiling it measures is the one this copy reaches. */
#ifndef USMC_STREAMCOPY_H
#define USMC_STREAMCOPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* Blocks from this size on are streamed: below it, the reader of a ping-pong
 * gets its lines faster from the writer's cache than from memory (measured
 * with bench/bare_ring: 4 KB messages slower streamed, 8 KB even, 12 KB on
 * faster). */
#define STREAM_COPY_MIN 8192u

/* Copies n bytes; the bytes are visible to other cores in the order of later
 * stores when it returns (a release store after it publishes them). */
static inline void stream_copy(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	if (n >= STREAM_COPY_MIN) {
		unsigned char *d = dst;
		const unsigned char *s = src;
		size_t head = (size_t)(-(uintptr_t)d & 15u);

		memcpy(d, s, head);
		d += head;
		s += head;
		n -= head;
		for (; n >= 64; n -= 64, d += 64, s += 64) {
			__m128i a = _mm_loadu_si128((const __m128i *)s);
			__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
			__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
			__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
			_mm_stream_si128((__m128i *)d, a);
			_mm_stream_si128((__m128i *)(d + 16), b);
			_mm_stream_si128((__m128i *)(d + 32), c);
			_mm_stream_si128((__m128i *)(d + 48), e);
		}
		/* Streaming stores are weakly ordered: fence them before the
		 * cursor that publishes them. */
		_mm_sfence();
		dst = d;
		src = s;
	}
#endif
	memcpy(dst, src, n);
}

#endif
