/* kernels.h - element-wise reduction kernels: dst = op(src0, ..., srcN-1).
 * The scalar kernels in kernels.c are the specification of every result. */
#ifndef SHMCOLL_KERNELS_H
#define SHMCOLL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"

/* dst[i] = op(srcs[0][i], srcs[1][i], ..., srcs[nsrc-1][i]) for i < count,
 * folded left in source order, so every rank that passes the sources in the
 * same order gets the same bits. nsrc >= 1. dst must not overlap any source.
 * No alignment is required. Semantics per dtype:
 * - integers: SUM and PROD wrap modulo 2^bits; AVG is the exact sum divided
 *   by nsrc, truncated toward zero; BAND/BOR/BXOR bitwise.
 * - float32/float64: accumulate in the type itself; AVG = sum / nsrc.
 * - float16/bfloat16: every source converted to float32, folded in float32,
 *   rounded once to nearest even.
 * - MIN/MAX on floats: if any source is a NaN the result is the first NaN in
 *   source order; otherwise the first of equal values (-0 vs +0) wins. */
typedef void (*shmcoll__reduce_fn)(void *restrict dst, const void *const *restrict srcs,
				   int nsrc, size_t count);

/* The kernel for (dtype, op), or NULL where the pair is invalid (unknown
 * dtype or op, or a bitwise op on a floating dtype). */
shmcoll__reduce_fn shmcoll__reduce_lookup(shmcoll_dtype dtype, shmcoll_op op);

/* Conversions used by the 16-bit float kernels: round to nearest even,
 * NaN stays NaN (quiet), overflow gives infinity. */
float shmcoll__f16_to_f32(uint16_t h);
uint16_t shmcoll__f32_to_f16(float f);
float shmcoll__bf16_to_f32(uint16_t h);
uint16_t shmcoll__f32_to_bf16(float f);

#endif
