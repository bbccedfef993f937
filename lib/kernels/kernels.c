/* kernels.c - the scalar reduction kernels, which define every reduction result bit for bit,
 * the float16/bfloat16 conversions, CPU detection and the ISA ladder that hands out kernels. */

#include "lib/kernels/halfprec.h"
#include "lib/kernels/kernels.h"
#include "lib/kernels/kernels_impl.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

/* The float folds are specified in the precision of their type; a target that evaluates
 * float expressions wider (x87) would give other bits. */
_Static_assert(FLT_EVAL_METHOD == 0, "float arithmetic must be evaluated in its own type");

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

/* Elements folded per pass. Each source is streamed over a block of accumulators, so the inner
 * loop is a plain element-wise loop the compiler can vectorise; 256 keeps the largest block
 * (128-bit AVG accumulators, 4 KiB) inside L1. The order of operations per element is still
 * the left fold src0, src1, ..., so the result does not depend on the block size. */
#define BLOCK 256

float shmcoll__f16_to_f32(uint16_t h)
{
	return f16_to_f32(h);
}

uint16_t shmcoll__f32_to_f16(float f)
{
	return f32_to_f16(f);
}

float shmcoll__bf16_to_f32(uint16_t h)
{
	return bf16_to_f32(h);
}

uint16_t shmcoll__f32_to_bf16(float f)
{
	return f32_to_bf16(f);
}

/* The float SUM/PROD step (C_FADD below says why). The choice is between operands, not
 * between a result and an operation in a branch: gcc does not speculate a float operation
 * that may trap, so it would not vectorise a loop with the arithmetic in a branch. */
static inline float fadd_f(float a, float b)
{
	return a + (isnan(a) ? a : b);
}

static inline double fadd_d(double a, double b)
{
	return a + (isnan(a) ? a : b);
}

static inline float fmul_f(float a, float b)
{
	return a * (isnan(a) ? a : b);
}

static inline double fmul_d(double a, double b)
{
	return a * (isnan(a) ? a : b);
}

/* Kernel generator. A kernel loads elements of storage type S, lifts each into accumulator
 * type A, folds them left with COMBINE(A, acc, next) and stores FINISH(S, A, acc, nsrc).
 * Loads and stores go through memcpy, so no alignment is assumed; fixed-size memcpy compiles
 * to plain moves. */
#define DEFINE_KERNEL(name, S, A, LIFT, COMBINE, FINISH)                                           \
	static void name(void *restrict dst, const void *const *restrict srcs, int nsrc,           \
	                 size_t count)                                                             \
	{                                                                                          \
		unsigned char *d = dst;                                                            \
		A acc[BLOCK];                                                                      \
		assert(nsrc >= 1);                                                                 \
		for (size_t base = 0; base < count; base += BLOCK) {                               \
			size_t n = count - base < BLOCK ? count - base : BLOCK;                    \
			const unsigned char *s =                                                   \
			    (const unsigned char *)srcs[0] + base * sizeof(S);                     \
			for (size_t j = 0; j < n; j++) {                                           \
				S v;                                                               \
				memcpy(&v, s + j * sizeof(S), sizeof(S));                          \
				acc[j] = LIFT(A, v);                                               \
			}                                                                          \
			for (int k = 1; k < nsrc; k++) {                                           \
				s = (const unsigned char *)srcs[k] + base * sizeof(S);             \
				for (size_t j = 0; j < n; j++) {                                   \
					S v;                                                       \
					memcpy(&v, s + j * sizeof(S), sizeof(S));                  \
					acc[j] = COMBINE(A, acc[j], LIFT(A, v));                   \
				}                                                                  \
			}                                                                          \
			for (size_t j = 0; j < n; j++) {                                           \
				S v = FINISH(S, A, acc[j], nsrc);                                  \
				memcpy(d + (base + j) * sizeof(S), &v, sizeof(S));                 \
			}                                                                          \
		}                                                                                  \
	}

#define LIFT_CAST(A, v) ((A)(v))
#define LIFT_F16(A, v)  f16_to_f32(v)
#define LIFT_BF16(A, v) bf16_to_f32(v)

/* Integer SUM and PROD run on the unsigned type, so they wrap instead of overflowing;
 * the 1u keeps a product of types narrower than int in unsigned arithmetic. */
#define C_ADD(A, a, b) ((A)((a) + (b)))
#define C_MUL(A, a, b) ((A)(1u * (a) * (b)))
/* Float SUM/PROD: a NaN accumulator meets itself instead of the next source, so the first
 * NaN of the fold wins, quieted: a NaN source or the default NaN of an invalid operation
 * (inf - inf, 0 * inf). C leaves the operand order of a + b to the compiler, and x86 returns
 * the first operand when both are NaNs, so a plain a + b would give the compiler's choice of
 * payload; here both operands are the same NaN, or at most one is a NaN, and the hardware
 * returns that NaN quieted whatever the order. */
#define C_FADD(A, a, b) _Generic((a), float : fadd_f, double : fadd_d)((a), (b))
#define C_FMUL(A, a, b) _Generic((a), float : fmul_f, double : fmul_d)((a), (b))
#define C_MIN(A, a, b)  ((b) < (a) ? (b) : (a))
#define C_MAX(A, a, b)  ((b) > (a) ? (b) : (a))
#define C_BAND(A, a, b) ((A)((a) & (b)))
#define C_BOR(A, a, b)  ((A)((a) | (b)))
#define C_BXOR(A, a, b) ((A)((a) ^ (b)))
/* Float MIN/MAX: the accumulator is replaced only by a strictly better value, so the first
 * of equal values (-0 and +0 included) stays; a NaN replaces a non-NaN accumulator and is
 * never replaced, so the first NaN in source order wins. */
#define C_FMIN(A, a, b) ((b) < (a) || (isnan(b) && !isnan(a)) ? (b) : (a))
#define C_FMAX(A, a, b) ((b) > (a) || (isnan(b) && !isnan(a)) ? (b) : (a))

#define FIN_SAME(S, A, a, n) (a)
/* Integer AVG: the accumulator is wide enough for the exact sum of INT_MAX sources, and C
 * division truncates toward zero; the quotient lies between the extreme sources, so it fits. */
#define FIN_IAVG(S, A, a, n)    ((S)((a) / (A)(n)))
#define FIN_FAVG(S, A, a, n)    ((a) / (A)(n))
#define FIN_F16(S, A, a, n)     f32_to_f16(a)
#define FIN_F16AVG(S, A, a, n)  f32_to_f16((a) / (float)(n))
#define FIN_BF16(S, A, a, n)    f32_to_bf16(a)
#define FIN_BF16AVG(S, A, a, n) f32_to_bf16((a) / (float)(n))

/* One integer dtype: T its type, U the unsigned type of the same width, W the AVG
 * accumulator. Same-width unsigned and signed types share their bits, so storing U is
 * storing the wrapped T. */
#define DEFINE_INT_KERNELS(p, T, U, W)                                                             \
	DEFINE_KERNEL(p##_sum, U, U, LIFT_CAST, C_ADD, FIN_SAME)                                   \
	DEFINE_KERNEL(p##_prod, U, U, LIFT_CAST, C_MUL, FIN_SAME)                                  \
	DEFINE_KERNEL(p##_min, T, T, LIFT_CAST, C_MIN, FIN_SAME)                                   \
	DEFINE_KERNEL(p##_max, T, T, LIFT_CAST, C_MAX, FIN_SAME)                                   \
	DEFINE_KERNEL(p##_avg, T, W, LIFT_CAST, C_ADD, FIN_IAVG)                                   \
	DEFINE_KERNEL(p##_band, U, U, LIFT_CAST, C_BAND, FIN_SAME)                                 \
	DEFINE_KERNEL(p##_bor, U, U, LIFT_CAST, C_BOR, FIN_SAME)                                   \
	DEFINE_KERNEL(p##_bxor, U, U, LIFT_CAST, C_BXOR, FIN_SAME)

/* float32/float64 accumulate in their own type. */
#define DEFINE_FLOAT_KERNELS(p, T)                                                                 \
	DEFINE_KERNEL(p##_sum, T, T, LIFT_CAST, C_FADD, FIN_SAME)                                  \
	DEFINE_KERNEL(p##_prod, T, T, LIFT_CAST, C_FMUL, FIN_SAME)                                 \
	DEFINE_KERNEL(p##_min, T, T, LIFT_CAST, C_FMIN, FIN_SAME)                                  \
	DEFINE_KERNEL(p##_max, T, T, LIFT_CAST, C_FMAX, FIN_SAME)                                  \
	DEFINE_KERNEL(p##_avg, T, T, LIFT_CAST, C_FADD, FIN_FAVG)

/* float16/bfloat16 fold in float32 and round once at the store, which quiets a NaN. MIN/MAX
 * results are one of the sources, which round-trips exactly (a NaN comes back quieted). */
#define DEFINE_HALF_KERNELS(p, LIFT, FIN, FINAVG)                                                  \
	DEFINE_KERNEL(p##_sum, uint16_t, float, LIFT, C_FADD, FIN)                                 \
	DEFINE_KERNEL(p##_prod, uint16_t, float, LIFT, C_FMUL, FIN)                                \
	DEFINE_KERNEL(p##_min, uint16_t, float, LIFT, C_FMIN, FIN)                                 \
	DEFINE_KERNEL(p##_max, uint16_t, float, LIFT, C_FMAX, FIN)                                 \
	DEFINE_KERNEL(p##_avg, uint16_t, float, LIFT, C_FADD, FINAVG)

DEFINE_INT_KERNELS(i8, int8_t, uint8_t, int64_t)
DEFINE_INT_KERNELS(u8, uint8_t, uint8_t, uint64_t)
DEFINE_INT_KERNELS(i32, int32_t, uint32_t, int64_t)
DEFINE_INT_KERNELS(u32, uint32_t, uint32_t, uint64_t)
DEFINE_INT_KERNELS(i64, int64_t, uint64_t, i128)
DEFINE_INT_KERNELS(u64, uint64_t, uint64_t, u128)
DEFINE_HALF_KERNELS(f16, LIFT_F16, FIN_F16, FIN_F16AVG)
DEFINE_HALF_KERNELS(bf16, LIFT_BF16, FIN_BF16, FIN_BF16AVG)
DEFINE_FLOAT_KERNELS(f32, float)
DEFINE_FLOAT_KERNELS(f64, double)

#define FLOAT_ROW(p)                                                                               \
	{                                                                                          \
		[SHMCOLL_SUM] = p##_sum, [SHMCOLL_PROD] = p##_prod, [SHMCOLL_MIN] = p##_min,       \
		[SHMCOLL_MAX] = p##_max, [SHMCOLL_AVG] = p##_avg,                                  \
	}
#define INT_ROW(p)                                                                                 \
	{                                                                                          \
		[SHMCOLL_SUM] = p##_sum, [SHMCOLL_PROD] = p##_prod, [SHMCOLL_MIN] = p##_min,       \
		[SHMCOLL_MAX] = p##_max, [SHMCOLL_AVG] = p##_avg, [SHMCOLL_BAND] = p##_band,       \
		[SHMCOLL_BOR] = p##_bor, [SHMCOLL_BXOR] = p##_bxor,                                \
	}

/* Entries left out are NULL: the bitwise ops on floating dtypes. */
const shmcoll__kernel_table shmcoll__kernels_scalar = {
    [SHMCOLL_INT8] = INT_ROW(i8),       [SHMCOLL_UINT8] = INT_ROW(u8),
    [SHMCOLL_INT32] = INT_ROW(i32),     [SHMCOLL_UINT32] = INT_ROW(u32),
    [SHMCOLL_INT64] = INT_ROW(i64),     [SHMCOLL_UINT64] = INT_ROW(u64),
    [SHMCOLL_FLOAT16] = FLOAT_ROW(f16), [SHMCOLL_BFLOAT16] = FLOAT_ROW(bf16),
    [SHMCOLL_FLOAT32] = FLOAT_ROW(f32), [SHMCOLL_FLOAT64] = FLOAT_ROW(f64),
};

/* The ladder, lowest level first; NULL where a level is not compiled in (the build leaves a
 * level out when the compiler does not take its flags). */
static const shmcoll__kernel_table *const levels[SHMCOLL_ISA_COUNT] = {
    [SHMCOLL_ISA_SCALAR] = &shmcoll__kernels_scalar,
#ifdef SHMCOLL_HAVE_AVX2
    [SHMCOLL_ISA_AVX2] = &shmcoll__kernels_avx2,
#endif
#ifdef SHMCOLL_HAVE_AVX512
    [SHMCOLL_ISA_AVX512] = &shmcoll__kernels_avx512,
#endif
};

static const char *const isa_names[SHMCOLL_ISA_COUNT] = {"scalar", "avx2", "avx512"};

#if defined(__x86_64__)
/* XCR0: which register state the OS saves and restores, so may be used. */
static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;

	__asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

/* The highest level whose instructions this CPU has and whose registers this OS saves. The
 * AVX2 level needs AVX, AVX2 and F16C, with XCR0 saving XMM and YMM (bits 1, 2); the AVX512
 * level needs the AVX2 level plus AVX-512 F, DQ, BW and VL, with XCR0 also saving the opmask
 * registers and both halves of ZMM0-31 (bits 5, 6, 7). */
static int isa_detect(void)
{
	const unsigned osxsave_avx_f16c = 1u << 27 | 1u << 28 | 1u << 29;
	const unsigned avx512_fdqbwvl = 1u << 16 | 1u << 17 | 1u << 30 | 1u << 31;
	unsigned a, b, c, d;
	uint64_t xcr0;

	if (!__get_cpuid(1, &a, &b, &c, &d) || (c & osxsave_avx_f16c) != osxsave_avx_f16c)
		return SHMCOLL_ISA_SCALAR;
	xcr0 = xgetbv0();
	if ((xcr0 & 0x6) != 0x6)
		return SHMCOLL_ISA_SCALAR;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & 1u << 5))
		return SHMCOLL_ISA_SCALAR;
	if ((b & avx512_fdqbwvl) != avx512_fdqbwvl || (xcr0 & 0xe6) != 0xe6)
		return SHMCOLL_ISA_AVX2;
	return SHMCOLL_ISA_AVX512;
}
#else
static int isa_detect(void)
{
	return SHMCOLL_ISA_SCALAR;
}
#endif

/* Written once, by isa_init() under pthread_once, which orders the writes before every read
 * that follows a pthread_once return. */
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static int isa_top;    /* the highest level compiled in and supported here */
static int isa_chosen; /* isa_top capped by SHMCOLL_ISA */

static void isa_init(void)
{
	const char *cap = getenv("SHMCOLL_ISA");
	int top = isa_detect();

	while (!levels[top])
		top--;
	isa_top = top;
	isa_chosen = top;
	/* An unknown value is ignored: the library never prints, and the default is safe. */
	for (int i = 0; cap && i < SHMCOLL_ISA_COUNT; i++)
		if (strcmp(cap, isa_names[i]) == 0 && i < top)
			isa_chosen = i;
}

int shmcoll__isa_available(int isa)
{
	pthread_once(&isa_once, isa_init);
	return isa >= 0 && isa <= isa_top && levels[isa];
}

int shmcoll__isa_active(void)
{
	pthread_once(&isa_once, isa_init);
	return isa_chosen;
}

const char *shmcoll__isa_name(int isa)
{
	return isa >= 0 && isa < SHMCOLL_ISA_COUNT ? isa_names[isa] : "unknown";
}

shmcoll__reduce_fn shmcoll__reduce_lookup_isa(int isa, shmcoll_dtype dtype, shmcoll_op op)
{
	/* Through unsigned, so a negative value cast to the enum is out of range as well. */
	if ((unsigned)dtype >= (unsigned)SHMCOLL_DTYPE_COUNT ||
	    (unsigned)op >= (unsigned)SHMCOLL_OP_COUNT || !shmcoll__isa_available(isa))
		return NULL;
	/* Down the ladder to the first level that has the pair; the scalar level has every
	 * valid one, so NULL from there means an invalid pair. */
	for (int l = isa; l >= 0; l--)
		if (levels[l] && (*levels[l])[dtype][op])
			return (*levels[l])[dtype][op];
	return NULL;
}

shmcoll__reduce_fn shmcoll__reduce_lookup(shmcoll_dtype dtype, shmcoll_op op)
{
	return shmcoll__reduce_lookup_isa(shmcoll__isa_active(), dtype, op);
}
