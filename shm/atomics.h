/* atomics.h - the only memory-ordering vocabulary of shmcoll: thin names over
 * <stdatomic.h> so every barrier in the tree reads as what it is for. */
#ifndef SHMCOLL_SHM_ATOMICS_H
#define SHMCOLL_SHM_ATOMICS_H

#include <stdatomic.h>
#include <stdint.h>

/* Shared lines are padded to 128 bytes, not 64: the adjacent-line prefetcher
 * of current x86 cores pulls 64-byte lines in pairs, so two writers 64 bytes
 * apart still fight over one 128-byte block. */
#define SHMCOLL_LINE 128

/* ThreadSanitizer does not model a standalone fence (to the gcc 12 and
 * clang 14 runtimes atomic_thread_fence orders nothing), so a relaxed load
 * followed by fence_acquire() - how every wait ends - reads to it as a race
 * on all the wait orders. Under TSan only, relaxed loads are acquire loads:
 * the ordering the fence gives, where the tool can see it. The price: TSan
 * cannot catch a fence missing after a relaxed load. */
#if defined(__SANITIZE_THREAD__)
#define SHMCOLL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHMCOLL_TSAN 1
#endif
#endif

#ifdef SHMCOLL_TSAN
#define load_relaxed(p) atomic_load_explicit((p), memory_order_acquire)
#else
#define load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#endif
#define load_acquire(p)        atomic_load_explicit((p), memory_order_acquire)
#define load_seqcst(p)         atomic_load_explicit((p), memory_order_seq_cst)
#define store_relaxed(p, v)    atomic_store_explicit((p), (v), memory_order_relaxed)
#define store_release(p, v)    atomic_store_explicit((p), (v), memory_order_release)
#define store_seqcst(p, v)     atomic_store_explicit((p), (v), memory_order_seq_cst)
#define fetch_add_seqcst(p, v) atomic_fetch_add_explicit((p), (v), memory_order_seq_cst)
#define fetch_sub_seqcst(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_seq_cst)
#define fetch_or_relaxed(p, v) atomic_fetch_or_explicit((p), (v), memory_order_relaxed)
#define cas_weak_relaxed(p, e, v)                                                                  \
	atomic_compare_exchange_weak_explicit((p), (e), (v), memory_order_relaxed,                 \
	                                      memory_order_relaxed)
#define fence_acquire() atomic_thread_fence(memory_order_acquire)

/* Sequence numbers only grow and wrap: compare by signed distance. */
static inline int seq_reached(uint32_t cur, uint32_t want)
{
	return (int32_t)(cur - want) >= 0;
}

/* A hint to the core that this is a spin-wait loop (x86 PAUSE). */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

#endif
