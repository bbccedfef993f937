/* test_arena.c - the arena: layout arithmetic, create, attach, validation of
 * hostile headers, name clashes, and the name gone once all ranks attached. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm/arena.h"
#include "tests/harness.h"

static char err[256];

static int name_exists(const struct shmcoll_arena *a)
{
	char path[SHMCOLL_NAME_MAX + 16];
	struct stat st;

	snprintf(path, sizeof(path), "/dev/shm%s", a->name);
	return stat(path, &st) == 0;
}

Test(arena, layout_defaults_and_bounds)
{
	struct shmcoll_layout l;
	uint32_t n;

	for (n = 1; n <= SHMCOLL_MAX_RANKS; n = n < 16 ? n + 1 : n * 2) {
		cr_assert_eq(shmcoll__arena_layout(n, 0, &l, err, sizeof(err)), 0, "%u: %s", n, err);
		cr_assert_eq(l.slot_half, SHMCOLL_DEFAULT_SLOT_HALF);
		cr_assert_eq(l.heap_stride, SHMCOLL_DEFAULT_HEAP_BYTES);
		cr_assert_geq(l.ctrl_off, sizeof(struct shmcoll_arena_hdr));
		cr_assert_geq(l.slot_off, l.ctrl_off + n * sizeof(struct shmcoll_ctrl));
		cr_assert_eq(l.heap_off, l.slot_off + n * l.slot_stride);
		cr_assert_eq(l.total_bytes, l.heap_off + n * l.heap_stride);
		cr_assert_eq(l.slot_off % 4096, 0);
	}
	cr_assert_eq(shmcoll__arena_layout(0, 0, &l, err, sizeof(err)), -EINVAL);
	cr_assert_eq(shmcoll__arena_layout(SHMCOLL_MAX_RANKS + 1, 0, &l, err, sizeof(err)),
		     -EINVAL);
}

Test(arena, layout_fits_a_given_size)
{
	static const size_t sizes[] = {64 << 10, 100000, 1 << 20, 64 << 20};
	struct shmcoll_layout l;
	uint32_t n;
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (n = 1; n <= 8; n++) {
			cr_assert_eq(shmcoll__arena_layout(n, sizes[i], &l, err, sizeof(err)), 0,
				     "%zu/%u: %s", sizes[i], n, err);
			cr_assert_leq(l.total_bytes, sizes[i]);
			cr_assert_geq(l.slot_half, n * 8u);
			cr_assert_eq(l.slot_half % SHMCOLL_LINE, 0);
			cr_assert_eq(l.heap_stride % SHMCOLL_LINE, 0);
		}
	cr_assert_eq(shmcoll__arena_layout(8, 4096, &l, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "minimum"), "the message says the minimum: %s", err);
}

Test(arena, create_attach_join_unlinks)
{
	struct shmcoll_arena a, b;
	char job[64];

	th_job_name(job, sizeof(job));
	cr_assert_eq(shmcoll__arena_create(&a, job, 2, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert(name_exists(&a));
	shmcoll__arena_join(&a, 0);
	cr_assert(name_exists(&a), "one of two ranks attached: the name stays");
	cr_assert_eq(shmcoll__arena_attach(&b, job, 2, 1000000000, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(b.bytes, a.bytes);
	shmcoll__arena_join(&b, 1);
	cr_assert_not(name_exists(&a), "all attached: the name is gone");
	cr_assert_eq(load_relaxed(&a.hdr->attached), 2);
	/* Two views of one segment. */
	store_relaxed(&shmcoll__ctrl(&a, 1)->seq, 42u);
	cr_assert_eq(load_relaxed(&shmcoll__ctrl(&b, 1)->seq), 42u);
	shmcoll__arena_release(&a, 0);
	shmcoll__arena_release(&b, 0);
}

Test(arena, name_clash_is_eexist)
{
	struct shmcoll_arena a, b;
	char job[64];

	th_job_name(job, sizeof(job));
	cr_assert_eq(shmcoll__arena_create(&a, job, 1, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(shmcoll__arena_create(&b, job, 1, 0, err, sizeof(err)), -EEXIST);
	cr_assert(strstr(err, "exists") || strstr(err, "File exists"), "%s", err);
	cr_assert(name_exists(&a), "the failed create did not remove the other's name");
	shmcoll__arena_release(&a, 1);
	cr_assert_not(name_exists(&a));
}

Test(arena, attach_times_out_without_creator)
{
	struct shmcoll_arena a;
	char job[64];

	th_job_name(job, sizeof(job));
	cr_assert_eq(shmcoll__arena_attach(&a, job, 2, 50000000, err, sizeof(err)), -ETIMEDOUT);
	cr_assert(strstr(err, "rank 0"), "%s", err);
}

/* Creates an arena, lets mutate() damage the named segment, then attaches. */
static int attach_after(void (*mutate)(struct shmcoll_arena *, const char *), uint32_t nranks)
{
	struct shmcoll_arena a, b;
	char job[64];
	int rc;

	th_job_name(job, sizeof(job));
	cr_assert_eq(shmcoll__arena_create(&a, job, 2, 0, err, sizeof(err)), 0, "%s", err);
	mutate(&a, job);
	rc = shmcoll__arena_attach(&b, job, nranks, 200000000, err, sizeof(err));
	if (rc == 0)
		shmcoll__arena_release(&b, 0);
	shmcoll__arena_release(&a, 1);
	return rc;
}

static void nothing(struct shmcoll_arena *a, const char *job)
{
	(void)a;
	(void)job;
}

static void bad_magic(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	a->hdr->magic ^= 1;
}

static void bad_version(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	a->hdr->version = 99;
}

static void bad_offsets(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	a->hdr->heap_off += 4096;
}

static void bad_slot(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	a->hdr->slot_half = 1ull << 40;
}

static void truncated(struct shmcoll_arena *a, const char *job)
{
	int fd = shm_open(a->name, O_RDWR, 0);

	(void)job;
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 8192), 0);
	close(fd);
}

static void foreign_mode(struct shmcoll_arena *a, const char *job)
{
	int fd = shm_open(a->name, O_RDWR, 0);

	(void)job;
	cr_assert_geq(fd, 0);
	cr_assert_eq(fchmod(fd, 0644), 0);
	close(fd);
}

Test(arena, good_header_attaches)
{
	cr_assert_eq(attach_after(nothing, 2), 0, "%s", err);
}

Test(arena, bad_headers_are_rejected)
{
	cr_assert_eq(attach_after(bad_magic, 2), -EPROTO);
	cr_assert(strstr(err, "magic"), "%s", err);
	cr_assert_eq(attach_after(bad_version, 2), -EPROTO);
	cr_assert(strstr(err, "version"), "%s", err);
	cr_assert_eq(attach_after(nothing, 3), -EPROTO, "rank count mismatch");
	cr_assert(strstr(err, "ranks"), "%s", err);
	cr_assert_eq(attach_after(bad_offsets, 2), -EPROTO);
	cr_assert_eq(attach_after(bad_slot, 2), -EPROTO);
	cr_assert_eq(attach_after(truncated, 2), -EPROTO);
	cr_assert(strstr(err, "bytes"), "%s", err);
	cr_assert_eq(attach_after(foreign_mode, 2), -EPROTO);
	cr_assert(strstr(err, "not ours"), "%s", err);
}

Test(arena, validate_survives_random_headers)
{
	struct shmcoll_arena_hdr h;
	struct shmcoll_layout l;
	uint64_t i, k, accepted = 0;

	shmcoll__arena_layout(4, 0, &l, err, sizeof(err));
	for (i = 0; i < 200000; i++) {
		uint64_t *w = (uint64_t *)&h;

		for (k = 0; k < sizeof(h) / 8; k++)
			w[k] = th_hash(7, 0, i * 64 + k);
		/* Keep some headers close to valid so deeper checks run. */
		if (i % 2) {
			h.magic = SHMCOLL_ARENA_MAGIC;
			h.version = SHMCOLL_ARENA_VERSION;
			h.hdr_bytes = sizeof(h);
			h.nranks = 4;
			h.total_bytes = l.total_bytes;
		}
		if (shmcoll__arena_validate(&h, l.total_bytes, 4, err, sizeof(err)) == 0)
			accepted++;
	}
	cr_assert_eq(accepted, 0, "random offsets are never accepted");
}

Test(arena, create_reports_enospc_and_leaves_nothing)
{
	struct shmcoll_arena a;
	char job[64];

	th_job_name(job, sizeof(job));
	/* Far beyond any /dev/shm here: tmpfs refuses the reservation at once. */
	cr_assert_eq(shmcoll__arena_create(&a, job, 2, (size_t)1 << 46, err, sizeof(err)),
		     -ENOSPC, "%s", err);
	cr_assert(strstr(err, "no room"), "%s", err);
	cr_assert_not(name_exists(&a));
}
