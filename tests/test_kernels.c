/* test_kernels.c - every ISA level of the reduction kernels against a reference written here
 * and, byte for byte, against the scalar level; the kernel tables and the ISA ladder; the
 * float16/bfloat16 conversions (exhaustive where the domain is 2^16). */

#include <criterion/criterion.h>

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/kernels/copy.h"
#include "lib/kernels/kernels.h"
#include "lib/kernels/kernels_impl.h"

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
	i128 x[MAX_NSRC] = {0}, sum = 0, best;
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
	double x[MAX_NSRC] = {0}, sum = 0, prod = 1, best;
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

/* One level against the reference above, on every valid op of dt. */
static void sweep_level(int isa, shmcoll_dtype dt, unsigned char *const *srcs,
                        unsigned char *expect)
{
	size_t size = dtype_size(dt);
	uint64_t v[MAX_NSRC];

	rng_state = 0x9e3779b97f4a7c15ull ^ (uint64_t)dt;
	for (int op = 0; op < SHMCOLL_OP_COUNT; op++) {
		shmcoll__reduce_fn fn = shmcoll__reduce_lookup_isa(isa, dt, (shmcoll_op)op);

		if (!pair_valid(dt, op))
			continue;
		cr_assert_not_null(fn, "%s %s %s: no kernel", shmcoll__isa_name(isa),
		                   dtype_names[dt], op_names[op]);
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

					cr_assert_eq(
					    bad, count,
					    "%s %s %s nsrc %d count %zu off %zu: element %zu "
					    "expected 0x%llx",
					    shmcoll__isa_name(isa), dtype_names[dt], op_names[op],
					    nsrc, count, off, bad,
					    (unsigned long long)load_bits(expect + bad * size,
					                                  size));
				}
			}
		}
	}
}

/* Every available level, on the same inputs. */
static void sweep(shmcoll_dtype dt)
{
	size_t size = dtype_size(dt);
	unsigned char *srcs[MAX_NSRC];
	unsigned char *expect = malloc(MAX_COUNT * size);

	cr_assert_not_null(expect);
	for (int k = 0; k < MAX_NSRC; k++) {
		srcs[k] = malloc(MAX_COUNT * size);
		cr_assert_not_null(srcs[k]);
	}
	for (int isa = 0; isa < SHMCOLL_ISA_COUNT; isa++) {
		if (shmcoll__isa_available(isa))
			sweep_level(isa, dt, srcs, expect);
		else
			cr_log_info("%s level not available here: not checked",
			            shmcoll__isa_name(isa));
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

/* ---- every SIMD level against the scalar level, byte for byte ---- */

static const int level_nsrcs[] = {1, 2, 3, 5, 8};
static const size_t level_counts[] = {0,  1,  2,  3,  7,   15,  16,   17,  31,
                                      33, 63, 64, 65, 127, 255, 1000, 4099};
#define LEVEL_MAX_COUNT 4099
/* Room around the data of every buffer: up to 63 bytes of offset before it and at least 129
 * bytes after it, all canaries, so even a whole 64-byte vector stored past the end would
 * land on them. */
#define LEVEL_PAD 192

/* Field widths of the float formats: exponent, mantissa. */
static void float_format(shmcoll_dtype dt, unsigned *eb, unsigned *mb)
{
	static const unsigned e[] = {5, 8, 8, 11}, m[] = {10, 7, 23, 52};

	*eb = e[dt - SHMCOLL_FLOAT16];
	*mb = m[dt - SHMCOLL_FLOAT16];
}

/* A float element, often special: NaNs with random payloads (quiet and signalling), infinities,
 * signed zeros, subnormals, the largest finite and smallest normal values, ties (+-1, +-2) for
 * MIN/MAX, arbitrary bits, and otherwise values near 1 whose sums and quotients round. With
 * nan_ok clear, never a NaN, so the arithmetic is checked on ordinary values too. */
static uint64_t gen_special_float(shmcoll_dtype dt, int nan_ok)
{
	unsigned eb, mb;
	uint64_t mmask, emax, bias, sign, b;

	float_format(dt, &eb, &mb);
	mmask = (1ull << mb) - 1;
	emax = (1ull << eb) - 1;
	bias = emax >> 1;
	do {
		uint64_t r = rng() % 64;

		sign = (rng() & 1) << (eb + mb);
		if (r < 2)
			b = gen_nan(dt);
		else if (r < 4)
			b = sign | emax << mb;
		else if (r < 8)
			b = sign;
		else if (r < 12)
			b = sign | (r == 8 ? 1 : r == 9 ? mmask : (rng() & mmask) | 1);
		else if (r < 14)
			b = sign | (r == 12 ? ((emax - 1) << mb | mmask) : 1ull << mb);
		else if (r < 18)
			b = sign | (bias + (r & 1)) << mb;
		else if (r < 24)
			b = rng() & ((sign << 1) - 1);
		else
			b = sign | (bias - 4 + rng() % 9) << mb | (rng() & mmask);
	} while (!nan_ok && bits_isnan(dt, b));
	return b;
}

static uint64_t gen_level_input(shmcoll_dtype dt, int nan_ok)
{
	return is_float(dt) ? gen_special_float(dt, nan_ok) : gen_int();
}

/* A buffer of bytes with the data at base + off, 1 <= off <= 63 from a 64-byte boundary
 * (0 when aligned), canaries everywhere else. */
struct lbuf {
	unsigned char *base;
	size_t off, bytes, total;
};

static void lbuf_alloc(struct lbuf *b, size_t max_bytes)
{
	b->total = (max_bytes + LEVEL_PAD + 63) / 64 * 64;
	b->base = aligned_alloc(64, b->total);
	cr_assert_not_null(b->base);
}

static unsigned char *lbuf_place(struct lbuf *b, size_t bytes, int aligned)
{
	b->off = aligned ? 0 : 1 + rng() % 63;
	b->bytes = bytes;
	memset(b->base, CANARY, b->total);
	return b->base + b->off;
}

/* The index of the first byte outside the data that is not a canary, or SIZE_MAX. */
static size_t lbuf_touched(const struct lbuf *b)
{
	for (size_t i = 0; i < b->total; i++)
		if ((i < b->off || i >= b->off + b->bytes) && b->base[i] != CANARY)
			return i;
	return SIZE_MAX;
}

struct level_bufs {
	struct lbuf src[MAX_NSRC], keep[MAX_NSRC], want, got;
};

static void level_bufs_init(struct level_bufs *lb, size_t max_bytes)
{
	for (int k = 0; k < MAX_NSRC; k++) {
		lbuf_alloc(&lb->src[k], max_bytes);
		lbuf_alloc(&lb->keep[k], max_bytes);
	}
	lbuf_alloc(&lb->want, max_bytes);
	lbuf_alloc(&lb->got, max_bytes);
}

static void level_bufs_free(struct level_bufs *lb)
{
	for (int k = 0; k < MAX_NSRC; k++) {
		free(lb->src[k].base);
		free(lb->keep[k].base);
	}
	free(lb->want.base);
	free(lb->got.base);
}

/* One case: level isa against the scalar level on fresh inputs, every pointer at its own
 * offset. Both outputs must agree byte for byte, neither kernel may write outside its dst,
 * and the sources must come back unchanged. */
static void compare_level(struct level_bufs *lb, int isa, shmcoll_dtype dt, int op, int nsrc,
                          size_t count, int nan_ok, int aligned)
{
	shmcoll__reduce_fn ref = shmcoll__reduce_lookup_isa(SHMCOLL_ISA_SCALAR, dt, (shmcoll_op)op);
	shmcoll__reduce_fn fn = shmcoll__reduce_lookup_isa(isa, dt, (shmcoll_op)op);
	size_t size = dtype_size(dt), bytes = count * size, i;
	const void *sp[MAX_NSRC];
	unsigned char *want, *got;
	char where[256], vals[8 * 20 + 1] = "";

	cr_assert(ref && fn, "%s %s %s: no kernel", shmcoll__isa_name(isa), dtype_names[dt],
	          op_names[op]);
	for (int k = 0; k < nsrc; k++) {
		unsigned char *p = lbuf_place(&lb->src[k], bytes, aligned);

		for (i = 0; i < count; i++)
			store_bits(p + i * size, size, gen_level_input(dt, nan_ok));
		memcpy(lb->keep[k].base, lb->src[k].base, lb->src[k].total);
		sp[k] = p;
	}
	want = lbuf_place(&lb->want, bytes, aligned);
	got = lbuf_place(&lb->got, bytes, aligned);
	ref(want, sp, nsrc, count);
	fn(got, sp, nsrc, count);

	snprintf(where, sizeof(where), "%s %s %s nsrc %d count %zu dst off %zu src0 off %zu%s",
	         shmcoll__isa_name(isa), dtype_names[dt], op_names[op], nsrc, count, lb->got.off,
	         lb->src[0].off, nan_ok ? "" : " (no NaN)");
	cr_assert_eq(lbuf_touched(&lb->want), SIZE_MAX, "%s: scalar wrote outside dst", where);
	cr_assert_eq(lbuf_touched(&lb->got), SIZE_MAX,
	             "%s: wrote outside dst at byte %zu of the "
	             "buffer",
	             where, lbuf_touched(&lb->got));
	for (int k = 0; k < nsrc; k++)
		cr_assert(!memcmp(lb->keep[k].base, lb->src[k].base, lb->src[k].total),
		          "%s: source %d changed", where, k);
	if (!memcmp(want, got, bytes))
		return;
	for (i = 0; memcmp(want + i * size, got + i * size, size); i++)
		;
	for (int k = 0; k < nsrc; k++)
		snprintf(
		    vals + strlen(vals), sizeof(vals) - strlen(vals), " 0x%llx",
		    (unsigned long long)load_bits((const unsigned char *)sp[k] + i * size, size));
	cr_assert_fail("%s: element %zu: scalar 0x%llx, got 0x%llx, sources%s", where, i,
	               (unsigned long long)load_bits(want + i * size, size),
	               (unsigned long long)load_bits(got + i * size, size), vals);
}

static void level_sweep(int isa, shmcoll_dtype dt)
{
	struct level_bufs lb;
	int cases = 0;

	if (!shmcoll__isa_available(isa))
		cr_skip_test("%s level not available here (not compiled in, or the CPU or OS lacks "
		             "it)",
		             shmcoll__isa_name(isa));
	level_bufs_init(&lb, LEVEL_MAX_COUNT * dtype_size(dt));
	rng_state = 0x2545f4914f6cdd1dull ^ (uint64_t)dt << 8 ^ (uint64_t)isa;
	for (int op = 0; op < SHMCOLL_OP_COUNT; op++) {
		if (!pair_valid(dt, op))
			continue;
		for (size_t ni = 0; ni < sizeof(level_nsrcs) / sizeof(level_nsrcs[0]); ni++)
			for (size_t ci = 0; ci < sizeof(level_counts) / sizeof(level_counts[0]);
			     ci++) {
				/* Misaligned with NaNs, misaligned without, and aligned. */
				for (int run = 0; run < 3; run++, cases++)
					compare_level(&lb, isa, dt, op, level_nsrcs[ni],
					              level_counts[ci], run != 1, run == 2);
			}
	}
	level_bufs_free(&lb);
	cr_log_info("%s %s: %d cases match the scalar level", shmcoll__isa_name(isa),
	            dtype_names[dt], cases);
}

#define LEVEL_TEST(level, isa, name, dt)                                                           \
	Test(kernels, level_##level##_##name)                                                      \
	{                                                                                          \
		level_sweep(isa, dt);                                                              \
	}
#define LEVEL_TESTS(level, isa)                                                                    \
	LEVEL_TEST(level, isa, int8, SHMCOLL_INT8)                                                 \
	LEVEL_TEST(level, isa, uint8, SHMCOLL_UINT8)                                               \
	LEVEL_TEST(level, isa, int32, SHMCOLL_INT32)                                               \
	LEVEL_TEST(level, isa, uint32, SHMCOLL_UINT32)                                             \
	LEVEL_TEST(level, isa, int64, SHMCOLL_INT64)                                               \
	LEVEL_TEST(level, isa, uint64, SHMCOLL_UINT64)                                             \
	LEVEL_TEST(level, isa, float16, SHMCOLL_FLOAT16)                                           \
	LEVEL_TEST(level, isa, bfloat16, SHMCOLL_BFLOAT16)                                         \
	LEVEL_TEST(level, isa, float32, SHMCOLL_FLOAT32)                                           \
	LEVEL_TEST(level, isa, float64, SHMCOLL_FLOAT64)

LEVEL_TESTS(avx2, SHMCOLL_ISA_AVX2)
LEVEL_TESTS(avx512, SHMCOLL_ISA_AVX512)

/* Many sources: every pair with 1024 of them, and integer AVG at the largest nsrc the SIMD
 * kernels take (SIMD_AVG_MAX_NSRC) and one more (handed to the scalar kernel). The AVG inputs
 * put the exact quotient 1/nsrc either side of an integer near the type's extremes, where a
 * floating-point division would truncate wrongly first. Sources lie at 64-byte strides plus
 * an offset. */
static void many_sources(int isa, shmcoll_dtype dt, int op, int nsrc, size_t count)
{
	size_t size = dtype_size(dt), stride = (count * size + 64 + 63) / 64 * 64;
	unsigned char *block = aligned_alloc(64, stride * (size_t)nsrc);
	unsigned char *want = malloc(count * size + 1), *got = malloc(count * size + 1);
	const void **sp = malloc(sizeof(*sp) * (size_t)nsrc);
	const uint64_t edge[] = {0x7f, 0x80, 0xff, 0x7fffffff, 0x80000000u, 0xffffffffu, 0, 1};
	size_t i;

	cr_assert(block && want && got && sp);
	for (int k = 0; k < nsrc; k++) {
		sp[k] = block + (size_t)k * stride + 1 + (size_t)k % 63;
		for (i = 0; i < count; i++) {
			uint64_t v;

			if (op != SHMCOLL_AVG || is_float(dt)) {
				v = gen_level_input(dt, i & 1);
			} else if (i % 4 == 3) {
				v = gen_int();
			} else {
				/* One source off by -1, +1 or -2 from a shared edge value. */
				v = edge[(i / 4) % (sizeof(edge) / sizeof(edge[0]))];
				if ((size_t)k == i % (size_t)nsrc)
					v += i % 4 == 0   ? (uint64_t)-1
					     : i % 4 == 1 ? 1
					                  : (uint64_t)-2;
			}
			store_bits((unsigned char *)sp[k] + i * size, size, v);
		}
	}
	want[count * size] = got[count * size] = CANARY;
	shmcoll__reduce_lookup_isa(SHMCOLL_ISA_SCALAR, dt, (shmcoll_op)op)(want, sp, nsrc, count);
	shmcoll__reduce_lookup_isa(isa, dt, (shmcoll_op)op)(got, sp, nsrc, count);
	cr_assert_eq(got[count * size], CANARY);
	for (i = 0; i < count && !memcmp(want + i * size, got + i * size, size); i++)
		;
	cr_assert_eq(i, count, "%s %s %s nsrc %d: element %zu: scalar 0x%llx, got 0x%llx",
	             shmcoll__isa_name(isa), dtype_names[dt], op_names[op], nsrc, i,
	             (unsigned long long)load_bits(want + i * size, size),
	             (unsigned long long)load_bits(got + i * size, size));
	free(sp);
	free(got);
	free(want);
	free(block);
}

static void level_many_sources(int isa)
{
	static const shmcoll_dtype avg_types[] = {SHMCOLL_INT8, SHMCOLL_UINT8, SHMCOLL_INT32,
	                                          SHMCOLL_UINT32};

	if (!shmcoll__isa_available(isa))
		cr_skip_test("%s level not available here (not compiled in, or the CPU or OS lacks "
		             "it)",
		             shmcoll__isa_name(isa));
	rng_state = 0x853c49e6748fea9bull ^ (uint64_t)isa;
	for (int dt = 0; dt < SHMCOLL_DTYPE_COUNT; dt++)
		for (int op = 0; op < SHMCOLL_OP_COUNT; op++)
			if (pair_valid(dt, op))
				many_sources(isa, (shmcoll_dtype)dt, op, 1024, 67);
	for (size_t t = 0; t < sizeof(avg_types) / sizeof(avg_types[0]); t++) {
		many_sources(isa, avg_types[t], SHMCOLL_AVG, SIMD_AVG_MAX_NSRC, 35);
		many_sources(isa, avg_types[t], SHMCOLL_AVG, SIMD_AVG_MAX_NSRC + 1, 35);
	}
}

Test(kernels, level_avx2_many_sources, .timeout = 300)
{
	level_many_sources(SHMCOLL_ISA_AVX2);
}

Test(kernels, level_avx512_many_sources, .timeout = 300)
{
	level_many_sources(SHMCOLL_ISA_AVX512);
}

/* ---- the ladder ---- */

Test(kernels, isa_levels_and_tables)
{
	int top = SHMCOLL_ISA_SCALAR;

	cr_assert(shmcoll__isa_available(SHMCOLL_ISA_SCALAR));
	cr_assert(!shmcoll__isa_available(-1) && !shmcoll__isa_available(SHMCOLL_ISA_COUNT));
	cr_assert_str_eq(shmcoll__isa_name(SHMCOLL_ISA_AVX512), "avx512");
	cr_assert_str_eq(shmcoll__isa_name(SHMCOLL_ISA_COUNT), "unknown");
	for (int isa = 0; isa < SHMCOLL_ISA_COUNT; isa++) {
		int avail = shmcoll__isa_available(isa);

		cr_log_info("%s level: %s", shmcoll__isa_name(isa),
		            avail ? "available"
		                  : "not available (not compiled in, or the CPU "
		                    "or OS lacks it)");
		/* A level builds on the ones below it. */
		if (avail) {
			cr_assert_eq(top, isa - (isa > 0), "%s without the level below",
			             shmcoll__isa_name(isa));
			top = isa;
		}
		for (int dt = -1; dt <= SHMCOLL_DTYPE_COUNT; dt++)
			for (int op = -1; op <= SHMCOLL_OP_COUNT; op++) {
				shmcoll__reduce_fn fn = shmcoll__reduce_lookup_isa(
				    isa, (shmcoll_dtype)dt, (shmcoll_op)op);
				shmcoll__reduce_fn sc = shmcoll__reduce_lookup_isa(
				    SHMCOLL_ISA_SCALAR, (shmcoll_dtype)dt, (shmcoll_op)op);
				int wide_avg = (dt == SHMCOLL_INT64 || dt == SHMCOLL_UINT64) &&
				               op == SHMCOLL_AVG;

				cr_assert_eq(fn != NULL, avail && pair_valid(dt, op),
				             "%s dtype %d op %d", shmcoll__isa_name(isa), dt, op);
				/* Every valid pair has its own SIMD kernel but 64-bit AVG. */
				if (fn && isa > SHMCOLL_ISA_SCALAR)
					cr_assert_eq(fn == sc, wide_avg, "%s %s %s: %s",
					             shmcoll__isa_name(isa), dtype_names[dt],
					             op_names[op],
					             wide_avg ? "not the scalar kernel"
					                      : "falls back to scalar");
			}
	}
	/* This process's own choice: the highest level, or the one SHMCOLL_ISA names below it. */
	for (int isa = 0; getenv("SHMCOLL_ISA") && isa < top; isa++)
		if (!strcmp(getenv("SHMCOLL_ISA"), shmcoll__isa_name(isa)))
			top = isa;
	cr_assert_eq(shmcoll__isa_active(), top, "SHMCOLL_ISA=%s", getenv("SHMCOLL_ISA"));
}

/* What a process with SHMCOLL_ISA set to value (NULL: unset) chooses. The choice is made once
 * per process, so each value is tried in a child forked before this process made its own:
 * the child's exit status is the level, or 100 if lookup and the level's table disagree. */
static int isa_chosen_with(const char *value)
{
	int status;
	pid_t pid = fork();

	cr_assert_neq(pid, -1);
	if (pid == 0) {
		int isa;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (value)
			setenv("SHMCOLL_ISA", value, 1);
		else
			unsetenv("SHMCOLL_ISA");
		isa = shmcoll__isa_active();
		if (shmcoll__reduce_lookup(SHMCOLL_FLOAT32, SHMCOLL_SUM) !=
		    shmcoll__reduce_lookup_isa(isa, SHMCOLL_FLOAT32, SHMCOLL_SUM))
			_exit(100);
		_exit(isa);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "SHMCOLL_ISA=%s: child died", value ? value : "(unset)");
	return WEXITSTATUS(status);
}

Test(kernels, isa_env_caps_the_level, .timeout = 60)
{
	static const char *const values[] = {NULL, "scalar", "avx2", "avx512", "AVX2", "sse", ""};
	int chosen[sizeof(values) / sizeof(values[0])];
	int top = SHMCOLL_ISA_SCALAR;

	/* Children first: this process has not chosen yet (Criterion runs each test in a new
	 * process), so each child chooses afresh. */
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		chosen[i] = isa_chosen_with(values[i]);
	for (int isa = 0; isa < SHMCOLL_ISA_COUNT; isa++)
		if (shmcoll__isa_available(isa))
			top = isa;
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		int want = top;

		/* Known names cap the level; unknown ones (case matters) are ignored. */
		for (int isa = 0; values[i] && isa < SHMCOLL_ISA_COUNT; isa++)
			if (!strcmp(values[i], shmcoll__isa_name(isa)) && isa < top)
				want = isa;
		cr_assert_eq(chosen[i], want, "SHMCOLL_ISA=%s: level %d, expected %d",
		             values[i] ? values[i] : "(unset)", chosen[i], want);
	}
}

/* ---- NaN rules of SUM/PROD/AVG at every level ---- */

/* Reduce one element given per source, at level isa, over 67 copies of it (whole vectors and
 * a partial one); every copy must give the same bits, which are returned. */
static uint64_t reduce_copies(int isa, shmcoll_dtype dt, shmcoll_op op, int nsrc,
                              const uint64_t *in)
{
	enum { N = 67 };
	size_t size = dtype_size(dt);
	unsigned char src[MAX_NSRC][N * 8], dst[N * 8];
	const void *sp[MAX_NSRC];
	uint64_t r;

	for (int k = 0; k < nsrc; k++) {
		for (size_t i = 0; i < N; i++)
			store_bits(src[k] + i * size, size, in[k]);
		sp[k] = src[k];
	}
	shmcoll__reduce_lookup_isa(isa, dt, op)(dst, sp, nsrc, N);
	r = load_bits(dst, size);
	for (size_t i = 1; i < N; i++)
		cr_assert_eq(load_bits(dst + i * size, size), r, "%s: element %zu differs",
		             shmcoll__isa_name(isa), i);
	return r;
}

#define EXPECT_NAN(dt, op, want, ...)                                                              \
	do {                                                                                       \
		const uint64_t in_[] = {__VA_ARGS__};                                              \
		for (int isa_ = 0; isa_ < SHMCOLL_ISA_COUNT; isa_++) {                             \
			uint64_t got_;                                                             \
			if (!shmcoll__isa_available(isa_))                                         \
				continue;                                                          \
			got_ = reduce_copies(isa_, (dt), (op),                                     \
			                     (int)(sizeof(in_) / sizeof(in_[0])), in_);            \
			cr_assert_eq(got_, (uint64_t)(want), "%s %s %s line %d: got 0x%llx",       \
			             shmcoll__isa_name(isa_), dtype_names[dt], op_names[op],       \
			             __LINE__, (unsigned long long)got_);                          \
		}                                                                                  \
	} while (0)

Test(kernels, float_sum_prod_avg_first_nan_wins_quieted)
{
	const uint64_t one = 0x3f800000u, two = 0x40000000u, inf = 0x7f800000u;
	const uint64_t sa = 0xff800001u, qb = 0x7fc00002u; /* signalling, quiet */

	/* The first NaN in source order, quieted, whatever follows it. */
	EXPECT_NAN(SHMCOLL_FLOAT32, SHMCOLL_SUM, 0xffc00001u, one, sa, qb);
	EXPECT_NAN(SHMCOLL_FLOAT32, SHMCOLL_SUM, 0x7fc00002u, qb, sa);
	EXPECT_NAN(SHMCOLL_FLOAT32, SHMCOLL_SUM, 0xffc00001u, sa, qb, one);
	EXPECT_NAN(SHMCOLL_FLOAT32, SHMCOLL_PROD, 0xffc00001u, two, sa, qb);
	EXPECT_NAN(SHMCOLL_FLOAT32, SHMCOLL_AVG, 0x7fc00002u, one, qb, sa);
	/* One source: SUM and PROD copy it, AVG divides, which quiets. */
	EXPECT_NAN(SHMCOLL_FLOAT32, SHMCOLL_SUM, sa, sa);
	EXPECT_NAN(SHMCOLL_FLOAT32, SHMCOLL_PROD, sa, sa);
	EXPECT_NAN(SHMCOLL_FLOAT32, SHMCOLL_AVG, 0xffc00001u, sa);
#if defined(__x86_64__)
	/* An invalid operation gives x86's default NaN, which then wins like any other. */
	EXPECT_NAN(SHMCOLL_FLOAT32, SHMCOLL_SUM, 0xffc00000u, inf, inf | 1ull << 31, qb);
	EXPECT_NAN(SHMCOLL_FLOAT32, SHMCOLL_PROD, 0xffc00000u, 0, inf, sa);
	EXPECT_NAN(SHMCOLL_FLOAT64, SHMCOLL_SUM, 0xfff8000000000000ull, 0xfff0000000000000ull,
	           0x7ff0000000000000ull, 0x7ff0000000000005ull);
#endif
	EXPECT_NAN(SHMCOLL_FLOAT64, SHMCOLL_SUM, 0x7ff8000000000005ull, 0x3ff0000000000000ull,
	           0x7ff0000000000005ull, 0xfff8000000000007ull);
	EXPECT_NAN(SHMCOLL_FLOAT64, SHMCOLL_PROD, 0xfff8000000000007ull, 0xfff8000000000007ull,
	           0x7ff0000000000005ull);
	EXPECT_NAN(SHMCOLL_FLOAT64, SHMCOLL_SUM, 0x7ff0000000000005ull, 0x7ff0000000000005ull);
	/* 16-bit formats: the first NaN's sign and top payload bits, quiet, even alone. */
	EXPECT_NAN(SHMCOLL_FLOAT16, SHMCOLL_SUM, 0x7e01, 0x3c00, 0x7c01, 0xfe05);
	EXPECT_NAN(SHMCOLL_FLOAT16, SHMCOLL_SUM, 0xfe05, 0xfe05, 0x7c01);
	EXPECT_NAN(SHMCOLL_FLOAT16, SHMCOLL_PROD, 0x7e01, 0x7c01);
	EXPECT_NAN(SHMCOLL_FLOAT16, SHMCOLL_AVG, 0xfe05, 0x3c00, 0xfc05, 0x7c01);
	EXPECT_NAN(SHMCOLL_BFLOAT16, SHMCOLL_SUM, 0x7fc1, 0x7f81, 0xffc1);
	EXPECT_NAN(SHMCOLL_BFLOAT16, SHMCOLL_AVG, 0xffc3, 0x3f80, 0xff83, 0x7f81);
	EXPECT_NAN(SHMCOLL_BFLOAT16, SHMCOLL_SUM, 0x7fc1, 0x7f81);
}

/* Every float16/bfloat16 encoding against a few partners, for every op: each level matches
 * the scalar one on the whole domain (the partners make exact values, roundings at every
 * exponent, overflow and NaN mixes). */
Test(kernels, half_every_encoding_at_every_level)
{
	static const uint16_t partners[2][8] = {
	    {0x0000, 0x8000, 0x0001, 0x8401, 0x3c00, 0x1000, 0x7bff, 0x7c01},
	    {0x0000, 0x8000, 0x0001, 0x8081, 0x3f80, 0x3b80, 0x7f7f, 0x7f81}};
	enum { N = 1 << 16 };
	uint16_t *enc = malloc(N * 2), *part = malloc(N * 2), *want = malloc(N * 2),
	         *got = malloc(N * 2);

	cr_assert(enc && part && want && got);
	for (uint32_t h = 0; h < N; h++)
		enc[h] = (uint16_t)h;
	for (int t = 0; t < 2; t++) {
		shmcoll_dtype dt = t ? SHMCOLL_BFLOAT16 : SHMCOLL_FLOAT16;

		for (int p = 0; p < 8; p++) {
			const void *sp[2] = {enc, part};

			for (uint32_t h = 0; h < N; h++)
				part[h] = partners[t][p];
			for (int op = 0; op <= SHMCOLL_AVG; op++)
				for (int order = 0; order < 2; order++) {
					const void *ss[2] = {sp[order], sp[!order]};

					shmcoll__reduce_lookup_isa(SHMCOLL_ISA_SCALAR, dt,
					                           (shmcoll_op)op)(want, ss, 2, N);
					for (int isa = 1; isa < SHMCOLL_ISA_COUNT; isa++) {
						uint32_t h;

						if (!shmcoll__isa_available(isa))
							continue;
						shmcoll__reduce_lookup_isa(isa, dt, (shmcoll_op)op)(
						    got, ss, 2, N);
						for (h = 0; h < N && want[h] == got[h]; h++)
							;
						cr_assert_eq(
						    h, N,
						    "%s %s %s partner 0x%04x order %d: "
						    "0x%04x gives 0x%04x, scalar 0x%04x",
						    shmcoll__isa_name(isa), dtype_names[dt],
						    op_names[op], partners[t][p], order, h,
						    h < N ? got[h] : 0, h < N ? want[h] : 0);
					}
				}
		}
	}
	free(got);
	free(want);
	free(part);
	free(enc);
}

/* The entry layer checks an op with shmcoll__op_valid, a rule, and the protocols then look
 * the kernel up: the rule must name exactly the pairs that have a kernel. */
Test(kernels, op_valid_is_exactly_the_pairs_with_a_kernel)
{
	for (int dt = -1; dt <= SHMCOLL_DTYPE_COUNT; dt++)
		for (int op = -1; op <= SHMCOLL_OP_COUNT; op++)
			cr_assert_eq(shmcoll__op_valid((shmcoll_dtype)dt, (shmcoll_op)op),
			             shmcoll__reduce_lookup((shmcoll_dtype)dt, (shmcoll_op)op) !=
			                 NULL,
			             "dtype %d op %d", dt, op);
}

/* The copies into a caller's buffer move exactly n bytes and nothing else, whatever the
 * distance between source and destination modulo 4 KiB: in particular 1 to 63 bytes, where
 * shmcoll__copy_out takes its vector loop instead of memcpy. */
Test(kernels, copies_move_exactly_their_bytes)
{
	static const size_t sizes[] = {0, 1, 63, 64, 65, 2047, 2048, 2049, 4096 + 37, 70000};
	static const size_t gaps[] = {0, 1, 8, 16, 48, 63, 64, 100, 4080};
	size_t cap = 20 * 4096; /* aligned_alloc takes a multiple of the alignment */
	uint8_t *src = aligned_alloc(4096, cap), *dst = aligned_alloc(4096, cap + 4096);

	cr_assert(src && dst);
	for (size_t i = 0; i < cap; i++)
		src[i] = (uint8_t)(i * 131 + 7);
	for (size_t a = 0; a < sizeof(sizes) / sizeof(sizes[0]); a++)
		for (size_t b = 0; b < sizeof(gaps) / sizeof(gaps[0]); b++)
			for (int nt = 0; nt < 2; nt++) {
				size_t n = sizes[a], at = 4096 + gaps[b];

				memset(dst, 0xee, cap + 4096);
				if (nt)
					shmcoll__copy_nt(dst + at, src, n);
				else
					cr_assert_eq(shmcoll__copy_out(dst + at, src, n), dst + at);
				cr_assert(memcmp(dst + at, src, n) == 0, "%s: %zu bytes %zu after",
				          nt ? "copy_nt" : "copy_out", n, gaps[b]);
				for (size_t i = 0; i < cap + 4096; i++)
					if (i < at || i >= at + n)
						cr_assert_eq(dst[i], 0xee,
						             "%s wrote byte %zu of %zu",
						             nt ? "copy_nt" : "copy_out", i, n);
			}
	free(src);
	free(dst);
}
