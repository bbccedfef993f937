/* kernels_impl.h - what kernels.c and the per-ISA kernel files share: the per-level tables and
 * the loop every SIMD kernel runs. Private to the kernel files. */
#ifndef SHMCOLL_KERNELS_IMPL_H
#define SHMCOLL_KERNELS_IMPL_H

#include <stddef.h>

#include "lib/kernels/kernels.h"

/* One level's kernels. The scalar table has an entry for every valid pair; a SIMD table leaves
 * NULL what it does not vectorise, and lookup falls down the ladder to the next lower level. */
typedef shmcoll__reduce_fn shmcoll__kernel_table[SHMCOLL_DTYPE_COUNT][SHMCOLL_OP_COUNT];

extern const shmcoll__kernel_table shmcoll__kernels_scalar;
#ifdef SHMCOLL_HAVE_AVX2
extern const shmcoll__kernel_table shmcoll__kernels_avx2;
#endif
#ifdef SHMCOLL_HAVE_AVX512
extern const shmcoll__kernel_table shmcoll__kernels_avx512;
#endif

/* Integer AVG in SIMD sums exactly in float (8-bit types) or double (32-bit types) and divides
 * there; the quotient truncates to the exact one while nsrc <= 2^14 (docs/KERNELS.md has the
 * bound). Above that the kernel hands the call to the scalar one. */
#define SIMD_AVG_MAX_NSRC (1 << 14)

/* The loop of every SIMD kernel. A unit is VL elements of ES bytes, whose accumulator of type
 * ACC is one register. Four units per pass: load them from src0, fold src1..srcN-1 into them
 * with COMB(acc, next), store with ST(p, acc, nsrc). Then single units, then one partial unit
 * of n < VL elements through LDN(p, n) and STN(p, acc, nsrc, n), which read and write only
 * those n elements. The fold order per element is the reference's: src0, src1, ... */
#define DEFINE_VKERNEL(name, ES, VL, ACC, LD, LDN, COMB, ST, STN)                                  \
	static void name(void *restrict dst, const void *const *restrict srcs, int nsrc,           \
	                 size_t count)                                                             \
	{                                                                                          \
		unsigned char *d = dst;                                                            \
		const unsigned char *s0 = srcs[0];                                                 \
		const size_t ub = (size_t)(ES) * (VL);                                             \
		size_t i = 0;                                                                      \
		for (; count - i >= 4 * (size_t)(VL); i += 4 * (size_t)(VL)) {                     \
			const size_t o = i * (ES);                                                 \
			ACC a0 = LD(s0 + o);                                                       \
			ACC a1 = LD(s0 + o + ub);                                                  \
			ACC a2 = LD(s0 + o + 2 * ub);                                              \
			ACC a3 = LD(s0 + o + 3 * ub);                                              \
			for (int k = 1; k < nsrc; k++) {                                           \
				const unsigned char *s = (const unsigned char *)srcs[k] + o;       \
				a0 = COMB(a0, LD(s));                                              \
				a1 = COMB(a1, LD(s + ub));                                         \
				a2 = COMB(a2, LD(s + 2 * ub));                                     \
				a3 = COMB(a3, LD(s + 3 * ub));                                     \
			}                                                                          \
			ST(d + o, a0, nsrc);                                                       \
			ST(d + o + ub, a1, nsrc);                                                  \
			ST(d + o + 2 * ub, a2, nsrc);                                              \
			ST(d + o + 3 * ub, a3, nsrc);                                              \
		}                                                                                  \
		for (; count - i >= (size_t)(VL); i += (VL)) {                                     \
			const size_t o = i * (ES);                                                 \
			ACC a = LD(s0 + o);                                                        \
			for (int k = 1; k < nsrc; k++)                                             \
				a = COMB(a, LD((const unsigned char *)srcs[k] + o));               \
			ST(d + o, a, nsrc);                                                        \
		}                                                                                  \
		if (i < count) {                                                                   \
			const size_t o = i * (ES), n = count - i;                                  \
			ACC a = LDN(s0 + o, n);                                                    \
			for (int k = 1; k < nsrc; k++)                                             \
				a = COMB(a, LDN((const unsigned char *)srcs[k] + o, n));           \
			STN(d + o, a, nsrc, n);                                                    \
		}                                                                                  \
	}

/* Integer AVG: the SIMD kernel for nsrc within the bound above, the scalar one beyond. */
#define DEFINE_VKERNEL_IAVG(name, dt, ES, VL, ACC, LD, LDN, COMB, ST, STN)                         \
	DEFINE_VKERNEL(name##_simd, ES, VL, ACC, LD, LDN, COMB, ST, STN)                           \
	static void name(void *restrict dst, const void *const *restrict srcs, int nsrc,           \
	                 size_t count)                                                             \
	{                                                                                          \
		if (nsrc > SIMD_AVG_MAX_NSRC)                                                      \
			shmcoll__kernels_scalar[dt][SHMCOLL_AVG](dst, srcs, nsrc, count);          \
		else                                                                               \
			name##_simd(dst, srcs, nsrc, count);                                       \
	}

#endif
