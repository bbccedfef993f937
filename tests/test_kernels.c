/* test_kernels.c - the scalar reduction kernels against a reference written here, the kernel
 * table, and the float16/bfloat16 conversions (exhaustive where the domain is 2^16). */

#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/kernels.h"

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

#define MAX_NSRC  8
#define MAX_COUNT 1000
#define CANARY    0xa5

static const int nsrcs[] = {1, 2, 3, 8};
static const size_t counts[] = {0, 1, 7, 33, 1000};

static const char *const dtype_names[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                          "uint64", "float16", "bfloat16", "float32", "float64"};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"};

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* xorshift64*: deterministic, so a failure reproduces. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static size_t dtype_size(shmcoll_dtype dt)
{
	switch (dt) {
	case SHMCOLL_INT8:
	case SHMCOLL_UINT8:
		return 1;
	case SHMCOLL_FLOAT16:
	case SHMCOLL_BFLOAT16:
		return 2;
	case SHMCOLL_INT32:
	case SHMCOLL_UINT32:
	case SHMCOLL_FLOAT32:
		return 4;
	default:
		return 8;
	}
}

static int is_float(shmcoll_dtype dt)
{
	return dt >= SHMCOLL_FLOAT16;
}

static int is_signed_int(shmcoll_dtype dt)
{
	return dt == SHMCOLL_INT8 || dt == SHMCOLL_INT32 || dt == SHMCOLL_INT64;
}

static int pair_valid(int dt, int op)
{
	if (dt < 0 || dt >= SHMCOLL_DTYPE_COUNT || op < 0 || op >= SHMCOLL_OP_COUNT)
		return 0;
	return !(is_float((shmcoll_dtype)dt) && op >= SHMCOLL_BAND);
}

/* Element bits as an unsigned integer; little and big endian alike. */
static uint64_t load_bits(const unsigned char *p, size_t size)
{
	uint8_t b8;
	uint16_t b16;
	uint32_t b32;
	uint64_t b64;

	switch (size) {
	case 1:
		memcpy(&b8, p, 1);
		return b8;
	case 2:
		memcpy(&b16, p, 2);
		return b16;
	case 4:
		memcpy(&b32, p, 4);
		return b32;
	default:
		memcpy(&b64, p, 8);
		return b64;
	}
}

static void store_bits(unsigned char *p, size_t size, uint64_t v)
{
	uint8_t b8 = (uint8_t)v;
	uint16_t b16 = (uint16_t)v;
	uint32_t b32 = (uint32_t)v;

	switch (size) {
	case 1:
		memcpy(p, &b8, 1);
		break;
	case 2:
		memcpy(p, &b16, 2);
		break;
	case 4:
		memcpy(p, &b32, 4);
		break;
	default:
		memcpy(p, &v, 8);
		break;
	}
}

static double bits_f64(uint64_t x)
{
	double d;

	memcpy(&d, &x, sizeof(d));
	return d;
}

static uint64_t f64_bits(double d)
{
	uint64_t x;

	memcpy(&x, &d, sizeof(x));
	return x;
}

static float bits_f32(uint32_t x)
{
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

static uint32_t f32_bits(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	return x;
}

/* 2^e for -1022 <= e <= 1023, built from its bits (no libm). */
static double pow2(int e)
{
	return bits_f64((uint64_t)(e + 1023) << 52);
}

/* Reference decoders, straight from the format definitions. The all-ones exponent is
 * decoded as if it were one more binade, so that the rounding search below sees the value
 * just past the largest finite one; callers handle infinities and NaNs themselves. */
static double ref_f16_value(uint16_t h)
{
	int e = (h >> 10) & 0x1f;
	int m = h & 0x3ff;
	double v = e ? (1024 + m) * pow2(e - 25) : m * pow2(-24);

	return (h & 0x8000) ? -v : v;
}

static double ref_bf16_value(uint16_t h)
{
	int e = (h >> 7) & 0xff;
	int m = h & 0x7f;
	double v = e ? (128 + m) * pow2(e - 134) : m * pow2(-133);

	return (h & 0x8000) ? -v : v;
}

static int f16_isnan(uint16_t h)
{
	return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

static int bf16_isnan(uint16_t h)
{
	return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
}

/* Round a non-NaN value to the 16-bit format by searching the ordered positive encodings
 * for the neighbours, ties to the even encoding; reaching the infinity pattern is overflow. */
static uint16_t ref_round16(double v, double (*value)(uint16_t), uint16_t inf)
{
	uint16_t sign = (f64_bits(v) >> 63) ? 0x8000 : 0;
	double a = sign ? -v : v;
	unsigned lo = 0, hi = inf, p;
	double dl, dh;

	while (lo < hi) {
		unsigned mid = (lo + hi + 1) / 2;

		if (value((uint16_t)mid) <= a)
			lo = mid;
		else
			hi = mid - 1;
	}
	p = lo;
	if (p == inf)
		return sign | inf;
	dl = a - value((uint16_t)p);
	dh = value((uint16_t)(p + 1)) - a;
	if (dl < dh || (dl == dh && !(p & 1)))
		return (uint16_t)(sign | p);
	return (uint16_t)(sign | (p + 1));
}

static uint16_t ref_f16_round(double v)
{
	return ref_round16(v, ref_f16_value, 0x7c00);
}

static uint16_t ref_bf16_round(double v)
{
	return ref_round16(v, ref_bf16_value, 0x7f80);
}

/* Input generation, per dtype and op, chosen so that the float reference below is exact. */

static uint64_t gen_int(void)
{
	static const uint64_t edges[] = {0,           1,         UINT64_MAX,
	                                 0x7f,        0x80,      0x7fffffff,
	                                 0x80000000u, INT64_MAX, (uint64_t)INT64_MAX + 1};

	/* Full-range values so wrapping is exercised, with the edges often enough for AVG. */
	if (rng() % 8 == 0)
		return edges[rng() % (sizeof(edges) / sizeof(edges[0]))];
	return rng();
}

static int64_t small_int(int64_t mag)
{
	return (int64_t)(rng() % (uint64_t)(2 * mag + 1)) - mag;
}

/* A random NaN of the format: random sign and payload, quiet or signalling. */
static uint64_t gen_nan(shmcoll_dtype dt)
{
	uint64_t r = rng();

	switch (dt) {
	case SHMCOLL_FLOAT16:
		return (r & 0x83ff) | 0x7c00 | ((r & 0x3ff) ? 0 : 1);
	case SHMCOLL_BFLOAT16:
		return (r & 0x807f) | 0x7f80 | ((r & 0x7f) ? 0 : 1);
	case SHMCOLL_FLOAT32:
		return (r & 0x807fffffu) | 0x7f800000u | ((r & 0x7fffffu) ? 0 : 1);
	default:
		return (r & 0x800fffffffffffffull) | 0x7ff0000000000000ull |
		       ((r & 0xfffffffffffffull) ? 0 : 1);
	}
}

static int bits_isnan(shmcoll_dtype dt, uint64_t b)
{
	switch (dt) {
	case SHMCOLL_FLOAT16:
		return f16_isnan((uint16_t)b);
	case SHMCOLL_BFLOAT16:
		return bf16_isnan((uint16_t)b);
	case SHMCOLL_FLOAT32:
		return (b & 0x7fffffffu) > 0x7f800000u;
	default:
		return (b & ~(1ull << 63)) > 0x7ff0000000000000ull;
	}
}

/* Encode an exactly representable value (ints, or 16-bit float values built from bits). */
static uint64_t encode_exact(shmcoll_dtype dt, double v)
{
	switch (dt) {
	case SHMCOLL_FLOAT16:
		return ref_f16_round(v);
	case SHMCOLL_BFLOAT16:
		return ref_bf16_round(v);
	case SHMCOLL_FLOAT32:
		return f32_bits((float)v);
	default:
		return f64_bits(v);
	}
}

static uint64_t gen_float(shmcoll_dtype dt, shmcoll_op op)
{
	static const double pool[] = {0.0, -0.0, 1.0, -1.0, 2.0};
	uint64_t r = rng();

	if (op == SHMCOLL_MIN || op == SHMCOLL_MAX) {
		/* Arbitrary non-NaN bits (infinities, subnormals), ties from a small pool, and
		 * now and then a NaN. */
		uint64_t b;

		if (r % 16 == 0)
			return gen_nan(dt);
		if (r % 16 < 6)
			return encode_exact(dt, pool[(r >> 8) % 5]);
		do {
			b = rng();
			b &= dtype_size(dt) == 8 ? UINT64_MAX : (1ull << (8 * dtype_size(dt))) - 1;
		} while (bits_isnan(dt, b));
		return b;
	}
	if (op == SHMCOLL_PROD)
		return encode_exact(dt, (double)small_int(4)); /* |product| <= 2^16 */
	/* SUM and AVG: any value whose sum over 8 sources stays exact in the accumulator type
	 * but not in the 16-bit formats, so the final rounding is exercised. */
	switch (dt) {
	case SHMCOLL_FLOAT16: /* exponents -2..8: multiples of 2^-12 below 2^9 */
		return (r & 0x83ff) | ((13 + (r >> 16) % 11) << 10);
	case SHMCOLL_BFLOAT16: /* exponents -6..7: multiples of 2^-13 below 2^8 */
		return (r & 0x807f) | ((121 + (r >> 16) % 14) << 7);
	case SHMCOLL_FLOAT32:
		return encode_exact(dt, (double)small_int(1 << 20));
	default:
		return encode_exact(dt, (double)small_int(1ll << 49));
	}
}

static double float_value(shmcoll_dtype dt, uint64_t b)
{
	switch (dt) {
	case SHMCOLL_FLOAT16:
		if ((b & 0x7fff) == 0x7c00)
			return (b & 0x8000) ? -INFINITY : INFINITY;
		return ref_f16_value((uint16_t)b);
	case SHMCOLL_BFLOAT16:
		if ((b & 0x7fff) == 0x7f80)
			return (b & 0x8000) ? -INFINITY : INFINITY;
		return ref_bf16_value((uint16_t)b);
	case SHMCOLL_FLOAT32:
		return bits_f32((uint32_t)b);
	default:
		return bits_f64(b);
	}
}

/* The expected result bits for one element, from the source elements' bits v[0..nsrc-1]. */
static uint64_t ref_int(shmcoll_dtype dt, shmcoll_op op, const uint64_t *v, int nsrc)
{
	size_t size = dtype_size(dt);
	unsigned bits = (unsigned)(8 * size);
	u128 mask = ((u128)1 << bits) - 1;
	i128 x[MAX_NSRC], sum = 0, best;
	u128 acc;
	int k;

	/* Each source as its mathematical value. */
	for (k = 0; k < nsrc; k++) {
		x[k] = (i128)v[k];
		if (is_signed_int(dt) && (v[k] >> (bits - 1)) & 1)
			x[k] -= (i128)((u128)1 << bits);
		sum += x[k];
	}
	switch (op) {
	case SHMCOLL_SUM:
		return (uint64_t)((u128)sum & mask);
	case SHMCOLL_PROD:
		/* Modulo 2^128 and then 2^bits: the same residue as wrapping in the type. */
		acc = 1;
		for (k = 0; k < nsrc; k++)
			acc *= (u128)x[k];
		return (uint64_t)(acc & mask);
	case SHMCOLL_MIN:
	case SHMCOLL_MAX:
		best = x[0];
		for (k = 1; k < nsrc; k++)
			if (op == SHMCOLL_MIN ? x[k] < best : x[k] > best)
				best = x[k];
		return (uint64_t)((u128)best & mask);
	case SHMCOLL_AVG: {
		i128 q = sum / nsrc;

		/* Truncation toward zero, checked apart from C's own division. */
		if (q * nsrc != sum)
			cr_assert((sum < 0) == (q * nsrc > sum), "quotient not toward zero");
		return (uint64_t)((u128)q & mask);
	}
	default:
		acc = (u128)v[0];
		for (k = 1; k < nsrc; k++) {
			if (op == SHMCOLL_BAND)
				acc &= v[k];
			else if (op == SHMCOLL_BOR)
				acc |= v[k];
			else
				acc ^= v[k];
		}
		return (uint64_t)acc;
	}
}

static uint64_t quiet(shmcoll_dtype dt, uint64_t nan)
{
	/* The 16-bit kernels hand a NaN back through float32: sign and payload kept, quieted. */
	if (dt == SHMCOLL_FLOAT16)
		return nan | 0x0200;
	if (dt == SHMCOLL_BFLOAT16)
		return nan | 0x0040;
	return nan;
}

static uint64_t ref_float(shmcoll_dtype dt, shmcoll_op op, const uint64_t *v, int nsrc)
{
	double x[MAX_NSRC], sum = 0, prod = 1, best;
	int k, first;

	for (k = 0; k < nsrc; k++) {
		x[k] = float_value(dt, v[k]);
		sum += x[k];  /* exact by construction of the inputs */
		prod *= x[k]; /* exact too: small integers */
	}
	switch (op) {
	case SHMCOLL_MIN:
	case SHMCOLL_MAX:
		for (k = 0; k < nsrc; k++)
			if (bits_isnan(dt, v[k]))
				return quiet(dt, v[k]);
		best = x[0];
		for (k = 1; k < nsrc; k++)
			if (op == SHMCOLL_MIN ? x[k] < best : x[k] > best)
				best = x[k];
		/* The first source equal to the extreme: decides -0 against +0. */
		first = 0;
		while (x[first] != best)
			first++;
		return v[first];
	case SHMCOLL_SUM:
		return dt == SHMCOLL_FLOAT16    ? ref_f16_round(sum)
		       : dt == SHMCOLL_BFLOAT16 ? ref_bf16_round(sum)
		       : dt == SHMCOLL_FLOAT32  ? f32_bits((float)sum)
		                                : f64_bits(sum);
	case SHMCOLL_PROD:
		return dt == SHMCOLL_FLOAT16    ? ref_f16_round(prod)
		       : dt == SHMCOLL_BFLOAT16 ? ref_bf16_round(prod)
		       : dt == SHMCOLL_FLOAT32  ? f32_bits((float)prod)
		                                : f64_bits(prod);
	default: {
		/* AVG: the exact sum in the accumulator type, divided there, then (16-bit
		 * formats) rounded to the storage type. */
		float q32 = (float)sum / (float)nsrc;

		return dt == SHMCOLL_FLOAT16    ? ref_f16_round(q32)
		       : dt == SHMCOLL_BFLOAT16 ? ref_bf16_round(q32)
		       : dt == SHMCOLL_FLOAT32  ? f32_bits(q32)
		                                : f64_bits(sum / (double)nsrc);
	}
	}
}

/* Run the kernel with sources and dst at byte offset off from malloc's alignment, with
 * canaries around dst; return the index of the first element differing from expect, or
 * count if none, and fail on a touched canary. */
static size_t run_kernel(shmcoll__reduce_fn fn, size_t size, unsigned char *const *srcs, int nsrc,
                         size_t count, const unsigned char *expect, size_t off)
{
	enum { PAD = 16 };
	size_t bytes = count * size;
	unsigned char *dbuf = malloc(bytes + 2 * PAD);
	unsigned char *sbuf[MAX_NSRC];
	const void *sp[MAX_NSRC];
	size_t i;

	cr_assert_not_null(dbuf);
	memset(dbuf, CANARY, bytes + 2 * PAD);
	for (int k = 0; k < nsrc; k++) {
		sbuf[k] = malloc(bytes + off + 1);
		cr_assert_not_null(sbuf[k]);
		memcpy(sbuf[k] + off, srcs[k], bytes);
		sp[k] = sbuf[k] + off;
	}
	/* dst at PAD + off: 16-byte aligned plus off, as malloc is. */
	fn(dbuf + PAD + off, sp, nsrc, count);
	for (i = 0; i < PAD + off; i++)
		cr_assert_eq(dbuf[i], CANARY, "canary before dst touched (off %zu)", off);
	for (i = PAD + off + bytes; i < bytes + 2 * PAD; i++)
		cr_assert_eq(dbuf[i], CANARY, "canary after dst touched (off %zu, byte %zu)", off,
		             i - PAD - off - bytes);
	for (i = 0; i < count; i++)
		if (memcmp(dbuf + PAD + off + i * size, expect + i * size, size))
			break;
	if (i < count)
		cr_log_error("got 0x%llx",
		             (unsigned long long)load_bits(dbuf + PAD + off + i * size, size));
	for (int k = 0; k < nsrc; k++)
		free(sbuf[k]);
	free(dbuf);
	return i;
}

static void sweep(shmcoll_dtype dt)
{
	size_t size = dtype_size(dt);
	unsigned char *srcs[MAX_NSRC];
	unsigned char *expect = malloc(MAX_COUNT * size);
	uint64_t v[MAX_NSRC];

	cr_assert_not_null(expect);
	for (int k = 0; k < MAX_NSRC; k++) {
		srcs[k] = malloc(MAX_COUNT * size);
		cr_assert_not_null(srcs[k]);
	}
	rng_state = 0x9e3779b97f4a7c15ull ^ (uint64_t)dt;
	for (int op = 0; op < SHMCOLL_OP_COUNT; op++) {
		shmcoll__reduce_fn fn = shmcoll__reduce_lookup(dt, (shmcoll_op)op);

		if (!pair_valid(dt, op))
			continue;
		cr_assert_not_null(fn, "%s %s: no kernel", dtype_names[dt], op_names[op]);
		for (size_t ni = 0; ni < sizeof(nsrcs) / sizeof(nsrcs[0]); ni++) {
			int nsrc = nsrcs[ni];

			for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
				size_t count = counts[ci];

				for (size_t i = 0; i < count; i++) {
					for (int k = 0; k < nsrc; k++) {
						v[k] = is_float(dt) ? gen_float(dt, op) : gen_int();
						store_bits(srcs[k] + i * size, size, v[k]);
						v[k] = load_bits(srcs[k] + i * size, size);
					}
					store_bits(expect + i * size, size,
					           is_float(dt) ? ref_float(dt, op, v, nsrc)
					                        : ref_int(dt, op, v, nsrc));
				}
				for (size_t off = 0; off < 2; off++) {
					size_t bad =
					    run_kernel(fn, size, srcs, nsrc, count, expect, off);

					cr_assert_eq(bad, count,
					             "%s %s nsrc %d count %zu off %zu: element %zu "
					             "expected 0x%llx",
					             dtype_names[dt], op_names[op], nsrc, count,
					             off, bad,
					             (unsigned long long)load_bits(
					                 expect + bad * size, size));
				}
			}
		}
	}
	for (int k = 0; k < MAX_NSRC; k++)
		free(srcs[k]);
	free(expect);
}

#define SWEEP_TEST(name, dt)                                                                       \
	Test(kernels, sweep_##name)                                                                \
	{                                                                                          \
		sweep(dt);                                                                         \
	}

SWEEP_TEST(int8, SHMCOLL_INT8)
SWEEP_TEST(uint8, SHMCOLL_UINT8)
SWEEP_TEST(int32, SHMCOLL_INT32)
SWEEP_TEST(uint32, SHMCOLL_UINT32)
SWEEP_TEST(int64, SHMCOLL_INT64)
SWEEP_TEST(uint64, SHMCOLL_UINT64)
SWEEP_TEST(float16, SHMCOLL_FLOAT16)
SWEEP_TEST(bfloat16, SHMCOLL_BFLOAT16)
SWEEP_TEST(float32, SHMCOLL_FLOAT32)
SWEEP_TEST(float64, SHMCOLL_FLOAT64)

Test(kernels, lookup_null_exactly_for_invalid_pairs)
{
	static const int odd[] = {-1, INT32_MIN, 1000};

	for (int dt = -1; dt <= SHMCOLL_DTYPE_COUNT; dt++)
		for (int op = -1; op <= SHMCOLL_OP_COUNT; op++) {
			shmcoll__reduce_fn fn =
			    shmcoll__reduce_lookup((shmcoll_dtype)dt, (shmcoll_op)op);

			cr_assert_eq(fn != NULL, pair_valid(dt, op), "dtype %d op %d", dt, op);
		}
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		cr_assert_null(shmcoll__reduce_lookup((shmcoll_dtype)odd[i], SHMCOLL_SUM));
		cr_assert_null(shmcoll__reduce_lookup(SHMCOLL_INT32, (shmcoll_op)odd[i]));
	}
}

/* Reduce one element per source: the values, of storage type T, in source order. */
#define REDUCE1(T, dt, op, ...)                                                                    \
	__extension__({                                                                            \
		T in_[] = {__VA_ARGS__};                                                           \
		const void *p_[sizeof(in_) / sizeof(in_[0])];                                      \
		T out_;                                                                            \
		for (size_t i_ = 0; i_ < sizeof(in_) / sizeof(in_[0]); i_++)                       \
			p_[i_] = &in_[i_];                                                         \
		shmcoll__reduce_lookup((dt), (op))(&out_, p_, (int)(sizeof(in_) / sizeof(in_[0])), \
		                                   1);                                             \
		out_;                                                                              \
	})

Test(kernels, integer_avg_truncates_without_overflow)
{
	cr_assert_eq(REDUCE1(int32_t, SHMCOLL_INT32, SHMCOLL_AVG, -3, 0), -1);
	cr_assert_eq(REDUCE1(int32_t, SHMCOLL_INT32, SHMCOLL_AVG, 3, 0), 1);
	cr_assert_eq(REDUCE1(int32_t, SHMCOLL_INT32, SHMCOLL_AVG, -7, -1, 0), -2);
	cr_assert_eq(REDUCE1(int8_t, SHMCOLL_INT8, SHMCOLL_AVG, 100, 100, 100), 100);
	cr_assert_eq(REDUCE1(int8_t, SHMCOLL_INT8, SHMCOLL_AVG, -128, -128, -127), -127);
	cr_assert_eq(REDUCE1(uint8_t, SHMCOLL_UINT8, SHMCOLL_AVG, 255, 255, 1), 170);
	cr_assert_eq(REDUCE1(uint32_t, SHMCOLL_UINT32, SHMCOLL_AVG, UINT32_MAX, UINT32_MAX),
	             UINT32_MAX);
	cr_assert_eq(
	    REDUCE1(int64_t, SHMCOLL_INT64, SHMCOLL_AVG, INT64_MAX, INT64_MAX, INT64_MAX - 3),
	    INT64_MAX - 1);
	/* (-2^64 + 1) / 2 = -2^63 + 0.5, toward zero: INT64_MIN + 1. */
	cr_assert_eq(REDUCE1(int64_t, SHMCOLL_INT64, SHMCOLL_AVG, INT64_MIN, INT64_MIN + 1),
	             INT64_MIN + 1);
	cr_assert_eq(
	    REDUCE1(uint64_t, SHMCOLL_UINT64, SHMCOLL_AVG, UINT64_MAX, UINT64_MAX, UINT64_MAX - 2),
	    UINT64_MAX - 1);
}

Test(kernels, integer_sum_and_prod_wrap)
{
	cr_assert_eq(REDUCE1(int8_t, SHMCOLL_INT8, SHMCOLL_SUM, 127, 1), -128);
	cr_assert_eq(REDUCE1(uint8_t, SHMCOLL_UINT8, SHMCOLL_PROD, 16, 16, 3), 0);
	cr_assert_eq(REDUCE1(int32_t, SHMCOLL_INT32, SHMCOLL_PROD, INT32_MIN, -1), INT32_MIN);
	cr_assert_eq(REDUCE1(int64_t, SHMCOLL_INT64, SHMCOLL_SUM, INT64_MAX, 2), INT64_MIN + 1);
	cr_assert_eq(REDUCE1(uint64_t, SHMCOLL_UINT64, SHMCOLL_PROD, (uint64_t)1 << 32,
	                     (uint64_t)1 << 32, 5),
	             0);
}

Test(kernels, f16_roundtrip_exhaustive)
{
	for (uint32_t h = 0; h <= 0xffff; h++) {
		float f = shmcoll__f16_to_f32((uint16_t)h);
		uint16_t back = shmcoll__f32_to_f16(f);

		cr_assert_eq(f32_bits(f) >> 31, h >> 15, "0x%04x: sign", h);
		if (f16_isnan((uint16_t)h)) {
			cr_assert(f != f, "0x%04x: not NaN in float32", h);
			cr_assert_eq(back, h | 0x0200, "0x%04x -> 0x%04x: NaN not kept quiet", h,
			             back);
		} else if ((h & 0x7fff) == 0x7c00) {
			cr_assert(f == ((h & 0x8000) ? -INFINITY : INFINITY));
			cr_assert_eq(back, h);
		} else {
			cr_assert((double)f == ref_f16_value((uint16_t)h), "0x%04x: value", h);
			cr_assert_eq(back, h, "0x%04x -> 0x%04x", h, back);
		}
	}
}

Test(kernels, bf16_roundtrip_exhaustive)
{
	for (uint32_t h = 0; h <= 0xffff; h++) {
		float f = shmcoll__bf16_to_f32((uint16_t)h);
		uint16_t back = shmcoll__f32_to_bf16(f);

		cr_assert_eq(f32_bits(f) >> 31, h >> 15, "0x%04x: sign", h);
		if (bf16_isnan((uint16_t)h)) {
			cr_assert(f != f, "0x%04x: not NaN in float32", h);
			cr_assert_eq(back, h | 0x0040, "0x%04x -> 0x%04x", h, back);
		} else {
			if ((h & 0x7fff) != 0x7f80)
				cr_assert((double)f == ref_bf16_value((uint16_t)h), "0x%04x: value",
				          h);
			cr_assert_eq(f32_bits(f), h << 16, "0x%04x: bits", h);
			cr_assert_eq(back, h, "0x%04x -> 0x%04x", h, back);
		}
	}
}

/* Every midpoint between adjacent finite encodings p, p+1 (both signs) goes to the even one;
 * one float32 ulp either side goes to the nearer. p + 1 may be the infinity pattern, where
 * the midpoint is the overflow threshold. */
static void check_midpoints(uint16_t (*to16)(float), double (*value)(uint16_t), uint16_t inf)
{
	for (uint32_t p = 0; p < inf; p++) {
		for (uint32_t sign = 0; sign <= 0x8000; sign += 0x8000) {
			double mid = (value((uint16_t)p) + value((uint16_t)(p + 1))) / 2;
			float m = (float)(sign ? -mid : mid);
			uint32_t mb = f32_bits(m);
			uint16_t even = (uint16_t)(sign | ((p & 1) ? p + 1 : p));

			cr_assert((double)m == (sign ? -mid : mid), "midpoint not exact");
			cr_assert_eq(to16(m), even, "midpoint of 0x%04x: got 0x%04x", p | sign,
			             to16(m));
			cr_assert_eq(to16(bits_f32(mb + 1)), sign | (p + 1),
			             "above midpoint of 0x%04x", p | sign);
			cr_assert_eq(to16(bits_f32(mb - 1)), sign | p, "below midpoint of 0x%04x",
			             p | sign);
		}
	}
}

Test(kernels, f16_rounds_to_nearest_even)
{
	check_midpoints(shmcoll__f32_to_f16, ref_f16_value, 0x7c00);
	/* Spot values: the overflow threshold 65520, subnormal boundaries, huge values. */
	cr_assert_eq(shmcoll__f32_to_f16(65520.0f), 0x7c00);
	cr_assert_eq(shmcoll__f32_to_f16(65519.99609375f), 0x7bff);
	cr_assert_eq(shmcoll__f32_to_f16(-1e30f), 0xfc00);
	cr_assert_eq(shmcoll__f32_to_f16(3.4028235e38f), 0x7c00);
	cr_assert_eq(shmcoll__f32_to_f16(INFINITY), 0x7c00);
	cr_assert_eq(shmcoll__f32_to_f16(0x1p-24f), 0x0001);
	cr_assert_eq(shmcoll__f32_to_f16(0x1p-25f), 0x0000);
	cr_assert_eq(shmcoll__f32_to_f16(0x1.000002p-25f), 0x0001);
	cr_assert_eq(shmcoll__f32_to_f16(-0x1p-26f), 0x8000);
	cr_assert_eq(shmcoll__f32_to_f16(0x1p-149f), 0x0000);
	cr_assert_eq(shmcoll__f32_to_f16(0x1.ffcp-15f), 0x0400); /* 1023.5 units: tie, to 1024 */
	cr_assert_eq(shmcoll__f32_to_f16(0x1.ff8p-15f), 0x03ff);
	cr_assert_eq(shmcoll__f32_to_f16(0x1p-14f), 0x0400);
	cr_assert_eq(shmcoll__f32_to_f16(-0.0f), 0x8000);
}

Test(kernels, f16_matches_reference_on_random_floats)
{
	rng_state = 12345;
	for (int i = 0; i < 1 << 18; i++) {
		uint32_t r = (uint32_t)rng();
		/* Half uniform over all bits, half with exponents near the float16 range. */
		uint32_t x = (i & 1) ? r : (r & 0x807fffffu) | ((95 + (r >> 8) % 50) << 23);
		float f = bits_f32(x);

		if (f != f)
			continue;
		cr_assert_eq(shmcoll__f32_to_f16(f), ref_f16_round(f), "0x%08x", x);
	}
}

Test(kernels, bf16_rounds_to_nearest_even)
{
	check_midpoints(shmcoll__f32_to_bf16, ref_bf16_value, 0x7f80);
	rng_state = 54321;
	for (int i = 0; i < 1 << 18; i++) {
		uint32_t x = (uint32_t)rng();
		float f = bits_f32(x);

		if (f != f)
			continue;
		cr_assert_eq(shmcoll__f32_to_bf16(f), ref_bf16_round(f), "0x%08x", x);
	}
	cr_assert_eq(shmcoll__f32_to_bf16(3.4028235e38f), 0x7f80);
	cr_assert_eq(shmcoll__f32_to_bf16(-0.0f), 0x8000);
}

Test(kernels, narrowing_keeps_nan_a_nan)
{
	/* Payload only in bits that are dropped: rounding or truncating would give infinity,
	 * and 0x7fffffff would carry into the sign bit of a bfloat16. */
	static const uint32_t nans[] = {0x7f800001u, 0xff800001u, 0x7f801fffu, 0x7fffffffu,
	                                0xffffffffu, 0x7fc00000u, 0x7f80ffffu};

	for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++) {
		float f = bits_f32(nans[i]);
		uint16_t h = shmcoll__f32_to_f16(f);
		uint16_t b = shmcoll__f32_to_bf16(f);

		cr_assert(f16_isnan(h) && (h & 0x0200), "f16 of 0x%08x: 0x%04x", nans[i], h);
		cr_assert(bf16_isnan(b) && (b & 0x0040), "bf16 of 0x%08x: 0x%04x", nans[i], b);
		cr_assert_eq(h >> 15, nans[i] >> 31);
		cr_assert_eq(b >> 15, nans[i] >> 31);
	}
}

Test(kernels, half_sum_rounds_once)
{
	/* 1 + 2^-11 + 2^-11 = 1 + 2^-10, a float16: folding in float16 would tie to even twice
	 * and stay at 1.0. */
	uint16_t f = REDUCE1(uint16_t, SHMCOLL_FLOAT16, SHMCOLL_SUM, 0x3c00, 0x1000, 0x1000);
	uint16_t twice = shmcoll__f32_to_f16(
	    shmcoll__f16_to_f32(shmcoll__f32_to_f16(1.0f + 0x1p-11f)) + 0x1p-11f);

	cr_assert_eq(f, 0x3c01, "got 0x%04x", f);
	cr_assert_neq(f, twice);
	/* 1 + 2^-11 + 2^-22 (0x0004): just above the midpoint of 1 and 1 + 2^-10, so it rounds
	 * up; rounding after each step would tie down to 1.0 first. */
	f = REDUCE1(uint16_t, SHMCOLL_FLOAT16, SHMCOLL_SUM, 0x3c00, 0x1000, 0x0004);
	cr_assert_eq(f, 0x3c01, "got 0x%04x", f);
	/* bfloat16: 1 + 2^-8 + 2^-8 = 1 + 2^-7. */
	f = REDUCE1(uint16_t, SHMCOLL_BFLOAT16, SHMCOLL_SUM, 0x3f80, 0x3b80, 0x3b80);
	cr_assert_eq(f, 0x3f81, "got 0x%04x", f);
	twice = shmcoll__f32_to_bf16(shmcoll__bf16_to_f32(shmcoll__f32_to_bf16(1.0f + 0x1p-8f)) +
	                             0x1p-8f);
	cr_assert_neq(f, twice);
}

Test(kernels, float_min_max_nan_and_signed_zero)
{
	const float qa = bits_f32(0xffc00001u), qb = bits_f32(0x7fc00002u);
	const double da = bits_f64(0xfff8000000000001ull), db = bits_f64(0x7ff8000000000002ull);
	float r;
	double d;
	uint16_t h;

	/* float32: the first NaN, bit for bit, whatever its position. */
	r = REDUCE1(float, SHMCOLL_FLOAT32, SHMCOLL_MIN, 1.0f, qa, qb);
	cr_assert_eq(f32_bits(r), f32_bits(qa));
	r = REDUCE1(float, SHMCOLL_FLOAT32, SHMCOLL_MAX, qb, 1.0f, qa);
	cr_assert_eq(f32_bits(r), f32_bits(qb));
	r = REDUCE1(float, SHMCOLL_FLOAT32, SHMCOLL_MAX, -1.0f, 5.0f, qa);
	cr_assert_eq(f32_bits(r), f32_bits(qa));
	/* The first of -0 and +0. */
	r = REDUCE1(float, SHMCOLL_FLOAT32, SHMCOLL_MIN, -0.0f, 0.0f);
	cr_assert_eq(f32_bits(r), 0x80000000u);
	r = REDUCE1(float, SHMCOLL_FLOAT32, SHMCOLL_MIN, 0.0f, -0.0f);
	cr_assert_eq(f32_bits(r), 0u);
	r = REDUCE1(float, SHMCOLL_FLOAT32, SHMCOLL_MAX, -0.0f, 0.0f);
	cr_assert_eq(f32_bits(r), 0x80000000u);
	r = REDUCE1(float, SHMCOLL_FLOAT32, SHMCOLL_MAX, 0.0f, -0.0f, -1.0f);
	cr_assert_eq(f32_bits(r), 0u);
	r = REDUCE1(float, SHMCOLL_FLOAT32, SHMCOLL_MIN, INFINITY, -INFINITY);
	cr_assert(r == -INFINITY);

	/* float64. */
	d = REDUCE1(double, SHMCOLL_FLOAT64, SHMCOLL_MIN, 1.0, da, db);
	cr_assert_eq(f64_bits(d), f64_bits(da));
	d = REDUCE1(double, SHMCOLL_FLOAT64, SHMCOLL_MAX, db, da);
	cr_assert_eq(f64_bits(d), f64_bits(db));
	d = REDUCE1(double, SHMCOLL_FLOAT64, SHMCOLL_MIN, 0.0, -0.0);
	cr_assert_eq(f64_bits(d), 0u);
	d = REDUCE1(double, SHMCOLL_FLOAT64, SHMCOLL_MAX, -0.0, 0.0);
	cr_assert_eq(f64_bits(d), 1ull << 63);

	/* float16/bfloat16: the first NaN's sign and payload, quiet. */
	h = REDUCE1(uint16_t, SHMCOLL_FLOAT16, SHMCOLL_MIN, 0x3c00, 0xfc01, 0x7e05);
	cr_assert_eq(h, 0xfe01, "got 0x%04x", h);
	h = REDUCE1(uint16_t, SHMCOLL_FLOAT16, SHMCOLL_MAX, 0x7e05, 0xfc01);
	cr_assert_eq(h, 0x7e05, "got 0x%04x", h);
	h = REDUCE1(uint16_t, SHMCOLL_FLOAT16, SHMCOLL_MIN, 0x8000, 0x0000);
	cr_assert_eq(h, 0x8000);
	h = REDUCE1(uint16_t, SHMCOLL_FLOAT16, SHMCOLL_MAX, 0x0000, 0x8000);
	cr_assert_eq(h, 0x0000);
	h = REDUCE1(uint16_t, SHMCOLL_BFLOAT16, SHMCOLL_MAX, 0x3f80, 0xff81, 0x7fc0);
	cr_assert_eq(h, 0xffc1, "got 0x%04x", h);
	h = REDUCE1(uint16_t, SHMCOLL_BFLOAT16, SHMCOLL_MIN, 0x0000, 0x8000);
	cr_assert_eq(h, 0x0000);
}
