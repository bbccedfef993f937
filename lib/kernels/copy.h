/* copy.h - copying into a caller's buffer: with non-temporal stores, and out of a peer's
 * staging. */
#ifndef SHMCOLL_KERNELS_COPY_H
#define SHMCOLL_KERNELS_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* memcpy with non-temporal stores, for results far larger than the caches,
 * which would otherwise be read before being overwritten. Ends with a store
 * fence. Where the target has no streaming stores it is memcpy. */
void shmcoll__copy_nt(void *dst, const void *src, size_t n);

/* shmcoll__copy_out's slow case: memcpy by a vector loop (memcpy where there is no SSE2). */
void *shmcoll__copy_near(void *dst, const void *src, size_t n);

/* Below this size glibc's memcpy does not use rep movsb. */
#define SHMCOLL_REP_MOVSB_MIN 2048

/* Whether dst lies 1 to 63 bytes after src modulo 4 KiB, where rep movsb crawls. */
static inline int shmcoll__rep_movsb_slow(const void *dst, const void *src)
{
	uintptr_t ahead = ((uintptr_t)dst - (uintptr_t)src) & 4095;

	return ahead != 0 && ahead < 64;
}

/* memcpy for a source that another core wrote (a peer's staging) into a caller's buffer.
 * glibc copies large sizes with rep movsb, which on this kind of CPU (AMD EPYC with FSRM)
 * crawls - 5x slower, measured on a 1 MiB allreduce - when the destination lies 1 to 63
 * bytes after the source modulo 4 KiB, as a malloc'd buffer (page offset 16) does after a
 * page-aligned staging half. That case goes through shmcoll__copy_near; every other is
 * memcpy, with nothing but the test in between. Returns dst. */
static inline void *shmcoll__copy_out(void *dst, const void *src, size_t n)
{
	if (n < SHMCOLL_REP_MOVSB_MIN || !shmcoll__rep_movsb_slow(dst, src))
		return memcpy(dst, src, n);
	return shmcoll__copy_near(dst, src, n);
}

/* shmcoll__copy_in copies with rep movsb from this size up to the size from which glibc's
 * memcpy uses it itself (2112 bytes here); below, memcpy. */
#define SHMCOLL_COPY_IN_REP_MIN 1024
#define SHMCOLL_COPY_IN_REP_MAX 4096
/* shmcoll__copy_in_msg's lower bound: up to 256 bytes glibc loads every vector before it
 * stores any, and rep movsb gains nothing (docs/BENCHMARKS.md, "Messages of 257 bytes to
 * 1 KiB"). */
#define SHMCOLL_COPY_IN_MSG_MIN 257

/* Whether this CPU copies fast with rep movsb (ERMS or FSRM), read once. */
int shmcoll__rep_movsb_fast(void);

/* memcpy, with rep movsb for min <= n < SHMCOLL_COPY_IN_REP_MAX where that is fast and the
 * addresses do not alias (shmcoll__copy_in, shmcoll__copy_in_msg). */
static inline void *shmcoll__copy_in_from(void *dst, const void *src, size_t n, size_t min)
{
#if defined(__x86_64__)
	if (n >= min && n < SHMCOLL_COPY_IN_REP_MAX && !shmcoll__rep_movsb_slow(dst, src) &&
	    shmcoll__rep_movsb_fast()) {
		void *d = dst;
		/* An asm qualifier, not a shared word: the outputs go unused, so without it
		 * the compiler could drop the copy. */
		__asm__ volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
		return dst;
	}
#else
	(void)min;
#endif
	return memcpy(dst, src, n);
}

/* memcpy into this rank's staging, which its peers read and so hold in their caches. An
 * ordinary store must first take each line back with its data (a read for ownership); rep
 * movsb on a CPU with ERMS writes whole lines and only invalidates the peers' copies. glibc
 * starts using it at about 2 KiB; from 1 KiB it pays already (P=2, slow hop state: a 2 KiB
 * allreduce 0.51-0.62 against 0.68-0.80 us, 1.5 KiB 0.46-0.51 against 0.58-0.70; a 2 KiB
 * bcast 0.35-0.41 against 0.46-0.51; docs/BENCHMARKS.md). Returns dst. */
static inline void *shmcoll__copy_in(void *dst, const void *src, size_t n)
{
	return shmcoll__copy_in_from(dst, src, n, SHMCOLL_COPY_IN_REP_MIN);
}

/* shmcoll__copy_in for a rooted call's inline message (lib/core/engine.c), from 257 bytes:
 * with a 60 ns hop glibc's loop took a back-to-back bcast of 320 bytes to 1 KiB to 1.1-2.5x
 * the time of rep movsb (docs/BENCHMARKS.md, "Messages of 257 bytes to 1 KiB"). */
static inline void *shmcoll__copy_in_msg(void *dst, const void *src, size_t n)
{
	return shmcoll__copy_in_from(dst, src, n, SHMCOLL_COPY_IN_MSG_MIN);
}

/* Results from this size on are written with shmcoll__copy_nt when
 * SHMCOLL_NT=1 (lib/coll/direct.c). */
#define SHMCOLL_NT_MIN_BYTES (16u * 1024 * 1024)

#endif
