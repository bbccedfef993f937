/* values.c - exact test values for every dtype and operation: what each rank (or kernel source)
 * contributes, what the result must be, and elements stored and compared bit for bit, with the
 * benchmark's own float16/bfloat16 conversions (storage is uint16_t, as in shmcoll). */
#include <inttypes.h>
#include <string.h>

#include "bench/bench.h"

/* exact: every integer of magnitude <= exact is representable (floats) or in range (integers;
 * uint64 is capped where the checks compute in int64). */
struct dtype_desc {
	size_t size;
	int is_signed;
	int64_t exact;
};

static const struct dtype_desc dtypes[SHMCOLL_DTYPE_COUNT] = {
    [SHMCOLL_INT8] = {1, 1, INT8_MAX},
    [SHMCOLL_UINT8] = {1, 0, UINT8_MAX},
    [SHMCOLL_INT32] = {4, 1, INT32_MAX},
    [SHMCOLL_UINT32] = {4, 0, UINT32_MAX},
    [SHMCOLL_INT64] = {8, 1, INT64_MAX},
    [SHMCOLL_UINT64] = {8, 0, INT64_MAX},
    [SHMCOLL_FLOAT16] = {2, 1, 2048},
    [SHMCOLL_BFLOAT16] = {2, 1, 256},
    [SHMCOLL_FLOAT32] = {4, 1, INT64_C(1) << 24},
    [SHMCOLL_FLOAT64] = {8, 1, INT64_C(1) << 53},
};

/* The patterns. Values stay small and non-negative where a sum must stay exact, so every
 * partial sum (a ring or a tree adds subsets, rounding to the dtype at each step) is exact too. */
enum {
	GEN_SCALED, /* sum: (r+1) * (i%13 + 1), mpi-bench's; integer sums may wrap */
	GEN_SMALL,  /* sum when that would not be exact: (r + i) % m, m = exact / n */
	GEN_AVG,  /* avg: i%13 + 1 + d(r, i), the last contributor making the sum divisible by n */
	GEN_SAME, /* avg when that would not be exact: i % m on every contributor */
	GEN_POW2, /* prod: +-1 or +-2, at most one 2 in m consecutive contributors */
	GEN_SPREAD, /* min/max: (7r + 3i) % 23, minus 11 where the dtype is signed */
	GEN_BITS,   /* bitwise: scrambled bits */
};

/* Here rather than in common.c, so that this file needs only <shmcoll.h>'s types, not the
 * library: mpi-bench (bench/mpi/) compiles it in for the same exact values. */
int bench_dtype_is_float(shmcoll_dtype dtype)
{
	return dtype == SHMCOLL_FLOAT16 || dtype == SHMCOLL_BFLOAT16 || dtype == SHMCOLL_FLOAT32 ||
	       dtype == SHMCOLL_FLOAT64;
}

static int64_t pat(size_t i)
{
	return (int64_t)(i % 13 + 1);
}

static uint64_t mix(uint64_t a, uint64_t b)
{
	/* splitmix64 of a combination: cheap, and every bit depends on both inputs. */
	uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

void bench_vals_init(struct bench_vals *v, shmcoll_dtype dtype, shmcoll_op op, int n)
{
	const struct dtype_desc *d = &dtypes[dtype];
	int64_t tri = (int64_t)n * (n + 1) / 2;
	int64_t e;

	v->dtype = dtype;
	v->op = op;
	v->n = n;
	v->m = 1;
	switch (op) {
	case SHMCOLL_SUM:
		if (!bench_dtype_is_float(dtype) || tri * 13 <= d->exact) {
			v->gen = GEN_SCALED;
		} else {
			v->gen = GEN_SMALL;
			v->m = max64(1, d->exact / n);
		}
		break;
	case SHMCOLL_AVG:
		/* The sum is at most 13n + 6(n-1) + (n-1) <= 20n. */
		if ((int64_t)n * 20 <= d->exact) {
			v->gen = GEN_AVG;
		} else {
			v->gen = GEN_SAME;
			v->m = max64(1, d->exact / n);
		}
		break;
	case SHMCOLL_PROD:
		/* At most e factors of 2 per element: 2^15 is float16's largest power of two,
		 * 2^60 keeps the check's int64 product exact. */
		e = dtype == SHMCOLL_FLOAT16 ? 15 : 60;
		v->gen = GEN_POW2;
		v->m = max64(2, (n + e - 1) / e);
		break;
	case SHMCOLL_MIN:
	case SHMCOLL_MAX:
		v->gen = GEN_SPREAD;
		break;
	default:
		v->gen = GEN_BITS;
		break;
	}
}

static int64_t avg_d(int r, size_t i)
{
	return (int64_t)(((size_t)r * 5 + i) % 7);
}

int64_t bench_vals_input(const struct bench_vals *v, int r, size_t i)
{
	int64_t x, sum;
	int q;

	switch (v->gen) {
	case GEN_SCALED:
		return (int64_t)(r + 1) * pat(i);
	case GEN_SMALL:
		return (int64_t)(((size_t)r + i) % (uint64_t)v->m);
	case GEN_AVG:
		if (r < v->n - 1)
			return pat(i) + avg_d(r, i);
		for (sum = 0, q = 0; q < v->n - 1; q++)
			sum += avg_d(q, i);
		return pat(i) + (v->n - sum % v->n) % v->n;
	case GEN_SAME:
		return (int64_t)(i % (uint64_t)v->m);
	case GEN_POW2:
		x = (i + (size_t)r) % (uint64_t)v->m == 0 ? 2 : 1;
		return (i * 3 + (size_t)r) % 7 == 1 ? -x : x;
	case GEN_SPREAD:
		x = (int64_t)(((size_t)r * 7 + i * 3) % 23);
		return dtypes[v->dtype].is_signed ? x - 11 : x;
	default:
		if (v->op == SHMCOLL_BAND) /* mostly ones, so the AND of many is not all zero */
			return (int64_t)(mix((uint64_t)r, i) | mix((uint64_t)r + 7919, i));
		return (int64_t)mix((uint64_t)r, i);
	}
}

int64_t bench_vals_result(const struct bench_vals *v, size_t i)
{
	/* Sums and products in uint64: wrapping there and truncating when stored is the
	 * integer dtypes' wrapping; on floats the patterns keep them far from overflow. */
	uint64_t acc = (uint64_t)bench_vals_input(v, 0, i);
	int64_t x, best = (int64_t)acc;
	int r;

	for (r = 1; r < v->n; r++) {
		x = bench_vals_input(v, r, i);
		switch (v->op) {
		case SHMCOLL_SUM:
		case SHMCOLL_AVG:
			acc += (uint64_t)x;
			break;
		case SHMCOLL_PROD:
			acc *= (uint64_t)x;
			break;
		case SHMCOLL_MIN:
			best = x < best ? x : best;
			break;
		case SHMCOLL_MAX:
			best = x > best ? x : best;
			break;
		case SHMCOLL_BAND:
			acc &= (uint64_t)x;
			break;
		case SHMCOLL_BOR:
			acc |= (uint64_t)x;
			break;
		default:
			acc ^= (uint64_t)x;
			break;
		}
	}
	if (v->op == SHMCOLL_MIN || v->op == SHMCOLL_MAX)
		return best;
	if (v->op == SHMCOLL_AVG) /* non-negative and divisible: exact on every dtype */
		return (int64_t)acc / v->n;
	return (int64_t)acc;
}

int64_t bench_tag(shmcoll_dtype dtype, int r, size_t i)
{
	if (bench_dtype_is_float(dtype))
		return (int64_t)r * 1000 + (int64_t)(i % 97);
	return (int64_t)mix((uint64_t)r, i);
}

int64_t bench_tag_a2a(shmcoll_dtype dtype, int src, int dst, size_t i)
{
	if (bench_dtype_is_float(dtype))
		return (int64_t)src * 1000 + (int64_t)dst * 10 + (int64_t)(i % 7);
	return (int64_t)mix((uint64_t)src << 32 | (uint32_t)dst, i);
}

/* float16 and bfloat16, rounding to nearest even; a NaN stays a quiet NaN. */
static uint32_t f32_bits(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	return x;
}

static float bits_f32(uint32_t x)
{
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

static uint16_t to_f16(float f)
{
	uint32_t x = f32_bits(f), a = x & 0x7fffffffu, m, r, rem, half;
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	int s;

	if (a > 0x7f800000u)
		return sign | 0x7e00u;
	if (a >= 0x477ff000u) /* >= 65520, halfway past the largest finite 65504: infinity */
		return sign | 0x7c00u;
	if (a >= 0x38800000u) { /* >= 2^-14: normal; rebias 127 -> 15, round off 13 bits */
		a -= (uint32_t)(127 - 15) << 23;
		return (uint16_t)(sign | ((a + 0xfffu + ((a >> 13) & 1u)) >> 13));
	}
	if (a <= 0x33000000u) /* <= 2^-25: rounds to zero */
		return sign;
	/* Subnormal: the value is m * 2^(e-150); in units of 2^-24 that is m >> (126 - e). */
	m = (a & 0x7fffffu) | 0x800000u;
	s = 126 - (int)(a >> 23);
	r = m >> s;
	rem = m & ((1u << s) - 1);
	half = 1u << (s - 1);
	if (rem > half || (rem == half && (r & 1u)))
		r++;
	return (uint16_t)(sign | r);
}

static float from_f16(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;

	if (e == 0)
		return bits_f32(sign | f32_bits((float)m * 0x1p-24f));
	if (e == 0x1f)
		return bits_f32(sign | 0x7f800000u | (m << 13));
	return bits_f32(sign | ((e + 127 - 15) << 23) | (m << 13));
}

static uint16_t to_bf16(float f)
{
	uint32_t x = f32_bits(f);

	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u);
	return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

void bench_elem_store(void *buf, size_t i, shmcoll_dtype dtype, int64_t v)
{
	switch (dtype) {
	case SHMCOLL_INT8:
	case SHMCOLL_UINT8:
		((uint8_t *)buf)[i] = (uint8_t)v;
		break;
	case SHMCOLL_INT32:
	case SHMCOLL_UINT32:
		((uint32_t *)buf)[i] = (uint32_t)v;
		break;
	case SHMCOLL_INT64:
	case SHMCOLL_UINT64:
		((uint64_t *)buf)[i] = (uint64_t)v;
		break;
	case SHMCOLL_FLOAT16:
		((uint16_t *)buf)[i] = to_f16((float)v);
		break;
	case SHMCOLL_BFLOAT16:
		((uint16_t *)buf)[i] = to_bf16((float)v);
		break;
	case SHMCOLL_FLOAT32:
		((float *)buf)[i] = (float)v;
		break;
	default:
		((double *)buf)[i] = (double)v;
		break;
	}
}

int bench_elem_equal(const void *buf, size_t i, shmcoll_dtype dtype, int64_t v)
{
	size_t size = dtypes[dtype].size;
	_Alignas(8) unsigned char want[8];

	bench_elem_store(want, 0, dtype, v);
	return memcmp((const unsigned char *)buf + i * size, want, size) == 0;
}

void bench_elem_format(const void *buf, size_t i, shmcoll_dtype dtype, char *s, size_t len)
{
	switch (dtype) {
	case SHMCOLL_INT8:
		snprintf(s, len, "%d", ((const int8_t *)buf)[i]);
		break;
	case SHMCOLL_UINT8:
		snprintf(s, len, "%u", ((const uint8_t *)buf)[i]);
		break;
	case SHMCOLL_INT32:
		snprintf(s, len, "%" PRId32, ((const int32_t *)buf)[i]);
		break;
	case SHMCOLL_UINT32:
		snprintf(s, len, "%" PRIu32, ((const uint32_t *)buf)[i]);
		break;
	case SHMCOLL_INT64:
		snprintf(s, len, "%" PRId64, ((const int64_t *)buf)[i]);
		break;
	case SHMCOLL_UINT64:
		snprintf(s, len, "%" PRIu64, ((const uint64_t *)buf)[i]);
		break;
	case SHMCOLL_FLOAT16:
		snprintf(s, len, "%g (0x%04x)", (double)from_f16(((const uint16_t *)buf)[i]),
		         ((const uint16_t *)buf)[i]);
		break;
	case SHMCOLL_BFLOAT16:
		snprintf(s, len, "%g (0x%04x)", (double)from_bf16(((const uint16_t *)buf)[i]),
		         ((const uint16_t *)buf)[i]);
		break;
	case SHMCOLL_FLOAT32:
		snprintf(s, len, "%g", (double)((const float *)buf)[i]);
		break;
	default:
		snprintf(s, len, "%g", ((const double *)buf)[i]);
		break;
	}
}

void bench_value_format(shmcoll_dtype dtype, int64_t v, char *s, size_t len)
{
	_Alignas(8) unsigned char tmp[8];

	bench_elem_store(tmp, 0, dtype, v);
	bench_elem_format(tmp, 0, dtype, s, len);
}
