/* copy.h - copying into a caller's buffer with non-temporal stores. */
#ifndef SHMCOLL_KERNELS_COPY_H
#define SHMCOLL_KERNELS_COPY_H

#include <stddef.h>

/* memcpy with non-temporal stores, for results far larger than the caches,
 * which would otherwise be read before being overwritten. Ends with a store
 * fence. Where the target has no streaming stores it is memcpy. */
void shmcoll__copy_nt(void *dst, const void *src, size_t n);

/* memcpy for a large source that another core wrote (a peer's staging) into a caller's
 * buffer. glibc copies such sizes with rep movsb, which on this kind of CPU (AMD EPYC with
 * FSRM) crawls - 5x slower, measured on a 1 MiB allreduce - when the destination lies 1 to
 * 63 bytes after the source modulo 4 KiB, as a malloc'd buffer (page offset 16) does after a
 * page-aligned staging half. That case goes through a vector loop; every other is memcpy.
 * Returns dst. */
void *shmcoll__copy_out(void *dst, const void *src, size_t n);

/* Results from this size on are written with shmcoll__copy_nt when
 * SHMCOLL_NT=1 (lib/coll/direct.c). */
#define SHMCOLL_NT_MIN_BYTES (16u * 1024 * 1024)

#endif
