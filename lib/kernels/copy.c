/* copy.c - copying into a caller's buffer with non-temporal stores.
 *
 * Ordinary stores first read every destination line into the cache (a
 * read-for-ownership) and later write it back: for a buffer much larger than
 * the caches that is a third stream of memory traffic. Streaming stores
 * write whole lines without reading them. They pay only when the
 * destination will not be read again soon, i.e. for vectors well beyond the
 * last-level cache (on the reference machine: +10-35% from ~16 MiB, 0-20%
 * slower below), and never for the staging halves, which a peer reads next. */
#include <stdint.h>
#include <string.h>

#include "lib/kernels/copy.h"
#include "shm/atomics.h"

#if defined(__x86_64__)
#include <cpuid.h>

/* -1 before the first look; then 0 or 1. Every thread that looks computes the same. */
static _Atomic int rep_movsb_fast = -1;

int shmcoll__rep_movsb_fast(void)
{
	unsigned a, b, c, d;
	int fast = load_relaxed(&rep_movsb_fast);

	if (fast >= 0)
		return fast;
	/* Leaf 7: EBX bit 9 ERMS, EDX bit 4 FSRM. */
	fast = __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((b >> 9 & 1) || (d >> 4 & 1));
	store_relaxed(&rep_movsb_fast, fast);
	return fast;
}
#else
int shmcoll__rep_movsb_fast(void)
{
	return 0;
}
#endif

#if defined(__SSE2__)
#include <emmintrin.h>

/* Copies n bytes 64 at a time by unaligned loads, with streaming stores (nt, which needs d
 * 16-byte aligned) or ordinary ones; the tail, under 64 bytes, by memcpy. nt is a constant
 * at each call, so the compiler keeps one kind of store in each loop. */
static inline void copy_lines(uint8_t *d, const uint8_t *s, size_t n, int nt)
{
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));

		if (nt) {
			_mm_stream_si128((__m128i *)d, a);
			_mm_stream_si128((__m128i *)(d + 16), b);
			_mm_stream_si128((__m128i *)(d + 32), c);
			_mm_stream_si128((__m128i *)(d + 48), e);
		} else {
			_mm_storeu_si128((__m128i *)d, a);
			_mm_storeu_si128((__m128i *)(d + 16), b);
			_mm_storeu_si128((__m128i *)(d + 32), c);
			_mm_storeu_si128((__m128i *)(d + 48), e);
		}
	}
	memcpy(d, s, n);
}

void *shmcoll__copy_near(void *dst, const void *src, size_t n)
{
	copy_lines(dst, src, n, 0);
	return dst;
}

void shmcoll__copy_nt(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t head = (16 - ((uintptr_t)d & 15)) & 15;

	if (n < 256) {
		memcpy(d, s, n);
		return;
	}
	memcpy(d, s, head);
	copy_lines(d + head, s + head, n - head, 1);
	/* Streaming stores are weakly ordered: make them visible before the
	 * caller's next release store (or its return). */
	_mm_sfence();
}

#else /* no SSE2: ordinary stores */

void shmcoll__copy_nt(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

void *shmcoll__copy_near(void *dst, const void *src, size_t n)
{
	return memcpy(dst, src, n);
}

#endif
