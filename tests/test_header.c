/* test_header.c - the public header compiles on its own (it is the first
 * include here) and keeps the contract's names, order and values. */
#include "shmcoll.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>

Test(header, enums_follow_the_contract)
{
	cr_assert_eq(SHMCOLL_INT8, 0);
	cr_assert_eq(SHMCOLL_UINT8, 1);
	cr_assert_eq(SHMCOLL_INT32, 2);
	cr_assert_eq(SHMCOLL_UINT32, 3);
	cr_assert_eq(SHMCOLL_INT64, 4);
	cr_assert_eq(SHMCOLL_UINT64, 5);
	cr_assert_eq(SHMCOLL_FLOAT16, 6);
	cr_assert_eq(SHMCOLL_BFLOAT16, 7);
	cr_assert_eq(SHMCOLL_FLOAT32, 8);
	cr_assert_eq(SHMCOLL_FLOAT64, 9);
	cr_assert_eq(SHMCOLL_DTYPE_COUNT, 10);
	cr_assert_eq(SHMCOLL_SUM, 0);
	cr_assert_eq(SHMCOLL_PROD, 1);
	cr_assert_eq(SHMCOLL_MIN, 2);
	cr_assert_eq(SHMCOLL_MAX, 3);
	cr_assert_eq(SHMCOLL_AVG, 4);
	cr_assert_eq(SHMCOLL_BAND, 5);
	cr_assert_eq(SHMCOLL_BOR, 6);
	cr_assert_eq(SHMCOLL_BXOR, 7);
	cr_assert_eq(SHMCOLL_OP_COUNT, 8);
}

Test(header, config_fields_in_contract_order)
{
	shmcoll_config cfg = {1, 2, "job", 4096, 5};

	cr_assert_eq(cfg.rank, 1);
	cr_assert_eq(cfg.size, 2);
	cr_assert_str_eq(cfg.job, "job");
	cr_assert_eq(cfg.arena_bytes, 4096);
	cr_assert_eq(cfg.timeout_ms, 5);
}

Test(header, dtype_sizes)
{
	static const size_t want[SHMCOLL_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};

	for (int d = 0; d < SHMCOLL_DTYPE_COUNT; d++)
		cr_assert_eq(shmcoll_dtype_size((shmcoll_dtype)d), want[d], "dtype %d", d);
	cr_assert_eq(shmcoll_dtype_size(SHMCOLL_DTYPE_COUNT), 0);
	cr_assert_eq(shmcoll_dtype_size((shmcoll_dtype)-1), 0);
}

Test(header, strerror_covers_every_contract_code)
{
	static const int codes[] = {EINVAL,     ENOMEM, ENOSPC,   ETIMEDOUT,
	                            EOWNERDEAD, EPROTO, ECANCELED};
	size_t i, j;

	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		const char *s = shmcoll_strerror(-codes[i]);

		cr_assert(s && *s);
		cr_assert_str_eq(s, shmcoll_strerror(codes[i]), "sign does not matter");
		cr_assert_str_neq(s, shmcoll_strerror(-12345), "code %d has its own text",
		                  codes[i]);
		for (j = 0; j < i; j++)
			cr_assert_str_neq(s, shmcoll_strerror(-codes[j]));
	}
	cr_assert_not_null(shmcoll_strerror(-12345));
	cr_assert_str_eq(shmcoll_strerror(INT_MIN), shmcoll_strerror(-12345),
	                 "INT_MIN is unknown, not negated (UB)");
	cr_assert_str_eq(shmcoll_strerror(0), "success");
}
