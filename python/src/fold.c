/* fold.c - the folds of the reductions the library does not do (fold.h): one kernel per
 * predefined op and basic kind MPI defines it on, and one table that says which those are.
 * The results follow lib/kernels/kernels.c's scalar kernels, the library's specification:
 * integers wrap, float16 and bfloat16 compute in float and round to nearest even, and NaNs
 * propagate by the same rule. */
#include "fold.h"
#include "lib/kernels/halfprec.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* As in the library: the float folds are specified in the precision of their type. */
_Static_assert(FLT_EVAL_METHOD == 0, "float arithmetic must be evaluated in its own type");
_Static_assert(sizeof(int) == 4, "MAXLOC's pairs hold a 32-bit int");

/* ---- the kernels ---- */

#define AS_IS(x) (x)

/* A kernel over elements stored as S, computed as A: a = LIFT(in[i]), b = LIFT(inout[i]),
 * inout[i] = DROP(EXPR). Loads and stores through memcpy: packed data has no alignment. */
#define DEFINE_FOLD(name, S, A, LIFT, DROP, EXPR)                                                  \
	static void name(const char *restrict in, char *restrict io, size_t n)                     \
	{                                                                                          \
		for (size_t i = 0; i < n; i++) {                                                   \
			S x, y, r;                                                                 \
			memcpy(&x, in + i * sizeof(S), sizeof(S));                                 \
			memcpy(&y, io + i * sizeof(S), sizeof(S));                                 \
			{                                                                          \
				A a = LIFT(x), b = LIFT(y);                                        \
				r = DROP(EXPR);                                                    \
			}                                                                          \
			memcpy(io + i * sizeof(S), &r, sizeof(S));                                 \
		}                                                                                  \
	}

/* Integers of one width, on the unsigned type: SUM and PROD wrap instead of overflowing
 * (the 1u keeps a product of types narrower than int unsigned), signed and unsigned share
 * the bits. The logical ops give 0 or 1. */
#define WIDTH_FOLDS(U)                                                                             \
	DEFINE_FOLD(U##_sum, U##_t, U##_t, AS_IS, AS_IS, (U##_t)(a + b))                           \
	DEFINE_FOLD(U##_prod, U##_t, U##_t, AS_IS, AS_IS, (U##_t)(1u * a * b))                     \
	DEFINE_FOLD(U##_land, U##_t, U##_t, AS_IS, AS_IS, (U##_t)((a != 0) & (b != 0)))            \
	DEFINE_FOLD(U##_lor, U##_t, U##_t, AS_IS, AS_IS, (U##_t)((a != 0) | (b != 0)))             \
	DEFINE_FOLD(U##_lxor, U##_t, U##_t, AS_IS, AS_IS, (U##_t)((a != 0) ^ (b != 0)))            \
	DEFINE_FOLD(U##_band, U##_t, U##_t, AS_IS, AS_IS, (U##_t)(a & b))                          \
	DEFINE_FOLD(U##_bor, U##_t, U##_t, AS_IS, AS_IS, (U##_t)(a | b))                           \
	DEFINE_FOLD(U##_bxor, U##_t, U##_t, AS_IS, AS_IS, (U##_t)(a ^ b))

/* MIN and MAX need the sign. */
#define ORDER_FOLDS(T)                                                                             \
	DEFINE_FOLD(T##_min, T##_t, T##_t, AS_IS, AS_IS, b < a ? b : a)                            \
	DEFINE_FOLD(T##_max, T##_t, T##_t, AS_IS, AS_IS, b > a ? b : a)

/* Floats, as the library's C_FADD, C_FMUL, C_FMIN and C_FMAX with a the lower rank's: a NaN
 * a meets itself, so the first NaN of the fold wins, quieted; MIN and MAX keep a unless b is
 * strictly better or a NaN replacing a non-NaN (the first of equal values, -0 and +0, stays). */
#define FLOAT_FOLDS(p, S, A, LIFT, DROP)                                                           \
	DEFINE_FOLD(p##_sum, S, A, LIFT, DROP, a + (isnan(a) ? a : b))                             \
	DEFINE_FOLD(p##_prod, S, A, LIFT, DROP, a *(isnan(a) ? a : b))                             \
	DEFINE_FOLD(p##_min, S, A, LIFT, DROP, b < a || (isnan(b) && !isnan(a)) ? b : a)           \
	DEFINE_FOLD(p##_max, S, A, LIFT, DROP, b > a || (isnan(b) && !isnan(a)) ? b : a)

/* Complex: SUM is its parts' float SUM; PROD is the plain formula NumPy and C99 without
 * Annex G's recovery of infinities compute, (ar br - ai bi) + (ar bi + ai br) i. */
#define COMPLEX_FOLDS(p, T, re)                                                                    \
	static void p##_sum(const char *restrict in, char *restrict io, size_t n)                  \
	{                                                                                          \
		re##_sum(in, io, 2 * n);                                                           \
	}                                                                                          \
	static void p##_prod(const char *restrict in, char *restrict io, size_t n)                 \
	{                                                                                          \
		for (size_t i = 0; i < n; i++) {                                                   \
			T x[2], y[2], r[2];                                                        \
			memcpy(x, in + i * sizeof(x), sizeof(x));                                  \
			memcpy(y, io + i * sizeof(y), sizeof(y));                                  \
			r[0] = x[0] * y[0] - x[1] * y[1];                                          \
			r[1] = x[0] * y[1] + x[1] * y[0];                                          \
			memcpy(io + i * sizeof(r), r, sizeof(r));                                  \
		}                                                                                  \
	}

/* MAXLOC and MINLOC on (value V, int index) pairs, packed: MPI's definition, as Open MPI
 * computes it. The better value wins; of equal values the smaller index; a NaN value is
 * neither (inout stays). */
#define DEFINE_LOC(name, V, CMP)                                                                   \
	static void name(const char *restrict in, char *restrict io, size_t n)                     \
	{                                                                                          \
		const size_t sz = sizeof(V) + sizeof(int32_t);                                     \
		for (size_t i = 0; i < n; i++) {                                                   \
			V u, v;                                                                    \
			int32_t iu, iv;                                                            \
			memcpy(&u, in + i * sz, sizeof(V));                                        \
			memcpy(&iu, in + i * sz + sizeof(V), sizeof(iu));                          \
			memcpy(&v, io + i * sz, sizeof(V));                                        \
			memcpy(&iv, io + i * sz + sizeof(V), sizeof(iv));                          \
			if (u CMP v || (u == v && iu < iv))                                        \
				memcpy(io + i * sz, in + i * sz, sz);                              \
		}                                                                                  \
	}
#define LOC_FOLDS(p, V)                                                                            \
	DEFINE_LOC(p##_maxloc, V, >)                                                               \
	DEFINE_LOC(p##_minloc, V, <)

WIDTH_FOLDS(uint8)
WIDTH_FOLDS(uint16)
WIDTH_FOLDS(uint32)
WIDTH_FOLDS(uint64)
ORDER_FOLDS(int8)
ORDER_FOLDS(int16)
ORDER_FOLDS(int32)
ORDER_FOLDS(int64)
ORDER_FOLDS(uint8)
ORDER_FOLDS(uint16)
ORDER_FOLDS(uint32)
ORDER_FOLDS(uint64)
FLOAT_FOLDS(f16, uint16_t, float, f16_to_f32, f32_to_f16)
FLOAT_FOLDS(bf16, uint16_t, float, bf16_to_f32, f32_to_bf16)
FLOAT_FOLDS(f32, float, float, AS_IS, AS_IS)
FLOAT_FOLDS(f64, double, double, AS_IS, AS_IS)
FLOAT_FOLDS(fld, long double, long double, AS_IS, AS_IS)
COMPLEX_FOLDS(c64, float, f32)
COMPLEX_FOLDS(c128, double, f64)
COMPLEX_FOLDS(cld, long double, fld)
LOC_FOLDS(short_int, int16_t)
LOC_FOLDS(two_int, int32_t)
LOC_FOLDS(long_int, int64_t)
LOC_FOLDS(float_int, float)
LOC_FOLDS(double_int, double)
LOC_FOLDS(ld_int, long double)

/* ---- the table: what MPI-3.1 5.9.2 defines ----
 * MIN, MAX: integers and floats. SUM, PROD (and shmcoll's AVG): integers, floats, complex.
 * LAND, LOR, LXOR: integers and C_BOOL. BAND, BOR, BXOR: integers and bytes. MAXLOC, MINLOC:
 * the pairs. Every kind has its own entries; an absent one is NULL. */

#define INT_ROW(U, T)                                                                              \
	{                                                                                          \
		[OP_SUM] = U##_sum, [OP_PROD] = U##_prod, [OP_MIN] = T##_min, [OP_MAX] = T##_max,  \
		[OP_AVG] = U##_sum, [OP_LAND] = U##_land, [OP_BAND] = U##_band,                    \
		[OP_LOR] = U##_lor, [OP_BOR] = U##_bor, [OP_LXOR] = U##_lxor,                      \
		[OP_BXOR] = U##_bxor,                                                              \
	}
#define FLOAT_ROW(p)                                                                               \
	{                                                                                          \
		[OP_SUM] = p##_sum, [OP_PROD] = p##_prod, [OP_MIN] = p##_min, [OP_MAX] = p##_max,  \
		[OP_AVG] = p##_sum,                                                                \
	}
#define COMPLEX_ROW(p)                                                                             \
	{                                                                                          \
		[OP_SUM] = p##_sum, [OP_PROD] = p##_prod, [OP_AVG] = p##_sum,                      \
	}
#define LOC_ROW(p)                                                                                 \
	{                                                                                          \
		[OP_MAXLOC] = p##_maxloc, [OP_MINLOC] = p##_minloc,                                \
	}

static const py__fold_fn table[B_COUNT][OP_COUNT] = {
    [B_BYTE] = {[OP_BAND] = uint8_band, [OP_BOR] = uint8_bor, [OP_BXOR] = uint8_bxor},
    /* C_BOOL is read as a byte: a _Bool load of another value than 0 or 1 is undefined. */
    [B_BOOL] = {[OP_LAND] = uint8_land, [OP_LOR] = uint8_lor, [OP_LXOR] = uint8_lxor},
    [B_I8] = INT_ROW(uint8, int8),
    [B_I16] = INT_ROW(uint16, int16),
    [B_I32] = INT_ROW(uint32, int32),
    [B_I64] = INT_ROW(uint64, int64),
    [B_U8] = INT_ROW(uint8, uint8),
    [B_U16] = INT_ROW(uint16, uint16),
    [B_U32] = INT_ROW(uint32, uint32),
    [B_U64] = INT_ROW(uint64, uint64),
    [B_F16] = FLOAT_ROW(f16),
    [B_BF16] = FLOAT_ROW(bf16),
    [B_F32] = FLOAT_ROW(f32),
    [B_F64] = FLOAT_ROW(f64),
    [B_FLD] = FLOAT_ROW(fld),
    [B_C64] = COMPLEX_ROW(c64),
    [B_C128] = COMPLEX_ROW(c128),
    [B_CLD] = COMPLEX_ROW(cld),
    [B_SHORT_INT] = LOC_ROW(short_int),
    [B_2INT] = LOC_ROW(two_int),
    [B_LONG_INT] = LOC_ROW(long_int),
    [B_FLOAT_INT] = LOC_ROW(float_int),
    [B_DOUBLE_INT] = LOC_ROW(double_int),
    [B_LD_INT] = LOC_ROW(ld_int),
};

py__fold_fn py__fold_lookup(int kind, int basic)
{
	if ((unsigned)kind >= OP_COUNT || (unsigned)basic >= B_COUNT)
		return NULL;
	return table[basic][kind];
}

/* ---- AVG ---- */

/* Integers: C's division truncates toward zero; size > 0 converts to the unsigned types as
 * it is, and a quotient lies between 0 and the sum, so it fits. */
#define DEFINE_IAVG(name, T)                                                                       \
	static void name(char *buf, size_t n, int size)                                            \
	{                                                                                          \
		for (size_t i = 0; i < n; i++) {                                                   \
			T x;                                                                       \
			memcpy(&x, buf + i * sizeof(T), sizeof(T));                                \
			x = (T)(x / size);                                                         \
			memcpy(buf + i * sizeof(T), &x, sizeof(T));                                \
		}                                                                                  \
	}

/* Floats divide (not multiply by 1/size), in float for the 16-bit ones, rounded once. */
#define DEFINE_FAVG(name, S, A, LIFT, DROP)                                                        \
	static void name(char *buf, size_t n, int size)                                            \
	{                                                                                          \
		for (size_t i = 0; i < n; i++) {                                                   \
			S x;                                                                       \
			memcpy(&x, buf + i * sizeof(S), sizeof(S));                                \
			x = DROP(LIFT(x) / (A)size);                                               \
			memcpy(buf + i * sizeof(S), &x, sizeof(S));                                \
		}                                                                                  \
	}

DEFINE_IAVG(int8_avg, int8_t)
DEFINE_IAVG(int16_avg, int16_t)
DEFINE_IAVG(int32_avg, int32_t)
DEFINE_IAVG(int64_avg, int64_t)
DEFINE_IAVG(uint8_avg, uint8_t)
DEFINE_IAVG(uint16_avg, uint16_t)
DEFINE_IAVG(uint32_avg, uint32_t)
DEFINE_IAVG(uint64_avg, uint64_t)
DEFINE_FAVG(f16_avg, uint16_t, float, f16_to_f32, f32_to_f16)
DEFINE_FAVG(bf16_avg, uint16_t, float, bf16_to_f32, f32_to_bf16)
DEFINE_FAVG(f32_avg, float, float, AS_IS, AS_IS)
DEFINE_FAVG(f64_avg, double, double, AS_IS, AS_IS)
DEFINE_FAVG(fld_avg, long double, long double, AS_IS, AS_IS)

void py__fold_avg(int basic, char *buf, size_t n, int size)
{
	switch (basic) {
	case B_I8:
		int8_avg(buf, n, size);
		break;
	case B_I16:
		int16_avg(buf, n, size);
		break;
	case B_I32:
		int32_avg(buf, n, size);
		break;
	case B_I64:
		int64_avg(buf, n, size);
		break;
	case B_U8:
		uint8_avg(buf, n, size);
		break;
	case B_U16:
		uint16_avg(buf, n, size);
		break;
	case B_U32:
		uint32_avg(buf, n, size);
		break;
	case B_U64:
		uint64_avg(buf, n, size);
		break;
	case B_F16:
		f16_avg(buf, n, size);
		break;
	case B_BF16:
		bf16_avg(buf, n, size);
		break;
	case B_F32:
		f32_avg(buf, n, size);
		break;
	case B_F64:
		f64_avg(buf, n, size);
		break;
	case B_FLD:
		fld_avg(buf, n, size);
		break;
	case B_C64: /* both parts */
		f32_avg(buf, 2 * n, size);
		break;
	case B_C128:
		f64_avg(buf, 2 * n, size);
		break;
	case B_CLD:
		fld_avg(buf, 2 * n, size);
		break;
	default: /* no AVG on the others: py__op_check refused them */
		break;
	}
}
