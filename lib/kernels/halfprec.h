/* halfprec.h - float16 and bfloat16 to and from float32, one element at a time: the scalar
 * definition every reduction over them follows (lib/kernels/kernels.c, and the Python
 * extension's folds, python/src/fold.c, which must give the same bits and links only the
 * public API). Header-only and without dependencies, so both compile the same code. */
#ifndef SHMCOLL_KERNELS_HALFPREC_H
#define SHMCOLL_KERNELS_HALFPREC_H

#include <stdint.h>
#include <string.h>

/* Conversions. The widening ones are exact (a NaN keeps its sign and payload); the narrowing
 * ones round to nearest even, turn overflow into infinity, and turn a NaN into a quiet NaN
 * with the same sign and the top payload bits, never into an infinity. */

static inline uint32_t f32_bits(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	return x;
}

static inline float bits_f32(uint32_t x)
{
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

static inline float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t mant = h & 0x3ffu;

	if (exp == 0) {
		/* Zero or subnormal: mant * 2^-24 is exact in float32 (a normal number there). */
		return bits_f32(sign | f32_bits((float)mant * 0x1p-24f));
	}
	if (exp == 0x1f)
		return bits_f32(sign | 0x7f800000u | (mant << 13));
	return bits_f32(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

static inline uint16_t f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	uint32_t abs = x & 0x7fffffffu;
	uint32_t h, rem, half;

	if (abs > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
	if (abs >= 0x47800000u) /* >= 2^16: infinity, or finite beyond the rounding range */
		return (uint16_t)(sign | 0x7c00u);
	if (abs >= 0x38800000u) { /* >= 2^-14: normal in float16 */
		h = (abs - ((uint32_t)(127 - 15) << 23)) >> 13;
		rem = abs & 0x1fffu;
		/* A carry out of the mantissa bumps the exponent, up to 0x7c00 = infinity. */
		if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
			h++;
		return (uint16_t)(sign | h);
	}
	if (abs <= 0x33000000u) /* <= 2^-25, half the smallest subnormal: ties to even 0 */
		return sign;
	/* Subnormal result: the value is m * 2^(e - 150) and a float16 subnormal unit is 2^-24,
	 * so the unit count is m >> (126 - e), with 14 <= 126 - e <= 24. Rounding up from
	 * 0x3ff units gives 0x400, the smallest normal, which is the right encoding. */
	{
		uint32_t e = abs >> 23;
		uint32_t m = (abs & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126 - e;

		h = m >> shift;
		rem = m & ((1u << shift) - 1);
		half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1u)))
			h++;
		return (uint16_t)(sign | h);
	}
}

static inline float bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

static inline uint16_t f32_to_bf16(float f)
{
	uint32_t x = f32_bits(f);

	/* A NaN must not take the rounding path: a payload in the low bits only would round into
	 * the infinity pattern, and 0x7fffffff would carry into the sign. */
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x0040u);
	/* Adding 0x7fff plus the lowest kept bit rounds to nearest even; the largest finite
	 * values carry into the exponent and give infinity, as overflow should. */
	return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

#endif
