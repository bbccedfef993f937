/* test_name.c - arena names: one per (user, job), valid for shm_open. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shm/name.h"

Test(name, deterministic_and_per_job)
{
	char a[SHMCOLL_NAME_MAX], b[SHMCOLL_NAME_MAX], c[SHMCOLL_NAME_MAX], prefix[64];

	cr_assert_eq(shmcoll__arena_name(a, sizeof(a), "job-1"), 0);
	cr_assert_eq(shmcoll__arena_name(b, sizeof(b), "job-1"), 0);
	cr_assert_eq(shmcoll__arena_name(c, sizeof(c), "job-2"), 0);
	cr_assert_str_eq(a, b);
	cr_assert_str_neq(a, c);
	cr_assert_eq(shmcoll__arena_prefix(prefix, sizeof(prefix)), 0);
	cr_assert_eq(a[0], '/');
	cr_assert_eq(strncmp(a + 1, prefix, strlen(prefix)), 0, "%s starts with %s", a, prefix);
}

Test(name, hostile_jobs_stay_one_path_component)
{
	const char *jobs[] = {"../../etc/passwd", "a/b", "x y\tz", "\xff\xfe", "."};
	char n[SHMCOLL_NAME_MAX], m[SHMCOLL_NAME_MAX];
	size_t i;

	for (i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++) {
		cr_assert_eq(shmcoll__arena_name(n, sizeof(n), jobs[i]), 0);
		cr_assert_null(strchr(n + 1, '/'), "%s", n);
		cr_assert_null(strchr(n, ' '), "%s", n);
	}
	/* Jobs that sanitise alike still differ by the hash. */
	shmcoll__arena_name(n, sizeof(n), "a/b");
	shmcoll__arena_name(m, sizeof(m), "a_b");
	cr_assert_str_neq(n, m);
}

Test(name, long_jobs_fit_and_stay_distinct)
{
	char job1[1000], job2[1000], n[SHMCOLL_NAME_MAX], m[SHMCOLL_NAME_MAX];

	memset(job1, 'x', sizeof(job1) - 1);
	job1[sizeof(job1) - 1] = '\0';
	memcpy(job2, job1, sizeof(job1));
	job2[900] = 'y';
	cr_assert_eq(shmcoll__arena_name(n, sizeof(n), job1), 0);
	cr_assert_eq(shmcoll__arena_name(m, sizeof(m), job2), 0);
	cr_assert_lt(strlen(n), (size_t)SHMCOLL_NAME_MAX);
	cr_assert_lt(strlen(n), 255u, "a file name on tmpfs");
	cr_assert_str_neq(n, m);
}

Test(name, bad_arguments)
{
	char n[SHMCOLL_NAME_MAX];

	cr_assert_eq(shmcoll__arena_name(n, sizeof(n), NULL), -EINVAL);
	cr_assert_eq(shmcoll__arena_name(n, sizeof(n), ""), -EINVAL);
	cr_assert_eq(shmcoll__arena_name(n, 8, "job"), -EINVAL);
	cr_assert_eq(shmcoll__arena_name(NULL, sizeof(n), "job"), -EINVAL);
}
