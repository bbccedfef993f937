/* kernels_avx512.c - the reduction kernels in AVX-512 (F, BW, VL, DQ; 512-bit vectors, masked
 * tails), built with those flags and run only where kernels.c found them and the OS's ZMM and
 * opmask support. Every kernel gives the bits of its scalar counterpart in kernels.c. */

#include "lib/kernels/kernels_impl.h"

#include <immintrin.h>
#include <stdint.h>

/* Families, as in kernels_avx2.c with twice the width: b, d, q: 8-, 32-, 64-bit integers;
 * ps, pd: float32, float64; f16, bf16: 16 elements widened to float32; i8a, u8a: 16 bytes
 * widened to float32 for AVG; i32a, u32a: 8 elements widened to float64 for AVG. */
#define ES_b     1
#define VL_b     64
#define ACC_b    __m512i
#define ES_d     4
#define VL_d     16
#define ACC_d    __m512i
#define ES_q     8
#define VL_q     8
#define ACC_q    __m512i
#define ES_ps    4
#define VL_ps    16
#define ACC_ps   __m512
#define ES_pd    8
#define VL_pd    8
#define ACC_pd   __m512d
#define ES_f16   2
#define VL_f16   16
#define ACC_f16  __m512
#define ES_bf16  2
#define VL_bf16  16
#define ACC_bf16 __m512
#define ES_i8a   1
#define VL_i8a   16
#define ACC_i8a  __m512
#define ES_u8a   1
#define VL_u8a   16
#define ACC_u8a  __m512
#define ES_i32a  4
#define VL_i32a  8
#define ACC_i32a __m512d
#define ES_u32a  4
#define VL_u32a  8
#define ACC_u32a __m512d

/* The first n lanes, n < lanes. Masked loads and stores touch only those; the others read as
 * zero and are never written, so a partial unit needs no copy. */
static inline __mmask64 first64(size_t n)
{
	return ((__mmask64)1 << n) - 1;
}

static inline __mmask16 first16(size_t n)
{
	return (__mmask16)((1u << n) - 1);
}

static inline __mmask8 first8(size_t n)
{
	return (__mmask8)((1u << n) - 1);
}

/* Loads: whole units, and the first n elements (suffix _n). */

static inline __m512i ld_si(const unsigned char *p)
{
	return _mm512_loadu_si512(p);
}

#define ld_b ld_si
#define ld_d ld_si
#define ld_q ld_si

static inline __m512i ld_b_n(const unsigned char *p, size_t n)
{
	return _mm512_maskz_loadu_epi8(first64(n), p);
}

static inline __m512i ld_d_n(const unsigned char *p, size_t n)
{
	return _mm512_maskz_loadu_epi32(first16(n), p);
}

static inline __m512i ld_q_n(const unsigned char *p, size_t n)
{
	return _mm512_maskz_loadu_epi64(first8(n), p);
}

static inline __m512 ld_ps(const unsigned char *p)
{
	return _mm512_loadu_ps(p);
}

static inline __m512 ld_ps_n(const unsigned char *p, size_t n)
{
	return _mm512_maskz_loadu_ps(first16(n), p);
}

static inline __m512d ld_pd(const unsigned char *p)
{
	return _mm512_loadu_pd(p);
}

static inline __m512d ld_pd_n(const unsigned char *p, size_t n)
{
	return _mm512_maskz_loadu_pd(first8(n), p);
}

/* 16 x 16 bits: whole, and the first n. */
static inline __m256i ld_h(const unsigned char *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

static inline __m256i ld_h_n(const unsigned char *p, size_t n)
{
	return _mm256_maskz_loadu_epi16(first16(n), p);
}

/* VCVTPH2PS quiets a signalling NaN; every float16 result is narrowed, which quiets it
 * anyway (as in the reference). */
static inline __m512 ld_f16(const unsigned char *p)
{
	return _mm512_cvtph_ps(ld_h(p));
}

static inline __m512 ld_f16_n(const unsigned char *p, size_t n)
{
	return _mm512_cvtph_ps(ld_h_n(p, n));
}

static inline __m512 widen_bf16(__m256i h)
{
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m512 ld_bf16(const unsigned char *p)
{
	return widen_bf16(ld_h(p));
}

static inline __m512 ld_bf16_n(const unsigned char *p, size_t n)
{
	return widen_bf16(ld_h_n(p, n));
}

static inline __m512 ld_i8a(const unsigned char *p)
{
	return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

static inline __m512 ld_i8a_n(const unsigned char *p, size_t n)
{
	return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(first16(n), p)));
}

static inline __m512 ld_u8a(const unsigned char *p)
{
	return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

static inline __m512 ld_u8a_n(const unsigned char *p, size_t n)
{
	return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(first16(n), p)));
}

static inline __m512d ld_i32a(const unsigned char *p)
{
	return _mm512_cvtepi32_pd(_mm256_loadu_si256((const __m256i *)p));
}

static inline __m512d ld_i32a_n(const unsigned char *p, size_t n)
{
	return _mm512_cvtepi32_pd(_mm256_maskz_loadu_epi32(first8(n), p));
}

static inline __m512d ld_u32a(const unsigned char *p)
{
	return _mm512_cvtepu32_pd(_mm256_loadu_si256((const __m256i *)p));
}

static inline __m512d ld_u32a_n(const unsigned char *p, size_t n)
{
	return _mm512_cvtepu32_pd(_mm256_maskz_loadu_epi32(first8(n), p));
}

/* Finishing steps: the value a unit stores, before the store itself. */

static inline __m512 div_ps(__m512 a, int nsrc)
{
	return _mm512_div_ps(a, _mm512_set1_ps((float)nsrc));
}

static inline __m512d div_pd(__m512d a, int nsrc)
{
	return _mm512_div_pd(a, _mm512_set1_pd((double)nsrc));
}

/* VCVTPS2PH with an explicit round-to-nearest-even: agrees with f32_to_f16() on all 2^32
 * inputs, NaNs included. */
static inline __m256i narrow_f16(__m512 a)
{
	return _mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT);
}

/* f32_to_bf16() in integers. Not VCVTNEPS2BF16 (AVX512_BF16): it flushes float32 subnormals
 * to zero, which differs from the reference on 16.7 million inputs (docs/KERNELS.md). */
static inline __m256i narrow_bf16(__m512 a)
{
	__m512i x = _mm512_castps_si512(a);
	__m512i hi = _mm512_srli_epi32(x, 16);
	__m512i bias =
	    _mm512_add_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
	__m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
	__mmask16 nan = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
	__m512i r = _mm512_mask_or_epi32(rounded, nan, hi, _mm512_set1_epi32(0x0040));

	return _mm512_cvtepi32_epi16(r);
}

/* Integer AVG: the exact sum divided in floating point and truncated toward zero is the
 * exact quotient truncated (SIMD_AVG_MAX_NSRC). */
static inline __m128i avg8(__m512 a, int nsrc)
{
	return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(div_ps(a, nsrc)));
}

/* Stores: whole units, and the first n elements (suffix _n). Each takes nsrc, which only the
 * AVG ones use. */

static inline void st_si(unsigned char *p, __m512i a, int nsrc)
{
	_mm512_storeu_si512(p, a);
}

#define st_b st_si
#define st_d st_si
#define st_q st_si

static inline void st_b_n(unsigned char *p, __m512i a, int nsrc, size_t n)
{
	_mm512_mask_storeu_epi8(p, first64(n), a);
}

static inline void st_d_n(unsigned char *p, __m512i a, int nsrc, size_t n)
{
	_mm512_mask_storeu_epi32(p, first16(n), a);
}

static inline void st_q_n(unsigned char *p, __m512i a, int nsrc, size_t n)
{
	_mm512_mask_storeu_epi64(p, first8(n), a);
}

/* One whole and one partial store of the finished value F (an expression of a and nsrc),
 * through the plain store S and the masked store SN of its type. */
#define DEFINE_STORES(name, ACC, F, S, SN)                                                         \
	static inline void name(unsigned char *p, ACC a, int nsrc)                                 \
	{                                                                                          \
		S(p, F);                                                                           \
	}                                                                                          \
	static inline void name##_n(unsigned char *p, ACC a, int nsrc, size_t n)                   \
	{                                                                                          \
		SN(p, n, F);                                                                       \
	}

#define S_PS(p, v)      _mm512_storeu_ps((p), (v))
#define SN_PS(p, n, v)  _mm512_mask_storeu_ps((p), first16(n), (v))
#define S_PD(p, v)      _mm512_storeu_pd((p), (v))
#define SN_PD(p, n, v)  _mm512_mask_storeu_pd((p), first8(n), (v))
#define S_H(p, v)       _mm256_storeu_si256((__m256i *)(p), (v))
#define SN_H(p, n, v)   _mm256_mask_storeu_epi16((p), first16(n), (v))
#define S_B16(p, v)     _mm_storeu_si128((__m128i *)(p), (v))
#define SN_B16(p, n, v) _mm_mask_storeu_epi8((p), first16(n), (v))
#define S_D8(p, v)      _mm256_storeu_si256((__m256i *)(p), (v))
#define SN_D8(p, n, v)  _mm256_mask_storeu_epi32((p), first8(n), (v))

DEFINE_STORES(st_ps, __m512, a, S_PS, SN_PS)
DEFINE_STORES(st_ps_avg, __m512, div_ps(a, nsrc), S_PS, SN_PS)
DEFINE_STORES(st_pd, __m512d, a, S_PD, SN_PD)
DEFINE_STORES(st_pd_avg, __m512d, div_pd(a, nsrc), S_PD, SN_PD)
DEFINE_STORES(st_f16, __m512, narrow_f16(a), S_H, SN_H)
DEFINE_STORES(st_f16_avg, __m512, narrow_f16(div_ps(a, nsrc)), S_H, SN_H)
DEFINE_STORES(st_bf16, __m512, narrow_bf16(a), S_H, SN_H)
DEFINE_STORES(st_bf16_avg, __m512, narrow_bf16(div_ps(a, nsrc)), S_H, SN_H)
/* The 8-bit quotients lie in the type's range, so the truncating narrow is exact. */
DEFINE_STORES(st_i8a, __m512, avg8(a, nsrc), S_B16, SN_B16)
DEFINE_STORES(st_u8a, __m512, avg8(a, nsrc), S_B16, SN_B16)
DEFINE_STORES(st_i32a, __m512d, _mm512_cvttpd_epi32(div_pd(a, nsrc)), S_D8, SN_D8)
DEFINE_STORES(st_u32a, __m512d, _mm512_cvttpd_epu32(div_pd(a, nsrc)), S_D8, SN_D8)

/* Integer folds. Products keep the low bits, which is wrapping. */

static inline __m512i add_b(__m512i a, __m512i b)
{
	return _mm512_add_epi8(a, b);
}

static inline __m512i add_d(__m512i a, __m512i b)
{
	return _mm512_add_epi32(a, b);
}

static inline __m512i add_q(__m512i a, __m512i b)
{
	return _mm512_add_epi64(a, b);
}

/* No 8-bit multiply: the low byte of a 16-bit product depends only on the low bytes of the
 * factors, so multiply the even bytes in place and the odd ones shifted down. */
static inline __m512i mul_b(__m512i a, __m512i b)
{
	__m512i even = _mm512_mullo_epi16(a, b);
	__m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8));

	return _mm512_mask_blend_epi8(0xaaaaaaaaaaaaaaaaull, even, _mm512_slli_epi16(odd, 8));
}

static inline __m512i mul_d(__m512i a, __m512i b)
{
	return _mm512_mullo_epi32(a, b);
}

static inline __m512i mul_q(__m512i a, __m512i b)
{
	return _mm512_mullo_epi64(a, b);
}

static inline __m512i min_i8(__m512i a, __m512i b)
{
	return _mm512_min_epi8(a, b);
}

static inline __m512i max_i8(__m512i a, __m512i b)
{
	return _mm512_max_epi8(a, b);
}

static inline __m512i min_u8(__m512i a, __m512i b)
{
	return _mm512_min_epu8(a, b);
}

static inline __m512i max_u8(__m512i a, __m512i b)
{
	return _mm512_max_epu8(a, b);
}

static inline __m512i min_i32(__m512i a, __m512i b)
{
	return _mm512_min_epi32(a, b);
}

static inline __m512i max_i32(__m512i a, __m512i b)
{
	return _mm512_max_epi32(a, b);
}

static inline __m512i min_u32(__m512i a, __m512i b)
{
	return _mm512_min_epu32(a, b);
}

static inline __m512i max_u32(__m512i a, __m512i b)
{
	return _mm512_max_epu32(a, b);
}

static inline __m512i min_i64(__m512i a, __m512i b)
{
	return _mm512_min_epi64(a, b);
}

static inline __m512i max_i64(__m512i a, __m512i b)
{
	return _mm512_max_epi64(a, b);
}

static inline __m512i min_u64(__m512i a, __m512i b)
{
	return _mm512_min_epu64(a, b);
}

static inline __m512i max_u64(__m512i a, __m512i b)
{
	return _mm512_max_epu64(a, b);
}

static inline __m512i and_si(__m512i a, __m512i b)
{
	return _mm512_and_si512(a, b);
}

static inline __m512i or_si(__m512i a, __m512i b)
{
	return _mm512_or_si512(a, b);
}

static inline __m512i xor_si(__m512i a, __m512i b)
{
	return _mm512_xor_si512(a, b);
}

/* Float folds (C_FADD, C_FMUL, C_FMIN, C_FMAX in kernels.c). SUM/PROD: a NaN accumulator
 * meets itself instead of b, so the operands are one NaN twice or hold at most one NaN, and
 * the result (that NaN, quieted) does not depend on the operand order, which the compiler may
 * swap. MIN/MAX take b where it is strictly better, or a NaN over a non-NaN: NGE_UQ is
 * "b < a or unordered", asked only of lanes where a is ordered. */

static inline __m512 sum_ps(__m512 a, __m512 b)
{
	return _mm512_add_ps(a, _mm512_mask_mov_ps(b, _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a));
}

static inline __m512 prod_ps(__m512 a, __m512 b)
{
	return _mm512_mul_ps(a, _mm512_mask_mov_ps(b, _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a));
}

static inline __m512 min_ps(__m512 a, __m512 b)
{
	__mmask16 ord = _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q);

	return _mm512_mask_mov_ps(a, _mm512_mask_cmp_ps_mask(ord, b, a, _CMP_NGE_UQ), b);
}

static inline __m512 max_ps(__m512 a, __m512 b)
{
	__mmask16 ord = _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q);

	return _mm512_mask_mov_ps(a, _mm512_mask_cmp_ps_mask(ord, b, a, _CMP_NLE_UQ), b);
}

static inline __m512d sum_pd(__m512d a, __m512d b)
{
	return _mm512_add_pd(a, _mm512_mask_mov_pd(b, _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), a));
}

static inline __m512d prod_pd(__m512d a, __m512d b)
{
	return _mm512_mul_pd(a, _mm512_mask_mov_pd(b, _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), a));
}

static inline __m512d min_pd(__m512d a, __m512d b)
{
	__mmask8 ord = _mm512_cmp_pd_mask(a, a, _CMP_ORD_Q);

	return _mm512_mask_mov_pd(a, _mm512_mask_cmp_pd_mask(ord, b, a, _CMP_NGE_UQ), b);
}

static inline __m512d max_pd(__m512d a, __m512d b)
{
	__mmask8 ord = _mm512_cmp_pd_mask(a, a, _CMP_ORD_Q);

	return _mm512_mask_mov_pd(a, _mm512_mask_cmp_pd_mask(ord, b, a, _CMP_NLE_UQ), b);
}

/* Integer AVG accumulators hold exact integers: no NaN can occur. */
static inline __m512 addx_ps(__m512 a, __m512 b)
{
	return _mm512_add_ps(a, b);
}

static inline __m512d addx_pd(__m512d a, __m512d b)
{
	return _mm512_add_pd(a, b);
}

#define VEC_TABLE shmcoll__kernels_avx512
#include "lib/kernels/kernels_vec.h"
