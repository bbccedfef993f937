/* kernels_avx2.c - the reduction kernels in AVX2 (256-bit vectors, F16C for float16), built
 * with -mavx2 -mf16c and run only where kernels.c found AVX2, F16C and the OS's YMM support.
 * Every kernel gives the bits of its scalar counterpart in kernels.c. */

#include "lib/kernels/kernels_impl.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* Families: how one unit of VL elements of ES bytes loads into one accumulator register and
 * stores back. b, d, q: 8-, 32-, 64-bit integers as they are; ps, pd: float32, float64; f16,
 * bf16: 8 elements widened to float32; i8a, u8a: 8 bytes widened to float32, where an integer
 * AVG sums exactly; i32a, u32a: 4 elements widened to float64, likewise. */
#define ES_b     1
#define VL_b     32
#define ACC_b    __m256i
#define ES_d     4
#define VL_d     8
#define ACC_d    __m256i
#define ES_q     8
#define VL_q     4
#define ACC_q    __m256i
#define ES_ps    4
#define VL_ps    8
#define ACC_ps   __m256
#define ES_pd    8
#define VL_pd    4
#define ACC_pd   __m256d
#define ES_f16   2
#define VL_f16   8
#define ACC_f16  __m256
#define ES_bf16  2
#define VL_bf16  8
#define ACC_bf16 __m256
#define ES_i8a   1
#define VL_i8a   8
#define ACC_i8a  __m256
#define ES_u8a   1
#define VL_u8a   8
#define ACC_u8a  __m256
#define ES_i32a  4
#define VL_i32a  4
#define ACC_i32a __m256d
#define ES_u32a  4
#define VL_u32a  4
#define ACC_u32a __m256d

/* Loads. */

static inline __m256i ld_si(const unsigned char *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

#define ld_b ld_si
#define ld_d ld_si
#define ld_q ld_si

static inline __m256 ld_ps(const unsigned char *p)
{
	return _mm256_loadu_ps((const float *)p);
}

static inline __m256d ld_pd(const unsigned char *p)
{
	return _mm256_loadu_pd((const double *)p);
}

static inline __m128i ld_128(const unsigned char *p)
{
	return _mm_loadu_si128((const __m128i *)p);
}

/* VCVTPH2PS is exact and quiets a signalling NaN; the reference keeps it signalling in
 * float32, but every float16 result is narrowed, which quiets it anyway. */
static inline __m256 ld_f16(const unsigned char *p)
{
	return _mm256_cvtph_ps(ld_128(p));
}

static inline __m256 ld_bf16(const unsigned char *p)
{
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(ld_128(p)), 16));
}

static inline __m256 ld_i8a(const unsigned char *p)
{
	return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

static inline __m256 ld_u8a(const unsigned char *p)
{
	return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

static inline __m256d ld_i32a(const unsigned char *p)
{
	return _mm256_cvtepi32_pd(ld_128(p));
}

/* No unsigned conversion before AVX-512: flip the top bit, convert signed, add 2^31 back
 * (exact in float64). */
static inline __m256d ld_u32a(const unsigned char *p)
{
	__m128i x = _mm_xor_si128(ld_128(p), _mm_set1_epi32(INT32_MIN));

	return _mm256_add_pd(_mm256_cvtepi32_pd(x), _mm256_set1_pd(2147483648.0));
}

/* Stores. Each takes nsrc, which only the AVG ones use. */

static inline void st_si(unsigned char *p, __m256i a, int nsrc)
{
	_mm256_storeu_si256((__m256i *)p, a);
}

#define st_b st_si
#define st_d st_si
#define st_q st_si

static inline void st_ps(unsigned char *p, __m256 a, int nsrc)
{
	_mm256_storeu_ps((float *)p, a);
}

static inline void st_ps_avg(unsigned char *p, __m256 a, int nsrc)
{
	st_ps(p, _mm256_div_ps(a, _mm256_set1_ps((float)nsrc)), nsrc);
}

static inline void st_pd(unsigned char *p, __m256d a, int nsrc)
{
	_mm256_storeu_pd((double *)p, a);
}

static inline void st_pd_avg(unsigned char *p, __m256d a, int nsrc)
{
	st_pd(p, _mm256_div_pd(a, _mm256_set1_pd((double)nsrc)), nsrc);
}

static inline void st_128(unsigned char *p, __m128i a)
{
	_mm_storeu_si128((__m128i *)p, a);
}

/* VCVTPS2PH with an explicit round-to-nearest-even: agrees with f32_to_f16() on all 2^32
 * inputs, NaNs included (checked exhaustively, docs/KERNELS.md). */
static inline void st_f16(unsigned char *p, __m256 a, int nsrc)
{
	st_128(p, _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
}

static inline void st_f16_avg(unsigned char *p, __m256 a, int nsrc)
{
	st_f16(p, _mm256_div_ps(a, _mm256_set1_ps((float)nsrc)), nsrc);
}

/* f32_to_bf16() in integers: a NaN keeps its top bits and is quieted; everything else adds
 * 0x7fff plus the lowest kept bit and drops the low half. */
static inline void st_bf16(unsigned char *p, __m256 a, int nsrc)
{
	__m256i x = _mm256_castps_si256(a);
	__m256i hi = _mm256_srli_epi32(x, 16);
	__m256i bias =
	    _mm256_add_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7fff));
	__m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
	__m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi32(0x0040));
	__m256i nan = _mm256_castps_si256(_mm256_cmp_ps(a, a, _CMP_UNORD_Q));
	__m256i r = _mm256_blendv_epi8(rounded, quiet, nan);

	st_128(p, _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
}

static inline void st_bf16_avg(unsigned char *p, __m256 a, int nsrc)
{
	st_bf16(p, _mm256_div_ps(a, _mm256_set1_ps((float)nsrc)), nsrc);
}

/* Integer AVG, 8-bit: the 8 quotients as int16. The exact sum divided in floating point and
 * truncated toward zero is the exact quotient truncated (SIMD_AVG_MAX_NSRC). */
static inline __m128i avg_to_i16(__m256 a, int nsrc)
{
	__m256i q = _mm256_cvttps_epi32(_mm256_div_ps(a, _mm256_set1_ps((float)nsrc)));

	return _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
}

static inline void st_i8a(unsigned char *p, __m256 a, int nsrc)
{
	__m128i w = avg_to_i16(a, nsrc);

	_mm_storel_epi64((__m128i *)p, _mm_packs_epi16(w, w));
}

static inline void st_u8a(unsigned char *p, __m256 a, int nsrc)
{
	__m128i w = avg_to_i16(a, nsrc);

	_mm_storel_epi64((__m128i *)p, _mm_packus_epi16(w, w));
}

static inline void st_i32a(unsigned char *p, __m256d a, int nsrc)
{
	st_128(p, _mm256_cvttpd_epi32(_mm256_div_pd(a, _mm256_set1_pd((double)nsrc))));
}

/* The quotient is >= 0, so truncating is flooring; the floor is an integer, so moving it into
 * the signed range and back is exact. */
static inline void st_u32a(unsigned char *p, __m256d a, int nsrc)
{
	__m256d q = _mm256_div_pd(a, _mm256_set1_pd((double)nsrc));
	__m256d f = _mm256_round_pd(q, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
	__m128i s = _mm256_cvttpd_epi32(_mm256_sub_pd(f, _mm256_set1_pd(2147483648.0)));

	st_128(p, _mm_xor_si128(s, _mm_set1_epi32(INT32_MIN)));
}

/* Partial units pass through a zeroed buffer on the stack, so the vector code computes them
 * too and only the n elements are read and written. Once per call, at most VL - 1 elements. */
#define TAIL_LD(fam)                                                                               \
	static inline ACC_##fam ld_##fam##_n(const unsigned char *p, size_t n)                     \
	{                                                                                          \
		unsigned char buf[ES_##fam * VL_##fam] = {0};                                      \
		memcpy(buf, p, (ES_##fam) * n);                                                    \
		return ld_##fam(buf);                                                              \
	}
#define TAIL_ST(st, fam)                                                                           \
	static inline void st##_n(unsigned char *p, ACC_##fam a, int nsrc, size_t n)               \
	{                                                                                          \
		unsigned char buf[ES_##fam * VL_##fam];                                            \
		st(buf, a, nsrc);                                                                  \
		memcpy(p, buf, (ES_##fam) * n);                                                    \
	}

TAIL_LD(b)
TAIL_LD(d)
TAIL_LD(q)
TAIL_LD(ps)
TAIL_LD(pd)
TAIL_LD(f16)
TAIL_LD(bf16)
TAIL_LD(i8a)
TAIL_LD(u8a)
TAIL_LD(i32a)
TAIL_LD(u32a)
TAIL_ST(st_b, b)
TAIL_ST(st_d, d)
TAIL_ST(st_q, q)
TAIL_ST(st_ps, ps)
TAIL_ST(st_ps_avg, ps)
TAIL_ST(st_pd, pd)
TAIL_ST(st_pd_avg, pd)
TAIL_ST(st_f16, f16)
TAIL_ST(st_f16_avg, f16)
TAIL_ST(st_bf16, bf16)
TAIL_ST(st_bf16_avg, bf16)
TAIL_ST(st_i8a, i8a)
TAIL_ST(st_u8a, u8a)
TAIL_ST(st_i32a, i32a)
TAIL_ST(st_u32a, u32a)

/* Integer folds. Products keep the low bits, which is wrapping. */

static inline __m256i add_b(__m256i a, __m256i b)
{
	return _mm256_add_epi8(a, b);
}

static inline __m256i add_d(__m256i a, __m256i b)
{
	return _mm256_add_epi32(a, b);
}

static inline __m256i add_q(__m256i a, __m256i b)
{
	return _mm256_add_epi64(a, b);
}

/* No 8-bit multiply: the low byte of a 16-bit product depends only on the low bytes of the
 * factors, so multiply the even bytes in place and the odd ones shifted down. */
static inline __m256i mul_b(__m256i a, __m256i b)
{
	__m256i even = _mm256_mullo_epi16(a, b);
	__m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));

	return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0xff)),
	                       _mm256_slli_epi16(odd, 8));
}

static inline __m256i mul_d(__m256i a, __m256i b)
{
	return _mm256_mullo_epi32(a, b);
}

/* No 64-bit multiply: lo*lo + ((hi*lo + lo*hi) << 32) modulo 2^64. */
static inline __m256i mul_q(__m256i a, __m256i b)
{
	__m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
	                                 _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));

	return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
}

static inline __m256i min_i8(__m256i a, __m256i b)
{
	return _mm256_min_epi8(a, b);
}

static inline __m256i max_i8(__m256i a, __m256i b)
{
	return _mm256_max_epi8(a, b);
}

static inline __m256i min_u8(__m256i a, __m256i b)
{
	return _mm256_min_epu8(a, b);
}

static inline __m256i max_u8(__m256i a, __m256i b)
{
	return _mm256_max_epu8(a, b);
}

static inline __m256i min_i32(__m256i a, __m256i b)
{
	return _mm256_min_epi32(a, b);
}

static inline __m256i max_i32(__m256i a, __m256i b)
{
	return _mm256_max_epi32(a, b);
}

static inline __m256i min_u32(__m256i a, __m256i b)
{
	return _mm256_min_epu32(a, b);
}

static inline __m256i max_u32(__m256i a, __m256i b)
{
	return _mm256_max_epu32(a, b);
}

/* No 64-bit min/max before AVX-512: compare and blend; unsigned compares with the top bits
 * flipped. */
static inline __m256i min_i64(__m256i a, __m256i b)
{
	return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b));
}

static inline __m256i max_i64(__m256i a, __m256i b)
{
	return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(b, a));
}

static inline __m256i flip64(__m256i a)
{
	return _mm256_xor_si256(a, _mm256_set1_epi64x(INT64_MIN));
}

static inline __m256i min_u64(__m256i a, __m256i b)
{
	return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(flip64(a), flip64(b)));
}

static inline __m256i max_u64(__m256i a, __m256i b)
{
	return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(flip64(b), flip64(a)));
}

static inline __m256i and_si(__m256i a, __m256i b)
{
	return _mm256_and_si256(a, b);
}

static inline __m256i or_si(__m256i a, __m256i b)
{
	return _mm256_or_si256(a, b);
}

static inline __m256i xor_si(__m256i a, __m256i b)
{
	return _mm256_xor_si256(a, b);
}

/* Float folds (C_FADD, C_FMUL, C_FMIN, C_FMAX in kernels.c). SUM/PROD: a NaN accumulator
 * meets itself instead of b, so the operands are one NaN twice or hold at most one NaN, and
 * the result (that NaN, quieted) does not depend on the operand order, which the compiler may
 * swap. MIN/MAX take b where it is strictly better, or a NaN over a non-NaN: NGE_UQ is
 * "b < a or unordered", masked to an ordered a. */

static inline __m256 sum_ps(__m256 a, __m256 b)
{
	return _mm256_add_ps(a, _mm256_blendv_ps(b, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q)));
}

static inline __m256 prod_ps(__m256 a, __m256 b)
{
	return _mm256_mul_ps(a, _mm256_blendv_ps(b, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q)));
}

static inline __m256 min_ps(__m256 a, __m256 b)
{
	__m256 take =
	    _mm256_and_ps(_mm256_cmp_ps(a, a, _CMP_ORD_Q), _mm256_cmp_ps(b, a, _CMP_NGE_UQ));

	return _mm256_blendv_ps(a, b, take);
}

static inline __m256 max_ps(__m256 a, __m256 b)
{
	__m256 take =
	    _mm256_and_ps(_mm256_cmp_ps(a, a, _CMP_ORD_Q), _mm256_cmp_ps(b, a, _CMP_NLE_UQ));

	return _mm256_blendv_ps(a, b, take);
}

static inline __m256d sum_pd(__m256d a, __m256d b)
{
	return _mm256_add_pd(a, _mm256_blendv_pd(b, a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q)));
}

static inline __m256d prod_pd(__m256d a, __m256d b)
{
	return _mm256_mul_pd(a, _mm256_blendv_pd(b, a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q)));
}

static inline __m256d min_pd(__m256d a, __m256d b)
{
	__m256d take =
	    _mm256_and_pd(_mm256_cmp_pd(a, a, _CMP_ORD_Q), _mm256_cmp_pd(b, a, _CMP_NGE_UQ));

	return _mm256_blendv_pd(a, b, take);
}

static inline __m256d max_pd(__m256d a, __m256d b)
{
	__m256d take =
	    _mm256_and_pd(_mm256_cmp_pd(a, a, _CMP_ORD_Q), _mm256_cmp_pd(b, a, _CMP_NLE_UQ));

	return _mm256_blendv_pd(a, b, take);
}

/* Integer AVG accumulators hold exact integers: no NaN can occur. */
static inline __m256 addx_ps(__m256 a, __m256 b)
{
	return _mm256_add_ps(a, b);
}

static inline __m256d addx_pd(__m256d a, __m256d b)
{
	return _mm256_add_pd(a, b);
}

#define VEC_TABLE shmcoll__kernels_avx2
#include "lib/kernels/kernels_vec.h"
