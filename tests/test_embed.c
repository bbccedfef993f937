/* test_embed.c - communicators a host library makes (lib/embed.c): from its
 * own out-of-band allgather over any group of its ranks, several alive and
 * used at once, and by shmcoll_comm_split and shmcoll_comm_dup; with the
 * ranks as processes and as threads; and the errors of each.
 *
 * The "host" of the process tests is a parent communicator made by the
 * harness: its shmcoll_allgather carries the out-of-band exchange, each group
 * picking its members' entries from a job-wide allgather (every rank creates
 * its group's communicator at the same point, as a host's ranks would). A
 * body returns 0 or a code naming the check that failed. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/api/probe.h"
#include "tests/harness.h"

#define TIMEOUT_MS 30000

/* ---- an out-of-band allgather over a group of the parent's ranks ---- */

struct group {
	shmcoll_comm *parent;
	int n;           /* members */
	int members[16]; /* parent ranks, in group order */
	int calls;       /* allgathers made through it */
};

/* Every parent rank calls this at once (each for its own group): one
 * parent-wide allgather, of which a group keeps its members' entries. */
static int group_allgather(const void *in, void *out, size_t len, void *ctx)
{
	struct group *g = ctx;
	int P = shmcoll_comm_size(g->parent), i, rc;
	uint8_t *all = malloc(len * (size_t)P);

	if (!all)
		return -1;
	g->calls++;
	rc = shmcoll_allgather(in, all, len, SHMCOLL_UINT8, g->parent);
	for (i = 0; rc == 0 && i < g->n; i++)
		memcpy((uint8_t *)out + (size_t)i * len, all + (size_t)g->members[i] * len, len);
	free(all);
	return rc;
}

static int group_rank(const struct group *g, int parent_rank)
{
	for (int i = 0; i < g->n; i++)
		if (g->members[i] == parent_rank)
			return i;
	return -1;
}

static int create_group(struct group *g, int parent_rank, shmcoll_comm **out)
{
	shmcoll_oob oob = {.allgather = group_allgather,
	                   .ctx = g,
	                   .rank = group_rank(g, parent_rank),
	                   .size = g->n,
	                   .timeout_ms = TIMEOUT_MS};
	int rc = shmcoll_comm_create_oob(&oob, out);

	if (rc)
		fprintf(stderr, "rank %d: create_oob: %s\n", parent_rank, shmcoll_last_error(NULL));
	return rc;
}

/* Allreduce of (salt + rank) over comm at count elements: every element must
 * be the sum over its ranks, members[] in parent numbering. */
static int check_sum(shmcoll_comm *comm, const int *members, int n, int64_t salt, size_t count)
{
	int64_t *v = malloc(sizeof(*v) * count), want = 0;
	int me = shmcoll_comm_rank(comm), rc = 0;

	if (!v)
		return -1;
	for (int i = 0; i < n; i++)
		want += salt + members[i];
	for (size_t i = 0; i < count; i++)
		v[i] = salt + members[me] + (int64_t)i;
	if (shmcoll_allreduce(v, v, count, SHMCOLL_INT64, SHMCOLL_SUM, comm) != 0)
		rc = -2;
	for (size_t i = 0; rc == 0 && i < count; i++)
		if (v[i] != want + (int64_t)i * n)
			rc = -3;
	free(v);
	return rc;
}

/* /dev/shm entries of this user's arenas, to see that none is left. */
static int arenas(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	char prefix[64];
	int n = 0;

	snprintf(prefix, sizeof(prefix), "shmcoll.%u.", (unsigned)getuid());
	while (d && (e = readdir(d)))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	if (d)
		closedir(d);
	return n;
}

static void run(int P, th_body_fn body, void *arg)
{
	th_opts o = {.timeout_ms = TIMEOUT_MS};
	th_result res;

	th_run_ranks(P, body, arg, &o, &res);
	cr_assert(res.ok, "%s", res.summary);
}

/* ---- 1. three communicators from the host's allgather, used at once ---- */

/* 4 ranks: the whole job, tensor-parallel pairs {0,1} {2,3} and
 * data-parallel pairs {0,2} {1,3}, all alive together; collectives on them
 * interleaved, each checked. 10 create, 20-22 sums, 30 ranks, 40 destroy. */
static int three_body(shmcoll_comm *parent, int rank, void *arg)
{
	struct group world = {parent, 4, {0, 1, 2, 3}, 0};
	struct group tp = {parent, 2, {rank & ~1, rank | 1}, 0};
	struct group dp = {parent, 2, {rank & 1, (rank & 1) + 2}, 0};
	shmcoll_comm *cw, *ct, *cd;
	int round, rc = 0;

	(void)arg;
	if (create_group(&world, rank, &cw) || create_group(&tp, rank, &ct) ||
	    create_group(&dp, rank, &cd))
		return 10;
	if (shmcoll_comm_rank(cw) != rank || shmcoll_comm_size(cw) != 4 ||
	    shmcoll_comm_rank(ct) != group_rank(&tp, rank) || shmcoll_comm_size(ct) != 2 ||
	    shmcoll_comm_rank(cd) != group_rank(&dp, rank) || shmcoll_comm_size(cd) != 2 ||
	    world.calls != 1 || tp.calls != 1 || dp.calls != 1)
		return 30;
	/* Interleaved, sizes through every protocol, the orders differing
	 * between groups: no communicator may see another's traffic. */
	for (round = 0; round < 12 && !rc; round++) {
		size_t count = (size_t)1 << (round % 6 * 3);

		if (rank & 1) {
			rc = check_sum(cd, dp.members, 2, 300 + round, count) ? 20 : 0;
			rc = rc ? rc : check_sum(ct, tp.members, 2, 200 + round, count) ? 21 : 0;
		} else {
			rc = check_sum(ct, tp.members, 2, 200 + round, count) ? 21 : 0;
			rc = rc ? rc : check_sum(cd, dp.members, 2, 300 + round, count) ? 20 : 0;
		}
		rc = rc ? rc : check_sum(cw, world.members, 4, 100 + round, count) ? 22 : 0;
	}
	if (shmcoll_comm_destroy(ct) || shmcoll_comm_destroy(cd) || shmcoll_comm_destroy(cw))
		rc = rc ? rc : 40;
	return rc;
}

Test(embed, three_communicators_from_the_hosts_allgather, .timeout = 120)
{
	int before = arenas();

	run(4, three_body, NULL);
	cr_expect_eq(arenas(), before, "an arena was left in /dev/shm");
}

/* ---- 2. threads as ranks, the allgather a pthread barrier ---- */

#define NTHREADS 3

struct tgroup {
	pthread_barrier_t bar;
	uint8_t slots[NTHREADS][256];
};

static int thread_allgather(const void *in, void *out, size_t len, void *ctx)
{
	struct tgroup *g = ctx;
	const int *rank = in; /* the record starts with magic, version, rank */

	if (len > sizeof(g->slots[0]))
		return -1;
	memcpy(g->slots[rank[2]], in, len);
	pthread_barrier_wait(&g->bar);
	for (int i = 0; i < NTHREADS; i++)
		memcpy((uint8_t *)out + (size_t)i * len, g->slots[i], len);
	pthread_barrier_wait(&g->bar);
	return 0;
}

struct targ {
	struct tgroup *g;
	int rank, rc;
};

static void *thread_main(void *p)
{
	struct targ *a = p;
	shmcoll_oob oob = {.allgather = thread_allgather,
	                   .ctx = a->g,
	                   .rank = a->rank,
	                   .size = NTHREADS,
	                   .timeout_ms = TIMEOUT_MS};
	static const int members[NTHREADS] = {0, 1, 2};
	shmcoll_comm *c;

	a->rc = shmcoll_comm_create_oob(&oob, &c);
	if (a->rc) {
		fprintf(stderr, "thread %d: %s\n", a->rank, shmcoll_last_error(NULL));
		return NULL;
	}
	a->rc = shmcoll_comm_rank(c) != a->rank ? 1 : check_sum(c, members, NTHREADS, 7, 1000);
	if (shmcoll_comm_destroy(c))
		a->rc = a->rc ? a->rc : 2;
	return NULL;
}

Test(embed, threads_from_the_hosts_allgather, .timeout = 60)
{
	struct tgroup g;
	struct targ a[NTHREADS];
	pthread_t t[NTHREADS];
	int i, before = arenas();

	cr_assert_eq(pthread_barrier_init(&g.bar, NULL, NTHREADS), 0);
	for (i = 0; i < NTHREADS; i++) {
		a[i] = (struct targ){&g, i, -1};
		cr_assert_eq(pthread_create(&t[i], NULL, thread_main, &a[i]), 0);
	}
	for (i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < NTHREADS; i++)
		cr_expect_eq(a[i].rc, 0, "thread %d failed with %d", i, a[i].rc);
	pthread_barrier_destroy(&g.bar);
	cr_expect_eq(arenas(), before, "an arena was left in /dev/shm");
}

/* ---- 3. split and dup ---- */

/* 5 ranks: color rank % 2 keyed in reverse (new rank order reversed), rank 4
 * out (SHMCOLL_UNDEFINED); then a dup; the parent used between and after.
 * 10 split, 11 undefined got a comm, 12 shape, 20-23 sums, 30 dup, 40 destroy. */
static int split_body(shmcoll_comm *parent, int rank, void *arg)
{
	shmcoll_comm *half, *dup;
	int color = rank == 4 ? SHMCOLL_UNDEFINED : rank % 2, rc = 0;
	/* colors: even {0, 2}, odd {1, 3}; keys reversed */
	int even[2] = {2, 0}, odd[2] = {3, 1};
	const int *m = rank % 2 ? odd : even;

	(void)arg;
	if (shmcoll_comm_split(parent, color, -rank, &half)) {
		fprintf(stderr, "rank %d: %s\n", rank, shmcoll_last_error(parent));
		return 10;
	}
	if (rank == 4) {
		if (half)
			return 11;
	} else if (!half || shmcoll_comm_size(half) != 2 ||
	           shmcoll_comm_rank(half) != (rank < 2 ? 1 : 0)) {
		return 12;
	}
	if (half && check_sum(half, m, 2, 50, 4099))
		return 20;
	if (check_sum(parent, (const int[]){0, 1, 2, 3, 4}, 5, 60, 77))
		return 21;
	if (shmcoll_comm_dup(parent, &dup))
		return 30;
	if (shmcoll_comm_rank(dup) != rank || shmcoll_comm_size(dup) != 5)
		return 12;
	if (check_sum(dup, (const int[]){0, 1, 2, 3, 4}, 5, 70, 100000))
		return 22;
	if (half && check_sum(half, m, 2, 80, 1))
		return 23;
	if (half && shmcoll_comm_destroy(half))
		rc = 40;
	if (shmcoll_comm_destroy(dup))
		rc = 40;
	return rc;
}

Test(embed, split_and_dup, .timeout = 120)
{
	int before = arenas();

	run(5, split_body, NULL);
	cr_expect_eq(arenas(), before, "an arena was left in /dev/shm");
}

/* Split and destroy, many times over: every name is new, nothing piles up.
 * 10 split, 20 sum, 40 destroy. */
static int churn_body(shmcoll_comm *parent, int rank, void *arg)
{
	(void)arg;
	for (int i = 0; i < 25; i++) {
		shmcoll_comm *c;
		int color = (rank + i) % 3;
		int members[3], n = 0;

		for (int r = 0; r < 3; r++)
			if ((r + i) % 3 == color)
				members[n++] = r;
		if (shmcoll_comm_split(parent, color, rank, &c))
			return 10;
		if (check_sum(c, members, n, i, 33))
			return 20;
		if (shmcoll_comm_destroy(c))
			return 40;
	}
	return 0;
}

Test(embed, split_and_free_repeatedly, .timeout = 120)
{
	int before = arenas();

	run(3, churn_body, NULL);
	cr_expect_eq(arenas(), before, "an arena was left in /dev/shm");
}

/* ---- 4. bad input ---- */

static int fail_allgather(const void *in, void *out, size_t len, void *ctx)
{
	(void)in;
	(void)out;
	(void)len;
	(void)ctx;
	return 5;
}

/* A one-process stand-in for a group of two: entry 0 is the caller's own,
 * entry 1 what ctx says to fake. */
enum fake { FAKE_SIZE, FAKE_MACHINE, FAKE_MAGIC, FAKE_ORDER };

static int fake_allgather(const void *in, void *out, size_t len, void *ctx)
{
	uint8_t *o = out;

	memcpy(o, in, len);
	memcpy(o + len, in, len);
	switch (*(enum fake *)ctx) {
	case FAKE_SIZE:
		o[len + 12] = 3; /* size: a group of 3 */
		o[len + 8] = 1;  /* rank 1 */
		break;
	case FAKE_MACHINE:
		o[len + 8] = 1;
		o[len + 20] ^= 1; /* the first byte of the boot id */
		break;
	case FAKE_MAGIC:
		o[len] ^= 0xff;
		break;
	case FAKE_ORDER:
		/* rank 0's record twice: entry 1 claims rank 0 */
		break;
	}
	return 0;
}

Test(embed, bad_input)
{
	shmcoll_oob oob = {.allgather = fail_allgather, .rank = 0, .size = 1};
	shmcoll_comm *c = (shmcoll_comm *)&oob;
	struct {
		enum fake f;
		const char *msg;
	} fakes[] = {{FAKE_SIZE, "disagree on the group"},
	             {FAKE_MACHINE, "another machine"},
	             {FAKE_MAGIC, "not a shmcoll record"},
	             {FAKE_ORDER, "disagree on the group"}};
	int before = arenas();

	cr_expect_eq(shmcoll_comm_create_oob(&oob, NULL), -EINVAL);
	cr_expect_eq(shmcoll_comm_create_oob(NULL, &c), -EINVAL);
	cr_expect(c == NULL, "*comm is set to NULL on failure");
	cr_expect(strstr(shmcoll_last_error(NULL), "NULL"), "%s", shmcoll_last_error(NULL));
	oob.rank = 1;
	cr_expect_eq(shmcoll_comm_create_oob(&oob, &c), -EINVAL);
	cr_expect(strstr(shmcoll_last_error(NULL), "out of range"), "%s", shmcoll_last_error(NULL));
	oob.rank = 0;
	oob.allgather = NULL;
	cr_expect_eq(shmcoll_comm_create_oob(&oob, &c), -EINVAL);
	oob.allgather = fail_allgather;
	cr_expect_eq(shmcoll_comm_create_oob(&oob, &c), -EIO);
	cr_expect(strstr(shmcoll_last_error(NULL), "returned 5"), "%s", shmcoll_last_error(NULL));
	cr_expect(strstr(shmcoll_strerror(-EIO), "out-of-band"), "%s", shmcoll_strerror(-EIO));
	for (size_t i = 0; i < sizeof(fakes) / sizeof(fakes[0]); i++) {
		shmcoll_oob two = {
		    .allgather = fake_allgather, .ctx = &fakes[i].f, .rank = 0, .size = 2};

		cr_expect_eq(shmcoll_comm_create_oob(&two, &c), -EINVAL, "fake %zu", i);
		cr_expect(strstr(shmcoll_last_error(NULL), fakes[i].msg), "fake %zu: %s", i,
		          shmcoll_last_error(NULL));
	}
	cr_expect_eq(arenas(), before, "a refused create left an arena");
	cr_expect_eq(shmcoll_comm_split(NULL, 0, 0, &c), -EINVAL);
	cr_expect_eq(shmcoll_comm_dup(NULL, &c), -EINVAL);
}

/* Split's own bad arguments fail at once on the rank that passed them, and
 * leave the communicator usable. 1-3 the cases, 4 the sum after. */
static int split_args_body(shmcoll_comm *parent, int rank, void *arg)
{
	shmcoll_comm *c;

	(void)arg;
	if (shmcoll_comm_split(parent, 0, 0, NULL) != -EINVAL)
		return 1;
	if (!strstr(shmcoll_last_error(parent), "newcomm"))
		return 2;
	if (shmcoll_comm_split(parent, -7, 0, &c) != -EINVAL || c != NULL)
		return 3;
	return check_sum(parent, (const int[]){0, 1}, 2, 9, 5) ? 4 : 0;
}

Test(embed, split_bad_arguments, .timeout = 60)
{
	run(2, split_args_body, NULL);
}

/* ---- single copies: one rank's refusal turns them off for all ---- */

/* 10 dup, 20 the vote, 30 the bcast's data, 40 destroy. */
static int cma_vote_body(shmcoll_comm *parent, int rank, void *arg)
{
	const int *expect_on = arg;
	size_t n = 1u << 18, i; /* 1 MiB of int32: single copies where allowed (CMA_MIN) */
	int32_t *buf = malloc(n * sizeof(*buf));
	shmcoll_comm *all = NULL, *vetoed = NULL;
	int rc, bad = 0;

	if (!buf)
		return 90;
	/* A dup with everyone willing, then one where rank 1 refuses; single copies asked for
	 * at every size (they are off by default). */
	setenv("SHMCOLL_CMA_MIN", "1", 1);
	rc = shmcoll_comm_dup(parent, &all);
	if (rank == 1)
		setenv("SHMCOLL_CMA", "0", 1);
	if (!rc)
		rc = shmcoll_comm_dup(parent, &vetoed);
	unsetenv("SHMCOLL_CMA");
	unsetenv("SHMCOLL_CMA_MIN");
	if (rc)
		return 10;
	if (shmcoll__probe_cma(all) != *expect_on || shmcoll__probe_cma(vetoed))
		return 20;
	for (int k = 0; k < 2 && !bad; k++) {
		shmcoll_comm *c = k ? vetoed : all;

		for (i = 0; i < n; i++)
			buf[i] = rank == 2 ? (int32_t)(i * 7 + (size_t)k) : -1;
		if (shmcoll_bcast(buf, n, SHMCOLL_INT32, 2, c))
			bad = 30;
		for (i = 0; i < n && !bad; i++)
			if (buf[i] != (int32_t)(i * 7 + (size_t)k))
				bad = 31;
	}
	free(buf);
	if (shmcoll_comm_destroy(vetoed) || shmcoll_comm_destroy(all))
		return 40;
	return bad;
}

Test(embed, single_copies_need_every_ranks_consent, .timeout = 60)
{
	int on = th_siblings_can_read();

	if (!on)
		cr_log_warn("process_vm_readv is not allowed here (ptrace_scope, seccomp): "
		            "checking only that the library agrees and falls back");
	run(3, cma_vote_body, &on);
}
