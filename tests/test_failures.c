/* test_failures.c - what a rank sees when a call cannot complete: a peer that
 * does not arrive (-ETIMEDOUT naming it), mismatched calls (-EPROTO on every
 * rank), abort (-ECANCELED, waking ranks that would wait forever), and
 * -ECANCELED with the cause on every later call. No test depends on timing:
 * ranks that must hold back wait for a flag, not for a delay. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/api/probe.h"
#include "shm/atomics.h"
#include "tests/harness.h"

/* Shared by the forked ranks of one run (MAP_SHARED before the fork). */
struct shared {
	_Atomic int returned;
};

static struct shared *shared_new(void)
{
	struct shared *s =
	    mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(s, MAP_FAILED);
	atomic_init(&s->returned, 0);
	return s;
}

/* Polls until cond holds; bounded so a broken library fails, not hangs. */
#define AWAIT(cond)                                                                                \
	do {                                                                                       \
		int tries_ = 0;                                                                    \
		while (!(cond)) {                                                                  \
			if (++tries_ > 60000)                                                      \
				return 90;                                                         \
			usleep(1000);                                                              \
		}                                                                                  \
	} while (0)

static int timeout_body(shmcoll_comm *c, int rank, void *arg)
{
	struct shared *s = arg;
	int32_t x[4] = {1, 2, 3, 4}, y[4];
	int rc;

	if (rank == 2) {
		/* Stay away until both peers gave up, then find it broken. */
		AWAIT(atomic_load(&s->returned) == 2);
		rc = shmcoll_allreduce(x, y, 4, SHMCOLL_INT32, SHMCOLL_SUM, c);
		return rc == -ECANCELED ? 0 : 1;
	}
	rc = shmcoll_allreduce(x, y, 4, SHMCOLL_INT32, SHMCOLL_SUM, c);
	atomic_fetch_add(&s->returned, 1);
	if (rc != -ETIMEDOUT)
		return 2;
	if (!strstr(shmcoll_last_error(c), "shmcoll_allreduce") ||
	    !strstr(shmcoll_last_error(c), "rank(s) 2"))
		return 3;
	rc = shmcoll_barrier(c);
	if (rc != -ECANCELED || !strstr(shmcoll_last_error(c), "timed out"))
		return 4; /* later calls quote the cause */
	return 0;
}

Test(failures, timeout_names_the_missing_rank, .timeout = 120)
{
	th_opts o = {.timeout_ms = 300, .wall_ms = 100000};
	struct shared *s = shared_new();
	th_result res;

	th_run_ranks(3, timeout_body, s, &o, &res);
	cr_assert(res.ok, "%s", res.summary);
	munmap(s, sizeof(*s));
}

struct mismatch {
	int kind; /* what rank 2 does differently */
};

static int mismatch_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct mismatch *m = arg;
	int32_t x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0};
	int rc;

	if (rank != 2)
		rc = shmcoll_allreduce(x, y, 5, SHMCOLL_INT32, SHMCOLL_SUM, c);
	else if (m->kind == 0)
		rc = shmcoll_allreduce(x, y, 6, SHMCOLL_INT32, SHMCOLL_SUM, c);
	else if (m->kind == 1)
		rc = shmcoll_allreduce(x, y, 5, SHMCOLL_UINT32, SHMCOLL_SUM, c);
	else if (m->kind == 2)
		rc = shmcoll_allreduce(x, y, 5, SHMCOLL_INT32, SHMCOLL_MAX, c);
	else
		rc = shmcoll_bcast(x, 5, SHMCOLL_INT32, 0, c);
	if (rc != -EPROTO)
		return 1;
	if (!strstr(shmcoll_last_error(c), "mismatched"))
		return 2;
	if (shmcoll_barrier(c) != -ECANCELED)
		return 3;
	return 0;
}

Test(failures, mismatched_calls_fail_on_every_rank, .timeout = 120)
{
	th_opts o = {.timeout_ms = 20000, .wall_ms = 60000};
	th_result res;

	for (int k = 0; k < 4; k++) {
		struct mismatch m = {.kind = k};

		th_run_ranks(3, mismatch_body, &m, &o, &res);
		cr_assert(res.ok, "kind %d: %s", k, res.summary);
	}
}

/* An inline call (its call word in a message line, not next to seq) against
 * a staged one: the rank in the staged call still finds the mismatch and
 * names the collective the other rank called, whether that rank is the one
 * giving the data (kind 0: the root of a small bcast, which returns at once
 * and fails its next call) or one only reading it (kind 1). */
struct inline_mismatch {
	int kind;
};

static int inline_mismatch_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct inline_mismatch *m = arg;
	int32_t x[2] = {1, 2};
	int rc;

	if (rank == 0) {
		rc = shmcoll_bcast(x, 2, SHMCOLL_INT32, m->kind == 0 ? 0 : 1, c);
		if (m->kind == 0) {
			if (rc != 0)
				return 1;
			rc = shmcoll_barrier(c);
		}
		if (rc != -EPROTO)
			return 2;
		return 0;
	}
	rc = shmcoll_barrier(c);
	if (rc != -EPROTO)
		return 3;
	if (!strstr(shmcoll_last_error(c), "bcast"))
		return 4;
	return 0;
}

Test(failures, inline_call_against_staged_call_names_it, .timeout = 120)
{
	th_opts o = {.timeout_ms = 20000, .wall_ms = 60000};
	th_result res;

	for (int k = 0; k < 2; k++) {
		struct inline_mismatch m = {.kind = k};

		th_run_ranks(2, inline_mismatch_body, &m, &o, &res);
		cr_assert(res.ok, "kind %d: %s", k, res.summary);
	}
}

static int abort_body(shmcoll_comm *c, int rank, void *arg)
{
	(void)arg;
	if (rank == 1) {
		/* Abort only once both peers are inside the barrier: they have
		 * published its step and wait (forever) for ours. */
		for (int p = 0; p < 3; p += 2)
			AWAIT(shmcoll__probe_step(c, p) == shmcoll__probe_my_step(c) + 1);
		if (shmcoll_comm_abort(c) != 0)
			return 1;
		return shmcoll_barrier(c) == -ECANCELED ? 0 : 2;
	}
	if (shmcoll_barrier(c) != -ECANCELED)
		return 3;
	return shmcoll_bcast(&rank, 1, SHMCOLL_INT32, 0, c) == -ECANCELED ? 0 : 4;
}

Test(failures, abort_wakes_ranks_that_wait_forever, .timeout = 120)
{
	th_opts o = {.timeout_ms = -1, .wall_ms = 60000};
	th_result res;

	th_run_ranks(3, abort_body, NULL, &o, &res);
	cr_assert(res.ok, "%s", res.summary);
}

static int after_einval_body(shmcoll_comm *c, int rank, void *arg)
{
	int32_t x = rank + 1, y = 0;

	(void)arg;
	if (shmcoll_allreduce(&x, &y, 1, SHMCOLL_INT32, SHMCOLL_BAND + 100, c) != -EINVAL)
		return 1;
	if (shmcoll_allreduce(&x, &y, 1, SHMCOLL_INT32, SHMCOLL_SUM, c) != 0 || y != 6)
		return 2;
	return 0;
}

Test(failures, einval_does_not_break_the_communicator, .timeout = 60)
{
	th_opts o = {.timeout_ms = 20000, .wall_ms = 30000};
	th_result res;

	th_run_ranks(3, after_einval_body, NULL, &o, &res);
	cr_assert(res.ok, "%s", res.summary);
}

/* Ranks that run different protocols for one call (different SHMCOLL_ALGO)
 * get -EPROTO naming the protocols, never a hang or garbage. The choice is
 * made per rank, so each rank forces its own here. */
static int algo_mismatch_body(shmcoll_comm *c, int rank, void *arg)
{
	static float x[4096], y[4096];
	int rc;

	(void)arg;
	if (shmcoll__probe_set_algo(c, rank == 1 ? "allreduce:direct" : "allreduce:flat") != 0)
		return 3;
	rc = shmcoll_allreduce(x, y, 4096, SHMCOLL_FLOAT32, SHMCOLL_SUM, c);
	if (rc != -EPROTO)
		return 1;
	if (!strstr(shmcoll_last_error(c), "algorithm") &&
	    !strstr(shmcoll_last_error(c), "mismatched"))
		return 2;
	return 0;
}

Test(failures, mismatched_algorithms_fail_on_every_rank, .timeout = 120)
{
	th_opts o = {.timeout_ms = 20000, .wall_ms = 60000};
	th_result res;

	th_run_ranks(3, algo_mismatch_body, NULL, &o, &res);
	cr_assert(res.ok, "%s", res.summary);
}

/* A tuning variable the library cannot use makes shmcoll_comm_create fail
 * with -EINVAL and a message naming it, instead of being ignored. */
Test(failures, bad_tuning_variables_fail_create, .timeout = 60)
{
	static const char *const cases[][3] = {
	    {"SHMCOLL_ALGO", "fastest", "SHMCOLL_ALGO"},
	    {"SHMCOLL_ALGO", "gather:direct", "gather"},
	    {"SHMCOLL_ALGO", "bogus:flat", "bogus"},
	    {"SHMCOLL_ALGO", "allreduce:tree", "tree"},
	    {"SHMCOLL_ALGO", "allreduce:topo", "topo"},
	    {"SHMCOLL_CHUNK_BYTES", "12", "SHMCOLL_CHUNK_BYTES"},
	    {"SHMCOLL_CHUNK_BYTES", "1k", "SHMCOLL_CHUNK_BYTES"},
	    {"SHMCOLL_NT", "2", "SHMCOLL_NT"},
	};
	char job[64];
	shmcoll_config cfg = {.rank = 0, .size = 1, .timeout_ms = 5000};
	shmcoll_comm *c = NULL;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		th_job_name(job, sizeof(job));
		cfg.job = job;
		cr_assert(setenv(cases[i][0], cases[i][1], 1) == 0);
		rc = shmcoll_comm_create(&cfg, &c);
		cr_assert_eq(rc, -EINVAL, "%s=%s: create returned %d", cases[i][0], cases[i][1],
		             rc);
		cr_assert(strstr(shmcoll_last_error(NULL), cases[i][2]), "%s=%s: message '%s'",
		          cases[i][0], cases[i][1], shmcoll_last_error(NULL));
		cr_assert(unsetenv(cases[i][0]) == 0);
	}
	/* Good values are taken. */
	cr_assert(setenv("SHMCOLL_ALGO", "allreduce:direct,bcast:tree", 1) == 0);
	cr_assert(setenv("SHMCOLL_CHUNK_BYTES", "65536", 1) == 0);
	th_job_name(job, sizeof(job));
	cfg.job = job;
	rc = shmcoll_comm_create(&cfg, &c);
	cr_assert_eq(rc, 0, "good tuning variables: %d %s", rc, shmcoll_last_error(NULL));
	cr_assert_str_eq(shmcoll__probe_algo(c, "allreduce"), "direct");
	cr_assert_str_eq(shmcoll__probe_algo(c, "bcast"), "tree");
	cr_assert_str_eq(shmcoll__probe_algo(c, "reduce"), "auto");
	cr_assert_eq(shmcoll__probe_chunk_bytes(c), 65536);
	shmcoll_comm_destroy(c);
}
