/* kernels.h - element-wise reduction kernels: dst = op(src0, ..., srcN-1).
 * The scalar kernels in kernels.c are the specification of every result. */
#ifndef SHMCOLL_KERNELS_H
#define SHMCOLL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"

/* Bytes of one element of dtype; 0 for an unknown dtype. Inline: every call asks. */
static inline size_t shmcoll__dtype_size(shmcoll_dtype dtype)
{
	static const unsigned char sizes[SHMCOLL_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};

	return (unsigned)dtype < SHMCOLL_DTYPE_COUNT ? sizes[dtype] : 0;
}

/* Whole elements of es bytes (a dtype's size: a power of two) in bytes: a shift, as a
 * 64-bit division costs ~10 ns on a small call's path. */
static inline size_t shmcoll__elems(size_t bytes, size_t es)
{
	return bytes >> __builtin_ctzl(es);
}

/* Whether op is defined on dtype (both known; no bitwise op on a floating dtype): exactly
 * the pairs shmcoll__reduce_lookup has a kernel for. */
static inline int shmcoll__op_valid(shmcoll_dtype dtype, shmcoll_op op)
{
	int bitwise = op == SHMCOLL_BAND || op == SHMCOLL_BOR || op == SHMCOLL_BXOR;

	return (unsigned)dtype < SHMCOLL_DTYPE_COUNT && (unsigned)op < SHMCOLL_OP_COUNT &&
	       !(bitwise && dtype >= SHMCOLL_FLOAT16);
}

/* "int8", ..., "float64", and "sum", ..., "bxor"; "unknown" for others. For messages. */
const char *shmcoll__dtype_name(uint32_t dtype);
const char *shmcoll__op_name(uint32_t op);

/* dst[i] = op(srcs[0][i], srcs[1][i], ..., srcs[nsrc-1][i]) for i < count,
 * folded left in source order, so every rank that passes the sources in the
 * same order gets the same bits, at every ISA level. nsrc >= 1. dst must not
 * overlap any source. No alignment is required. Semantics per dtype:
 * - integers: SUM and PROD wrap modulo 2^bits; AVG is the exact sum divided
 *   by nsrc, truncated toward zero; BAND/BOR/BXOR bitwise.
 * - float32/float64: accumulate in the type itself; AVG = sum / nsrc (a
 *   division, not a multiplication by 1/nsrc).
 * - float16/bfloat16: every source converted to float32, folded in float32,
 *   rounded once to nearest even.
 * - SUM/PROD/AVG on floats with NaNs: the first NaN of the fold wins, quieted
 *   (its sign and payload kept, the quiet bit set): a NaN source, or the
 *   default NaN of an invalid step (inf - inf, 0 * inf; 0xffc00000 on x86).
 *   With one source, float32/float64 SUM and PROD copy it bit for bit.
 * - MIN/MAX on floats: if any source is a NaN the result is the first NaN in
 *   source order (as it is for float32/float64, quieted for float16 and
 *   bfloat16); otherwise the first of equal values (-0 vs +0) wins.
 * Float arithmetic follows the caller's MXCSR (rounding mode, FTZ/DAZ) at
 * every level alike; the float16/bfloat16 narrowing is always to nearest
 * even. */
typedef void (*shmcoll__reduce_fn)(void *restrict dst, const void *const *restrict srcs, int nsrc,
                                   size_t count);

/* Instruction-set levels of the kernels, lowest first. Every level gives the
 * same bits as the scalar reference; a level without its own kernel for a
 * pair hands out the next lower level's (docs/KERNELS.md lists which). */
enum shmcoll_isa {
	SHMCOLL_ISA_SCALAR, /* the reference, portable C */
	SHMCOLL_ISA_AVX2,   /* AVX2 + F16C, no FMA */
	SHMCOLL_ISA_AVX512, /* AVX-512 F/BW/VL/DQ (AVX512_BF16 not used) */
	SHMCOLL_ISA_COUNT
};

/* The kernel for (dtype, op) at the active level, or NULL where the pair is
 * invalid (unknown dtype or op, or a bitwise op on a floating dtype). */
shmcoll__reduce_fn shmcoll__reduce_lookup(shmcoll_dtype dtype, shmcoll_op op);

/* The kernel for (dtype, op) at exactly level isa, or NULL when the pair is
 * invalid or that level is not available (not compiled in, or the CPU or OS
 * lacks it). For tests and the kernel benchmark. */
shmcoll__reduce_fn shmcoll__reduce_lookup_isa(int isa, shmcoll_dtype dtype, shmcoll_op op);

/* The level shmcoll__reduce_lookup uses: the highest available one, capped by
 * the environment variable SHMCOLL_ISA (scalar, avx2, avx512; any other value
 * is ignored), chosen once per process, at the first call of any of these
 * functions. */
int shmcoll__isa_active(void);

/* Non-zero if level isa was compiled in and this CPU and OS support it. */
int shmcoll__isa_available(int isa);

/* "scalar", "avx2", "avx512", or "unknown". */
const char *shmcoll__isa_name(int isa);

/* Conversions used by the 16-bit float kernels: round to nearest even,
 * NaN stays NaN (quiet), overflow gives infinity. */
float shmcoll__f16_to_f32(uint16_t h);
uint16_t shmcoll__f32_to_f16(float f);
float shmcoll__bf16_to_f32(uint16_t h);
uint16_t shmcoll__f32_to_bf16(float f);

#endif
