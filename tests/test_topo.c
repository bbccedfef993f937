/* test_topo.c - barrier and bcast over topology-aware trees: pretend machines of
 * SHMCOLL_TOPOLOGY (2 packages x 2 L3 domains x 4 ranks and the like) with the tree forced
 * (SHMCOLL_ALGO=...:topo), up to 64 ranks as threads, and 8 as processes. Every barrier is
 * checked by counters no rank may see behind; every broadcast, from every root, on every rank
 * byte for byte. The trees' shapes are tests/test_sched.c's; here they carry calls. A
 * malformed SHMCOLL_TOPOLOGY fails the create. Criterion runs each test in its own process,
 * so the variables set here reach only the ranks it starts. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tests/harness.h"

#define TIMEOUT_MS     60000
#define BARRIER_ROUNDS 50

/* Bytes per broadcast: below, at and above the inline limit (1 KiB: a flat protocol's, but
 * with the tree forced each runs the tree), and several staging halves of a small arena. */
static const size_t bcast_bytes[] = {1, 1000, 1024, 1025, 4000, 70000};

struct job {
	_Atomic int *counters; /* th_barrier_rounds': shared with forked ranks */
	int bcast_roots;       /* every root if 1, else every one of this stride */
};

static int check_bcast(shmcoll_comm *comm, int rank, int P, int root, size_t bytes, uint8_t *buf)
{
	uint64_t salt = 0x70b0 + (uint64_t)bytes * 131 + (uint64_t)root;
	size_t i;
	int rc;

	for (i = 0; i < bytes; i++)
		buf[i] = rank == root ? (uint8_t)th_hash(salt, root, i) : (uint8_t)(0xee ^ rank);
	th_breadcrumb("bcast of %zu bytes from %d", bytes, root);
	rc = shmcoll_bcast(buf, bytes, SHMCOLL_UINT8, root, comm);
	if (rc) {
		fprintf(stderr, "FAIL bcast P=%d rank=%d root=%d bytes=%zu: %d (%s): %s\n", P, rank,
		        root, bytes, rc, shmcoll_strerror(rc), shmcoll_last_error(comm));
		return 1;
	}
	for (i = 0; i < bytes; i++)
		if (buf[i] != (uint8_t)th_hash(salt, root, i)) {
			fprintf(stderr,
			        "FAIL bcast P=%d rank=%d root=%d bytes=%zu: byte %zu is %#x, want "
			        "%#x\n",
			        P, rank, root, bytes, i, buf[i], (uint8_t)th_hash(salt, root, i));
			return 2;
		}
	return 0;
}

static int topo_body(shmcoll_comm *comm, int rank, void *arg)
{
	const struct job *j = arg;
	int P = shmcoll_comm_size(comm), root, rc = 0;
	size_t s, nb = sizeof(bcast_bytes) / sizeof(bcast_bytes[0]);
	uint8_t *buf = malloc(bcast_bytes[nb - 1]);

	if (!buf)
		return 3;
	rc = th_barrier_rounds(comm, rank, P, j->counters, BARRIER_ROUNDS);
	for (root = 0; root < P && !rc; root += j->bcast_roots)
		for (s = 0; s < nb && !rc; s++)
			rc = check_bcast(comm, rank, P, root, bcast_bytes[s], buf);
	/* The root's tree cached for root 0 and for the last other root: back to both. */
	for (s = 0; s < nb && !rc; s++)
		rc = check_bcast(comm, rank, P, (int)s % P, bcast_bytes[s], buf);
	if (!rc)
		rc = th_barrier_rounds(comm, rank, P, j->counters, BARRIER_ROUNDS);
	free(buf);
	return rc;
}

/* P ranks (threads or processes) on the pretend machine spec, with the tree forced. */
static void run_topo(const char *spec, int P, int threads, size_t arena_bytes)
{
	size_t map = TH_MAX_RANKS * TH_BARRIER_STRIDE * sizeof(_Atomic int);
	th_opts o = {.arena_bytes = arena_bytes, .timeout_ms = TIMEOUT_MS, .wall_ms = 600000};
	struct job j = {.bcast_roots = P > 32 ? 3 : 1};
	th_result res;
	void *p;

	cr_assert(setenv("SHMCOLL_TOPOLOGY", spec, 1) == 0);
	cr_assert(setenv("SHMCOLL_ALGO", "barrier:topo,bcast:topo", 1) == 0);
	p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(p != MAP_FAILED, "mmap of the barrier counters failed");
	j.counters = p;
	if (threads)
		th_run_threads(P, topo_body, &j, &o, &res);
	else
		th_run_ranks(P, topo_body, &j, &o, &res);
	/* Threads left behind at the deadline may still use the counters. */
	if (!res.timed_out)
		munmap(p, map);
	cr_assert(res.ok, "SHMCOLL_TOPOLOGY=%s, P=%d, %s: %s", spec, P,
	          threads ? "threads" : "processes", res.summary);
}

Test(topo, two_sockets_of_two_l3_p16, .timeout = 600)
{
	run_topo("2x2x4", 16, 1, 0);
}

/* A small arena: every broadcast above 512 bytes is a pipeline of chunks down the tree. */
Test(topo, two_sockets_small_arena_p16, .timeout = 600)
{
	run_topo("2x2x4", 16, 1, 256 * 1024);
}

Test(topo, two_sockets_of_four_l3_p64, .timeout = 600)
{
	run_topo("2x4x8", 64, 1, 0);
}

Test(topo, three_sockets_one_l3_p15, .timeout = 600)
{
	run_topo("3x1x5", 15, 1, 0);
}

/* Fewer ranks than the layout: the last domain and package are short. */
Test(topo, layout_cut_short_p13, .timeout = 600)
{
	run_topo("2x2x4", 13, 1, 0);
}

/* More ranks than the layout: ranks 16.. wrap onto the first domains, which then hold
 * ranks far apart in number. */
Test(topo, layout_wraps_p23, .timeout = 600)
{
	run_topo("2x2x4", 23, 1, 0);
}

/* Domains of 3 over 4 packages of 3 at 40 ranks: uneven after the wrap. */
Test(topo, four_sockets_wrapping_p40, .timeout = 600)
{
	run_topo("4x3x3", 40, 1, 0);
}

/* One domain: the plain tree. */
Test(topo, one_domain_p9, .timeout = 600)
{
	run_topo("1x1x16", 9, 1, 0);
}

Test(topo, processes_p8, .timeout = 600)
{
	TH_PROCESSES_ONLY();
	run_topo("2x2x2", 8, 0, 0);
}

/* A malformed value fails the create, with a message that names the variable; an empty one
 * is not set. */
Test(topo, malformed_fails_the_create)
{
	static const char *const bad[] = {"2x2", "2x0x4", "two", "2x2x4x1", "2x2x4,", "1025x1x1"};
	char job[64];
	shmcoll_config cfg = {.rank = 0, .size = 1, .job = job, .timeout_ms = TIMEOUT_MS};
	shmcoll_comm *c;
	const char *msg;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert(setenv("SHMCOLL_TOPOLOGY", bad[i], 1) == 0);
		th_job_name(job, sizeof(job));
		c = NULL;
		rc = shmcoll_comm_create(&cfg, &c);
		msg = shmcoll_last_error(NULL);
		cr_assert_eq(rc, -EINVAL, "SHMCOLL_TOPOLOGY=%s: %d", bad[i], rc);
		cr_assert_null(c);
		cr_assert(msg && strstr(msg, "SHMCOLL_TOPOLOGY"), "the message: %s", msg);
	}
	cr_assert(setenv("SHMCOLL_TOPOLOGY", "", 1) == 0);
	th_job_name(job, sizeof(job));
	rc = shmcoll_comm_create(&cfg, &c);
	cr_assert_eq(rc, 0, "an empty SHMCOLL_TOPOLOGY: %s", shmcoll_last_error(NULL));
	cr_assert_eq(shmcoll_comm_destroy(c), 0);
}
