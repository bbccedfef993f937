/* kernels_vec.h - the vector kernels of every dtype and op, and their table, written once
 * for the ISA files (kernels_avx2.c, kernels_avx512.c). Each ISA file defines its lanes,
 * loads, stores and combiners (ES_, VL_, ACC_, ld_, st_ per family; add_b, min_ps, ...;
 * addx_ps and addx_pd) and the table's name as VEC_TABLE, then includes this file once: the
 * lines below are the same for every ISA, only what they expand to differs. */
#ifndef SHMCOLL_KERNELS_VEC_H
#define SHMCOLL_KERNELS_VEC_H

#define KERNEL(name, fam, COMB, ST)                                                                \
	DEFINE_VKERNEL(name, ES_##fam, VL_##fam, ACC_##fam, ld_##fam, ld_##fam##_n, COMB, ST,      \
	               ST##_n)
#define KERNEL_IAVG(name, dt, fam, ST)                                                             \
	DEFINE_VKERNEL_IAVG(name, dt, ES_##fam, VL_##fam, ACC_##fam, ld_##fam, ld_##fam##_n,       \
	                    addx_##fam##_acc, ST, ST##_n)
#define addx_i8a_acc  addx_ps
#define addx_u8a_acc  addx_ps
#define addx_i32a_acc addx_pd
#define addx_u32a_acc addx_pd

/* Wrapping SUM/PROD and the bitwise ops do not care about signedness. */
KERNEL(b_sum, b, add_b, st_b)
KERNEL(b_prod, b, mul_b, st_b)
KERNEL(b_band, b, and_si, st_b)
KERNEL(b_bor, b, or_si, st_b)
KERNEL(b_bxor, b, xor_si, st_b)
KERNEL(i8_min, b, min_i8, st_b)
KERNEL(i8_max, b, max_i8, st_b)
KERNEL(u8_min, b, min_u8, st_b)
KERNEL(u8_max, b, max_u8, st_b)
KERNEL_IAVG(i8_avg, SHMCOLL_INT8, i8a, st_i8a)
KERNEL_IAVG(u8_avg, SHMCOLL_UINT8, u8a, st_u8a)

KERNEL(d_sum, d, add_d, st_d)
KERNEL(d_prod, d, mul_d, st_d)
KERNEL(d_band, d, and_si, st_d)
KERNEL(d_bor, d, or_si, st_d)
KERNEL(d_bxor, d, xor_si, st_d)
KERNEL(i32_min, d, min_i32, st_d)
KERNEL(i32_max, d, max_i32, st_d)
KERNEL(u32_min, d, min_u32, st_d)
KERNEL(u32_max, d, max_u32, st_d)
KERNEL_IAVG(i32_avg, SHMCOLL_INT32, i32a, st_i32a)
KERNEL_IAVG(u32_avg, SHMCOLL_UINT32, u32a, st_u32a)

KERNEL(q_sum, q, add_q, st_q)
KERNEL(q_prod, q, mul_q, st_q)
KERNEL(q_band, q, and_si, st_q)
KERNEL(q_bor, q, or_si, st_q)
KERNEL(q_bxor, q, xor_si, st_q)
KERNEL(i64_min, q, min_i64, st_q)
KERNEL(i64_max, q, max_i64, st_q)
KERNEL(u64_min, q, min_u64, st_q)
KERNEL(u64_max, q, max_u64, st_q)

KERNEL(f16_sum, f16, sum_ps, st_f16)
KERNEL(f16_prod, f16, prod_ps, st_f16)
KERNEL(f16_min, f16, min_ps, st_f16)
KERNEL(f16_max, f16, max_ps, st_f16)
KERNEL(f16_avg, f16, sum_ps, st_f16_avg)

KERNEL(bf16_sum, bf16, sum_ps, st_bf16)
KERNEL(bf16_prod, bf16, prod_ps, st_bf16)
KERNEL(bf16_min, bf16, min_ps, st_bf16)
KERNEL(bf16_max, bf16, max_ps, st_bf16)
KERNEL(bf16_avg, bf16, sum_ps, st_bf16_avg)

KERNEL(f32_sum, ps, sum_ps, st_ps)
KERNEL(f32_prod, ps, prod_ps, st_ps)
KERNEL(f32_min, ps, min_ps, st_ps)
KERNEL(f32_max, ps, max_ps, st_ps)
KERNEL(f32_avg, ps, sum_ps, st_ps_avg)

KERNEL(f64_sum, pd, sum_pd, st_pd)
KERNEL(f64_prod, pd, prod_pd, st_pd)
KERNEL(f64_min, pd, min_pd, st_pd)
KERNEL(f64_max, pd, max_pd, st_pd)
KERNEL(f64_avg, pd, sum_pd, st_pd_avg)

#define INT_ROW(w, s, avg)                                                                         \
	{                                                                                          \
		[SHMCOLL_SUM] = w##_sum, [SHMCOLL_PROD] = w##_prod, [SHMCOLL_MIN] = s##_min,       \
		[SHMCOLL_MAX] = s##_max, [SHMCOLL_AVG] = avg, [SHMCOLL_BAND] = w##_band,           \
		[SHMCOLL_BOR] = w##_bor, [SHMCOLL_BXOR] = w##_bxor,                                \
	}
#define FLOAT_ROW(p)                                                                               \
	{                                                                                          \
		[SHMCOLL_SUM] = p##_sum, [SHMCOLL_PROD] = p##_prod, [SHMCOLL_MIN] = p##_min,       \
		[SHMCOLL_MAX] = p##_max, [SHMCOLL_AVG] = p##_avg,                                  \
	}

/* 64-bit AVG is left to the scalar level: it needs a 128-bit sum and division. */
const shmcoll__kernel_table VEC_TABLE = {
    [SHMCOLL_INT8] = INT_ROW(b, i8, i8_avg),    [SHMCOLL_UINT8] = INT_ROW(b, u8, u8_avg),
    [SHMCOLL_INT32] = INT_ROW(d, i32, i32_avg), [SHMCOLL_UINT32] = INT_ROW(d, u32, u32_avg),
    [SHMCOLL_INT64] = INT_ROW(q, i64, NULL),    [SHMCOLL_UINT64] = INT_ROW(q, u64, NULL),
    [SHMCOLL_FLOAT16] = FLOAT_ROW(f16),         [SHMCOLL_BFLOAT16] = FLOAT_ROW(bf16),
    [SHMCOLL_FLOAT32] = FLOAT_ROW(f32),         [SHMCOLL_FLOAT64] = FLOAT_ROW(f64),
};

#endif
