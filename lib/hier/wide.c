/* wide.c - reductions carried wide between the stages of a multi-node call (impl.h), so two
 * levels of folding give the bits one fold over every rank gives. */
#include <string.h>

#include "lib/hier/impl.h"

struct wide hier__widen(shmcoll_dtype dt, shmcoll_op op)
{
	struct wide w = {W_NATIVE, dt, op == SHMCOLL_AVG ? SHMCOLL_SUM : op, 0, 1, NULL};

	if ((dt == SHMCOLL_FLOAT16 || dt == SHMCOLL_BFLOAT16) &&
	    (op == SHMCOLL_SUM || op == SHMCOLL_PROD || op == SHMCOLL_AVG)) {
		w.mode = W_F32;
		w.dt = SHMCOLL_FLOAT32;
	} else if (op == SHMCOLL_AVG && dt != SHMCOLL_FLOAT32 && dt != SHMCOLL_FLOAT64) {
		w.mode = W_QR;
		w.dt = dt == SHMCOLL_UINT64 ? SHMCOLL_UINT64 : SHMCOLL_INT64;
		w.mult = 2;
	}
	w.es = shmcoll__dtype_size(w.dt);
	w.fold = shmcoll__reduce_lookup(w.dt, w.op);
	return w;
}

/* Callers' buffers may sit at any address (the contract asks no alignment),
 * so their elements are read and written through memcpy. */
static uint16_t u16_at(const void *v, size_t i)
{
	uint16_t x;

	memcpy(&x, (const uint8_t *)v + 2 * i, 2);
	return x;
}

/* Loads element i of a vector of integer type dt as int64 (uint64 as is). */
static int64_t int_at(const void *v, shmcoll_dtype dt, size_t i)
{
	const uint8_t *p = (const uint8_t *)v + i * shmcoll__dtype_size(dt);
	int32_t i32;
	uint32_t u32;
	int64_t i64;

	switch (dt) {
	case SHMCOLL_INT8:
		return (int8_t)*p;
	case SHMCOLL_UINT8:
		return *p;
	case SHMCOLL_INT32:
		memcpy(&i32, p, 4);
		return i32;
	case SHMCOLL_UINT32:
		memcpy(&u32, p, 4);
		return u32;
	default:
		memcpy(&i64, p, 8);
		return i64;
	}
}

static void int_put(void *v, shmcoll_dtype dt, size_t i, int64_t x)
{
	uint8_t *p = (uint8_t *)v + i * shmcoll__dtype_size(dt);
	int32_t i32 = (int32_t)x;

	switch (dt) {
	case SHMCOLL_INT8:
	case SHMCOLL_UINT8:
		*p = (uint8_t)x;
		break;
	case SHMCOLL_INT32:
	case SHMCOLL_UINT32:
		memcpy(p, &i32, 4);
		break;
	default:
		memcpy(p, &x, 8);
		break;
	}
}

/* The wide form of n elements of src (dtype dt) into dst. W_QR: each x as
 * the pair (q, r) with x = q * S + r and 0 <= r < S, interleaved, so a sum
 * of pairs holds the exact sum of the xs as (sum q) * S + (sum r). */
void hier__wide_in(const struct wide *w, void *dst, const void *src, size_t n, shmcoll_dtype dt,
                   uint64_t S)
{
	size_t i;

	if (w->mode == W_F32) {
		float (*cvt)(uint16_t) =
		    dt == SHMCOLL_FLOAT16 ? shmcoll__f16_to_f32 : shmcoll__bf16_to_f32;

		for (i = 0; i < n; i++)
			((float *)dst)[i] = cvt(u16_at(src, i));
		return;
	}
	if (dt == SHMCOLL_UINT64) {
		for (i = 0; i < n; i++) {
			uint64_t x = (uint64_t)int_at(src, dt, i);

			((uint64_t *)dst)[2 * i] = x / S;
			((uint64_t *)dst)[2 * i + 1] = x % S;
		}
		return;
	}
	for (i = 0; i < n; i++) {
		int64_t x = int_at(src, dt, i), q = x / (int64_t)S, r = x % (int64_t)S;

		if (r < 0) {
			r += (int64_t)S;
			q--;
		}
		((int64_t *)dst)[2 * i] = q;
		((int64_t *)dst)[2 * i + 1] = r;
	}
}

/* The final n elements (dtype dt, op) from the wide result src: AVG divided
 * by S (integers truncated toward zero), 16-bit floats rounded once. dst may
 * be src for W_NATIVE. */
void hier__wide_out(const struct wide *w, void *dst, const void *src, size_t n, shmcoll_dtype dt,
                    shmcoll_op op, uint64_t S)
{
	size_t i;

	if (w->mode == W_F32) {
		uint16_t (*cvt)(float) =
		    dt == SHMCOLL_FLOAT16 ? shmcoll__f32_to_f16 : shmcoll__f32_to_bf16;

		for (i = 0; i < n; i++) {
			float x = ((const float *)src)[i];
			uint16_t h = cvt(op == SHMCOLL_AVG ? x / (float)S : x);

			memcpy((uint8_t *)dst + 2 * i, &h, 2);
		}
		return;
	}
	if (w->mode == W_NATIVE) {
		if (dst != src)
			memcpy(dst, src, n * w->es);
		if (op != SHMCOLL_AVG)
			return;
		for (i = 0; i < n; i++) {
			uint8_t *p = (uint8_t *)dst + i * w->es;

			if (dt == SHMCOLL_FLOAT32) {
				float f;

				memcpy(&f, p, 4);
				f /= (float)S;
				memcpy(p, &f, 4);
			} else {
				double d;

				memcpy(&d, p, 8);
				d /= (double)S;
				memcpy(p, &d, 8);
			}
		}
		return;
	}
	if (dt == SHMCOLL_UINT64) {
		for (i = 0; i < n; i++) {
			const uint64_t *p = (const uint64_t *)src + 2 * i;

			int_put(dst, dt, i, (int64_t)(p[0] + p[1] / S));
		}
		return;
	}
	for (i = 0; i < n; i++) {
		const int64_t *p = (const int64_t *)src + 2 * i;
		/* sum = S * q + r with 0 <= r: floor(sum / S) = q + r / S, and
		 * truncation toward zero is one more when that is negative and
		 * inexact. The sum of the qs may have wrapped (each q rounds
		 * down, so for values near the type's minimum it can fall below
		 * it) but floor(sum / S) fits: added modulo 2^64, it is exact. */
		int64_t f = (int64_t)((uint64_t)p[0] + (uint64_t)(p[1] / (int64_t)S));
		int64_t rem = p[1] % (int64_t)S;

		int_put(dst, dt, i, f + (f < 0 && rem != 0));
	}
}
