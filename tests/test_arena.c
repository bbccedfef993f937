/* test_arena.c - the arena: layout arithmetic, create, attach, validation of
 * hostile headers and files, name clashes, the name gone once all ranks
 * attached, one mapping per process, the stale sweep, and the preflight that
 * sizes an arena to the room of /dev/shm and the memory cgroup. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm/arena.h"
#include "tests/harness.h"

static char err[512];

static int name_exists(const struct shmcoll_arena *a)
{
	char path[SHMCOLL_NAME_MAX + 16];
	struct stat st;

	snprintf(path, sizeof(path), "/dev/shm%s", a->name);
	return lstat(path, &st) == 0;
}

/* The arena name of job, and its path in /dev/shm. */
static void job_path(const char *job, char *name, char *path, size_t len)
{
	cr_assert_eq(shmcoll__arena_name(name, SHMCOLL_NAME_MAX, job), 0);
	snprintf(path, len, "/dev/shm%s", name);
}

static int path_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

Test(arena, layout_defaults_and_bounds)
{
	struct shmcoll_layout l;
	uint32_t n;

	for (n = 1; n <= SHMCOLL_MAX_RANKS; n = n < 16 ? n + 1 : n * 2) {
		cr_assert_eq(shmcoll__arena_layout(n, 0, &l, err, sizeof(err)), 0, "%u: %s", n,
		             err);
		cr_assert_eq(l.slot_half, SHMCOLL_DEFAULT_SLOT_HALF);
		cr_assert_eq(l.heap_stride, SHMCOLL_DEFAULT_HEAP_BYTES);
		cr_assert_geq(l.ctrl_off, sizeof(struct shmcoll_arena_hdr));
		cr_assert_eq(l.msg_ring, SHMCOLL_MSG_RING_DEFAULT);
		/* The messages packed, then the second ring of the largest data slots. */
		cr_assert_eq(l.msg_max, SHMCOLL_MSG_DATA_MAX);
		cr_assert_geq(l.msg_big_off,
		              sizeof(struct shmcoll_ctrl) +
		                  SHMCOLL_MSG_RING_DEFAULT * sizeof(struct shmcoll_msg));
		cr_assert_eq(l.msg_big_off % SHMCOLL_LINE, 0);
		cr_assert_eq(l.ctrl_stride,
		             l.msg_big_off + SHMCOLL_MSG_RING_DEFAULT * SHMCOLL_MSG_DATA_MAX);
		cr_assert_geq(l.slot_off, l.ctrl_off + n * l.ctrl_stride);
		cr_assert_eq(l.ring_bytes, shmcoll__ring_default(n));
		cr_assert_eq(l.p2p_off, l.slot_off + n * l.slot_stride);
		cr_assert_geq(l.ring_off, l.p2p_off + n * l.p2p_stride);
		cr_assert_eq(l.ring_off % SHMCOLL_LINE, 0);
		cr_assert_eq(l.heap_off, l.ring_off + (uint64_t)n * n * l.ring_bytes);
		cr_assert_eq(l.total_bytes, l.heap_off + n * l.heap_stride);
		cr_assert_eq(l.slot_off % 4096, 0);
	}
	cr_assert_eq(shmcoll__arena_layout(0, 0, &l, err, sizeof(err)), -EINVAL);
	cr_assert_eq(shmcoll__arena_layout(SHMCOLL_MAX_RANKS + 1, 0, &l, err, sizeof(err)),
	             -EINVAL);
}

/* The header a creator would write for layout l of n ranks. */
static void header_of(struct shmcoll_arena_hdr *h, const struct shmcoll_layout *l, uint32_t n)
{
	memset(h, 0, sizeof(*h));
	h->magic = SHMCOLL_ARENA_MAGIC;
	h->version = SHMCOLL_ARENA_VERSION;
	h->hdr_bytes = sizeof(*h);
	h->nranks = n;
	h->creator.pid = 1;
	h->total_bytes = l->total_bytes;
	h->ctrl_off = l->ctrl_off;
	h->slot_off = l->slot_off;
	h->slot_stride = l->slot_stride;
	h->slot_half = l->slot_half;
	h->heap_off = l->heap_off;
	h->heap_stride = l->heap_stride;
	h->p2p_off = l->p2p_off;
	h->p2p_stride = l->p2p_stride;
	h->ring_off = l->ring_off;
	h->ring_bytes = l->ring_bytes;
	h->msg_ring = (uint32_t)l->msg_ring;
	h->msg_max = (uint32_t)l->msg_max;
}

/* The deep message ring (16 messages; what passes 1 KiB in a second ring of 32 KiB data slots,
 * or of 4 KiB ones where those do not fit) where it takes at most half the arena; the least one
 * (4 messages of 1 KiB) in an arena too small for that, which still takes every rank count its
 * minimum allows; a header with any other shape is refused. */
Test(arena, message_ring_depth_follows_the_room)
{
	struct shmcoll_layout l;
	struct shmcoll_arena_hdr h;
	uint32_t n;

	for (n = 1; n <= 64; n *= 2) {
		uint64_t least = shmcoll__arena_min_bytes(n);

		cr_assert_eq(shmcoll__arena_layout(n, least, &l, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(l.msg_ring, SHMCOLL_MSG_RING_MIN, "%u ranks in the least arena", n);
		/* The shallow ring's messages carry 1 KiB. */
		cr_assert_eq(l.msg_max, SHMCOLL_INLINE_MAX);
		cr_assert_eq(sizeof(struct shmcoll_msg), 1088);
		cr_assert_eq(l.ctrl_stride,
		             sizeof(struct shmcoll_ctrl) + l.msg_ring * sizeof(struct shmcoll_msg));
		cr_assert_leq(l.total_bytes, least);
		cr_assert_eq(shmcoll__arena_layout(n, 64u << 20, &l, err, sizeof(err)), 0, "%s",
		             err);
		cr_assert_eq(l.msg_ring, SHMCOLL_MSG_RING_DEFAULT, "%u ranks in 64 MiB", n);
		/* 16 slots of 32 KiB are 512 KiB a rank: more than half of 64 MiB at 64 ranks */
		cr_assert_eq(l.msg_max, n < 64 ? SHMCOLL_MSG_DATA_MAX : SHMCOLL_MSG_DATA_MID,
		             "%u ranks in 64 MiB", n);
		cr_assert_eq(l.ctrl_stride, l.msg_big_off + l.msg_ring * l.msg_max);
		cr_assert_leq(l.total_bytes, 64u << 20);
		if (n <= 16) { /* 4 MiB: the 32 KiB slots for 2 ranks, the 4 KiB ones to 16 */
			cr_assert_eq(shmcoll__arena_layout(n, 4u << 20, &l, err, sizeof(err)), 0,
			             "%s", err);
			cr_assert_eq(l.msg_max, n < 4 ? SHMCOLL_MSG_DATA_MAX : SHMCOLL_MSG_DATA_MID,
			             "%u ranks in 4 MiB", n);
			cr_assert_leq(l.total_bytes, 4u << 20);
		}
		cr_assert_eq(shmcoll__arena_fit(n, least, &l), 0);
		cr_assert_eq(l.msg_ring, SHMCOLL_MSG_RING_MIN);
	}
	cr_assert_eq(shmcoll__arena_layout(2, 0, &l, err, sizeof(err)), 0);
	header_of(&h, &l, 2);
	cr_assert_eq(shmcoll__arena_validate(&h, l.total_bytes, 2, err, sizeof(err)), 0, "%s", err);
	h.msg_ring = 8;
	cr_assert_eq(shmcoll__arena_validate(&h, l.total_bytes, 2, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "message ring"), "%s", err);
	h.msg_ring = SHMCOLL_MSG_RING_MIN; /* offsets of the deep ring with the least depth */
	cr_assert_eq(shmcoll__arena_validate(&h, l.total_bytes, 2, err, sizeof(err)), -EPROTO);
	h.msg_ring = (uint32_t)l.msg_ring;
	h.msg_max = 2048; /* no shape has it */
	cr_assert_eq(shmcoll__arena_validate(&h, l.total_bytes, 2, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "message ring"), "%s", err);
	h.msg_max = SHMCOLL_MSG_DATA_MID; /* a shape, but not the one the offsets were made for */
	cr_assert_eq(shmcoll__arena_validate(&h, l.total_bytes, 2, err, sizeof(err)), -EPROTO);
	h.msg_max = SHMCOLL_INLINE_MAX; /* the shallow ring's data with the deep ring's depth */
	cr_assert_eq(shmcoll__arena_validate(&h, l.total_bytes, 2, err, sizeof(err)), -EPROTO);
}

/* How many 64-byte lines the prefetches of [p, p + len) visit (shmcoll__lines). */
static int lines_of(const void *p, size_t len)
{
	uintptr_t end, a = shmcoll__lines(p, len, &end);
	int k = 0;

	for (; a < end; a += 64)
		k++;
	return k;
}

/* A message's data starts 32 bytes into its first line: a range of it is counted in lines by
 * address, so that a prefetch reaches its last line (counted in 64-byte steps from the data,
 * 64 bytes of data were one line, and a gather root's second line came late). */
Test(arena, message_data_ranges_count_lines_by_address)
{
	static struct shmcoll_msg m;

	cr_assert_eq(offsetof(struct shmcoll_msg, data), 32);
	cr_assert_eq(lines_of(m.data, 32), 1);
	cr_assert_eq(lines_of(m.data, 33), 2);
	cr_assert_eq(lines_of(m.data, 64), 2);
	cr_assert_eq(lines_of(m.data, 96), 2);
	cr_assert_eq(lines_of(m.data, 97), 3);
	cr_assert_eq(lines_of(m.data + 32, 64), 1);
	cr_assert_eq(lines_of(m.data + 40, 64), 2);
	cr_assert_eq(shmcoll__lines(m.data + 40, 8, &(uintptr_t){0}), (uintptr_t)&m + 64);
}

Test(arena, layout_fits_a_given_size)
{
	static const size_t sizes[] = {96 << 10, 100000, 1 << 20, 64 << 20};
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
			cr_assert_geq(l.ring_bytes, SHMCOLL_RING_MIN);
			cr_assert_leq(l.ring_bytes, shmcoll__ring_default(n));
			cr_assert_eq(l.ring_bytes & (l.ring_bytes - 1), 0, "a power of two");
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
	cr_assert_eq(shmcoll__arena_attach(&b, job, 2, 1000000000, err, sizeof(err)), 0, "%s", err);
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

/* What a forked child saw when it attached. */
struct child_attach {
	int rc;
	int distinct; /* its mapping is not the parent's */
	int sees;     /* it read what the parent wrote through the parent's mapping */
	char err[sizeof(err)];
};

/* Attaches to job from a forked child: its own mapping, the way a rank in
 * another process maps the segment (a child never reuses its parent's). The
 * child runs plain C only. */
static void attach_in_child(const char *job, uint32_t nranks, int64_t timeout_ns,
                            const struct shmcoll_arena *parent, struct child_attach *out)
{
	int fds[2], ws;
	ssize_t n;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		struct child_attach c;
		struct shmcoll_arena b;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		memset(&c, 0, sizeof(c));
		close(fds[0]);
		c.rc = shmcoll__arena_attach(&b, job, nranks, timeout_ns, c.err, sizeof(c.err));
		if (c.rc == 0) {
			c.distinct = b.base != parent->base;
			c.sees = load_relaxed(&shmcoll__ctrl(&b, 0)->seq) == 77u;
			store_relaxed(&shmcoll__ctrl(&b, 1)->seq, 78u);
			shmcoll__arena_release(&b, 0);
		}
		_exit(write(fds[1], &c, sizeof(c)) == (ssize_t)sizeof(c) ? 0 : 1);
	}
	close(fds[1]);
	memset(out, 0, sizeof(*out));
	n = read(fds[0], out, sizeof(*out));
	close(fds[0]);
	cr_assert_eq(waitpid(pid, &ws, 0), pid);
	cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the attaching child died: status %#x",
	          ws);
	cr_assert_eq(n, (ssize_t)sizeof(*out));
}

/* Where attach_after() attaches: in this process (where it shares the
 * creator's mapping once the segment has passed the checks) or in a child. */
static int attach_from_child;

/* Creates an arena, lets mutate() damage the named segment, then attaches. */
static int attach_after(void (*mutate)(struct shmcoll_arena *, const char *), uint32_t nranks)
{
	struct shmcoll_arena a, b;
	struct child_attach c;
	char job[64];
	int rc;

	th_job_name(job, sizeof(job));
	cr_assert_eq(shmcoll__arena_create(&a, job, 2, 0, err, sizeof(err)), 0, "%s", err);
	mutate(&a, job);
	if (attach_from_child) {
		attach_in_child(job, nranks, 200000000, &a, &c);
		rc = c.rc;
		memcpy(err, c.err, sizeof(err));
	} else {
		rc = shmcoll__arena_attach(&b, job, nranks, 200000000, err, sizeof(err));
		if (rc == 0)
			shmcoll__arena_release(&b, 0);
	}
	shmcoll__arena_release(&a, 1);
	cr_assert_not(name_exists(&a), "the segment of %s is left", job);
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

static void set_mode(struct shmcoll_arena *a, mode_t mode)
{
	int fd = shm_open(a->name, O_RDWR, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
}

static void foreign_mode(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	set_mode(a, 0644);
}

Test(arena, good_header_attaches)
{
	cr_assert_eq(attach_after(nothing, 2), 0, "%s", err);
}

static void bad_creator(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	a->hdr->creator.pid = 0;
}

static void bad_creator_pad(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	a->hdr->creator.pad = 1;
}

static void bad_pad(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	a->hdr->pad = 1;
}

static void bad_hdr_bytes(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	a->hdr->hdr_bytes = 8;
}

static void bad_total(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	a->hdr->total_bytes += 4096;
}

static void bad_heap(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	a->hdr->heap_stride = a->hdr->heap_stride * 2 + SHMCOLL_LINE;
}

static void mode_0400(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	set_mode(a, 0400);
}

static void mode_0700(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	set_mode(a, 0700);
}

static void mode_setuid(struct shmcoll_arena *a, const char *job)
{
	(void)job;
	set_mode(a, 04600);
}

static void truncated_to_nothing(struct shmcoll_arena *a, const char *job)
{
	int fd = shm_open(a->name, O_RDWR, 0);

	(void)job;
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 0), 0);
	close(fd);
}

static void truncated_in_header(struct shmcoll_arena *a, const char *job)
{
	int fd = shm_open(a->name, O_RDWR, 0);

	(void)job;
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 100), 0);
	close(fd);
}

static void foreign_owner(struct shmcoll_arena *a, const char *job)
{
	int fd = shm_open(a->name, O_RDWR, 0);

	(void)job;
	cr_assert_geq(fd, 0);
	cr_assert_eq(fchown(fd, 65534, 65534), 0, "fchown: %s", strerror(errno));
	close(fd);
}

/* Every hostile header and file is refused with -EPROTO and a message,
 * without a crash; a segment shorter than a header never becomes ready. */
static void check_hostile(void)
{
	cr_assert_eq(attach_after(nothing, 2), 0, "%s", err);
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
	cr_assert_eq(attach_after(bad_creator, 2), -EPROTO);
	cr_assert(strstr(err, "creator"), "%s", err);
	cr_assert_eq(attach_after(bad_creator_pad, 2), -EPROTO);
	cr_assert_eq(attach_after(bad_pad, 2), -EPROTO);
	cr_assert_eq(attach_after(bad_hdr_bytes, 2), -EPROTO);
	cr_assert(strstr(err, "version"), "%s", err);
	cr_assert_eq(attach_after(bad_total, 2), -EPROTO);
	cr_assert(strstr(err, "bytes"), "%s", err);
	cr_assert_eq(attach_after(bad_heap, 2), -EPROTO);
	cr_assert_eq(attach_after(mode_0400, 2), -EPROTO);
	cr_assert(strstr(err, "mode 400"), "%s", err);
	cr_assert_eq(attach_after(mode_0700, 2), -EPROTO);
	cr_assert_eq(attach_after(mode_setuid, 2), -EPROTO);
	cr_assert(strstr(err, "mode 4600"), "%s", err);
	cr_assert_eq(attach_after(truncated_to_nothing, 2), -ETIMEDOUT);
	cr_assert(strstr(err, "not ready"), "%s", err);
	cr_assert_eq(attach_after(truncated_in_header, 2), -ETIMEDOUT);
	cr_assert(strstr(err, "not ready"), "%s", err);
}

Test(arena, bad_headers_are_rejected)
{
	check_hostile();
}

Test(arena, bad_headers_are_rejected_by_another_process)
{
	attach_from_child = 1;
	check_hostile();
}

Test(arena, another_users_segment_is_refused)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to give a segment to another user (uid 65534)");
	cr_assert_eq(attach_after(foreign_owner, 2), -EPROTO);
	cr_assert(strstr(err, "not ours") && strstr(err, "owner 65534"), "%s", err);
	attach_from_child = 1;
	cr_assert_eq(attach_after(foreign_owner, 2), -EPROTO);
	cr_assert(strstr(err, "not ours") && strstr(err, "owner 65534"), "%s", err);
}

/* A symlink, a directory or a FIFO at the name is refused, not followed or
 * opened as a segment; a symlink also keeps rank 0 from creating there. */
Test(arena, non_files_at_the_name_are_refused)
{
	struct shmcoll_arena a, b;
	struct child_attach c;
	char job[64], target[64], name[SHMCOLL_NAME_MAX], tname[SHMCOLL_NAME_MAX];
	char path[SHMCOLL_NAME_MAX + 16], tpath[SHMCOLL_NAME_MAX + 16];

	th_job_name(job, sizeof(job));
	th_job_name(target, sizeof(target));
	job_path(job, name, path, sizeof(path));
	job_path(target, tname, tpath, sizeof(tpath));
	/* The symlink points at a good arena of ours. */
	cr_assert_eq(shmcoll__arena_create(&a, target, 2, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(symlink(tpath, path), 0, "symlink: %s", strerror(errno));
	cr_assert_eq(shmcoll__arena_attach(&b, job, 2, 200000000, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "not a regular file"), "%s", err);
	attach_in_child(job, 2, 200000000, &a, &c);
	cr_assert_eq(c.rc, -EPROTO, "%s", c.err);
	cr_assert_eq(shmcoll__arena_create(&b, job, 2, 0, err, sizeof(err)), -EEXIST, "%s", err);
	cr_assert_eq(unlink(path), 0);
	shmcoll__arena_release(&a, 1);
	cr_assert_not(path_exists(tpath));

	cr_assert_eq(mkdir(path, 0700), 0, "mkdir: %s", strerror(errno));
	cr_assert_eq(shmcoll__arena_attach(&b, job, 2, 200000000, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "not a regular file"), "%s", err);
	cr_assert_eq(rmdir(path), 0);

	cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo: %s", strerror(errno));
	cr_assert_eq(shmcoll__arena_attach(&b, job, 2, 200000000, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "not a regular file"), "%s", err);
	cr_assert_eq(unlink(path), 0);
	cr_assert_not(path_exists(path));
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

/* A header that claims the caller's own rank count is still refused when
 * that count is one no layout has: the validator divides by it (the fuzzer
 * found 0 crashing it; tests/fuzz/corpus/arena_validate/nranks-zero). */
Test(arena, validate_refuses_impossible_rank_counts)
{
	static const uint32_t counts[] = {0, SHMCOLL_MAX_RANKS + 1, UINT32_MAX};
	struct shmcoll_arena_hdr h;
	size_t i;

	for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		memset(&h, 0, sizeof(h));
		h.magic = SHMCOLL_ARENA_MAGIC;
		h.version = SHMCOLL_ARENA_VERSION;
		h.hdr_bytes = sizeof(h);
		h.nranks = counts[i];
		h.total_bytes = 1 << 20;
		h.creator.pid = 1;
		h.slot_half = 512;
		cr_assert_eq(shmcoll__arena_validate(&h, 1 << 20, counts[i], err, sizeof(err)),
		             -EPROTO, "rank count %u", counts[i]);
		cr_assert(strstr(err, "rank count"), "%u: %s", counts[i], err);
	}
}

Test(arena, create_reports_enospc_and_leaves_nothing)
{
	struct shmcoll_arena a;
	char job[64];

	th_job_name(job, sizeof(job));
	/* Far beyond any /dev/shm here: tmpfs refuses the reservation at once. */
	cr_assert_eq(shmcoll__arena_create(&a, job, 2, (size_t)1 << 46, err, sizeof(err)), -ENOSPC,
	             "%s", err);
	cr_assert(strstr(err, "no room"), "%s", err);
	cr_assert_not(name_exists(&a));
}

/* ---- one mapping per process ---- */

#define SHARERS 8

struct sharer {
	const char *job;
	int rank;
	struct shmcoll_arena a;
	int rc;
	char err[256];
};

static void *attach_thread(void *arg)
{
	struct sharer *t = arg;

	t->rc =
	    shmcoll__arena_attach(&t->a, t->job, SHARERS, 10000000000ll, t->err, sizeof(t->err));
	if (t->rc == 0)
		shmcoll__arena_join(&t->a, (uint32_t)t->rank);
	return NULL;
}

static int mapped(const void *p)
{
	return msync((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, MS_ASYNC) == 0;
}

/* Ranks that are threads of one process share the creator's mapping; it is
 * unmapped only when the last of them releases it. */
Test(arena, threads_share_one_mapping)
{
	static struct sharer t[SHARERS];
	pthread_t th[SHARERS];
	struct shmcoll_arena *a = &t[0].a;
	char job[64];
	uint8_t *base;
	int i;

	th_job_name(job, sizeof(job));
	cr_assert_eq(shmcoll__arena_create(a, job, SHARERS, 0, err, sizeof(err)), 0, "%s", err);
	shmcoll__arena_join(a, 0);
	for (i = 1; i < SHARERS; i++) {
		t[i].job = job;
		t[i].rank = i;
		cr_assert_eq(pthread_create(&th[i], NULL, attach_thread, &t[i]), 0);
	}
	for (i = 1; i < SHARERS; i++)
		cr_assert_eq(pthread_join(th[i], NULL), 0);
	for (i = 1; i < SHARERS; i++) {
		cr_assert_eq(t[i].rc, 0, "thread %d: %s", i, t[i].err);
		cr_assert_eq(t[i].a.base, a->base, "thread %d has a mapping of its own", i);
		cr_assert_eq(t[i].a.bytes, a->bytes);
	}
	cr_assert_eq(load_relaxed(&a->hdr->attached), SHARERS);
	cr_assert_not(name_exists(a), "all attached: the name is gone");
	base = a->base;
	for (i = 0; i < SHARERS - 1; i++) {
		shmcoll__arena_release(&t[i].a, 0);
		cr_assert(mapped(base + a->bytes - 1), "unmapped with %d references left",
		          SHARERS - 1 - i);
	}
	shmcoll__arena_release(&t[SHARERS - 1].a, 0);
	cr_assert_not(mapped(base), "still mapped after the last release");
}

/* A forked child maps the segment itself, even though its parent's mapping
 * (and registry entry) came with the fork; both see the same memory. */
Test(arena, forked_child_maps_its_own)
{
	struct shmcoll_arena a;
	struct child_attach c;
	char job[64];

	th_job_name(job, sizeof(job));
	cr_assert_eq(shmcoll__arena_create(&a, job, 2, 0, err, sizeof(err)), 0, "%s", err);
	store_relaxed(&shmcoll__ctrl(&a, 0)->seq, 77u);
	attach_in_child(job, 2, 10000000000ll, &a, &c);
	cr_assert_eq(c.rc, 0, "%s", c.err);
	cr_assert(c.distinct, "the child reused the mapping it inherited");
	cr_assert(c.sees, "the child does not see the parent's write");
	cr_assert_eq(load_relaxed(&shmcoll__ctrl(&a, 1)->seq), 78u,
	             "the parent does not see the "
	             "child's write");
	shmcoll__arena_release(&a, 1);
	cr_assert_not(name_exists(&a));
}

/* Through the public API: thread ranks' symmetric buffers sit exactly one
 * heap partition apart, which only one shared mapping allows (two mappings of
 * the whole arena cannot be closer than its size). */
static uint8_t *sym_ptrs[TH_MAX_RANKS];

static int sym_body(shmcoll_comm *comm, int rank, void *arg)
{
	int P = shmcoll_comm_size(comm), r;
	uint8_t *p = shmcoll_malloc(comm, 256);

	(void)arg;
	if (!p)
		return 1;
	sym_ptrs[rank] = p;
	if (shmcoll_barrier(comm) < 0)
		return 2;
	for (r = 0; r < P; r++)
		if (sym_ptrs[r] != sym_ptrs[0] + (size_t)r * (size_t)(sym_ptrs[1] - sym_ptrs[0]))
			return 3;
	if (P > 1 && sym_ptrs[1] - sym_ptrs[0] != (ptrdiff_t)SHMCOLL_DEFAULT_HEAP_BYTES)
		return 4;
	if (shmcoll_barrier(comm) < 0)
		return 5;
	return shmcoll_free(comm, p) < 0 ? 6 : 0;
}

Test(arena, thread_communicators_share_one_mapping, .timeout = 120)
{
	th_opts o = {.timeout_ms = 60000};
	th_result res;
	struct shmcoll_layout l;
	char why[512];

	shmcoll__arena_layout(4, 0, &l, err, sizeof(err));
	if (shmcoll__arena_room(why, sizeof(why)) < l.total_bytes * 2)
		cr_skip_test("a default arena of 4 ranks would be shrunk here: %s", why);
	th_run_threads(4, sym_body, NULL, &o, &res);
	cr_assert(res.ok, "%s", res.summary);
}

/* ---- the stale sweep ---- */

struct notes {
	char buf[1 << 16];
	size_t len;
};

static void collect(void *arg, const char *line)
{
	struct notes *n = arg;
	int w = snprintf(n->buf + n->len, sizeof(n->buf) - n->len, "%s\n", line);

	if (w > 0 && n->len + (size_t)w < sizeof(n->buf))
		n->len += (size_t)w;
}

/* The note the sweep wrote about name ("removed X: ..." / "kept X: ..."),
 * copied into line; 0 if it wrote none. */
static int note_of(const struct notes *n, const char *name, char *line, size_t len)
{
	const char *p, *e;

	for (p = n->buf; (p = strstr(p, name)) != NULL; p++) {
		if (p[strlen(name)] != ':')
			continue;
		while (p > n->buf && p[-1] != '\n')
			p--;
		e = strchr(p, '\n');
		snprintf(line, len, "%.*s", (int)(e ? e - p : (ptrdiff_t)strlen(p)), p);
		return 1;
	}
	return 0;
}

static int sweep(struct notes *n)
{
	memset(n, 0, sizeof(*n));
	return shmcoll__arena_sweep(collect, n);
}

/* Another process of this user (or this test's own create) may sweep at the
 * same time: a segment removed by someone else is not in our notes. So the
 * end state is checked strictly, the note when there is one. */
static void assert_removed(const struct notes *n, const char *name, const char *why)
{
	char line[512], path[SHMCOLL_NAME_MAX + 16];

	snprintf(path, sizeof(path), "/dev/shm%s", name);
	cr_assert_not(path_exists(path), "%s is still there; sweep notes:\n%s", name, n->buf);
	if (note_of(n, name + 1, line, sizeof(line))) {
		cr_assert(!strncmp(line, "removed ", 8) && strstr(line, why), "note: %s", line);
		printf("sweep: %s\n", line);
	}
}

static void assert_kept(const struct notes *n, const char *name, const char *why)
{
	char line[512], path[SHMCOLL_NAME_MAX + 16];

	snprintf(path, sizeof(path), "/dev/shm%s", name);
	cr_assert(path_exists(path), "%s was removed; sweep notes:\n%s", name, n->buf);
	cr_assert(note_of(n, name + 1, line, sizeof(line)), "no note on %s:\n%s", name, n->buf);
	cr_assert(!strncmp(line, "kept ", 5) && strstr(line, why), "note: %s", line);
	printf("sweep: %s\n", line);
}

/* Creates job's arena in a child that exits without releasing it: its name
 * stays, with a creator that is gone. */
static void create_in_dead_child(const char *job, uint32_t nranks)
{
	struct shmcoll_arena a;
	pid_t pid = fork();
	int ws;

	cr_assert(pid >= 0);
	if (pid == 0)
		_exit(shmcoll__arena_create(&a, job, nranks, 0, err, sizeof(err)) == 0 ? 0 : 1);
	cr_assert_eq(waitpid(pid, &ws, 0), pid);
	cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the child could not create %s", job);
}

/* The identity of a process that has exited. */
static void dead_identity(struct shmcoll_proc_id *id)
{
	int fds[2], ws;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct shmcoll_proc_id me;

		shmcoll__proc_self(&me);
		_exit(write(fds[1], &me, sizeof(me)) == (ssize_t)sizeof(me) ? 0 : 1);
	}
	close(fds[1]);
	cr_assert_eq(read(fds[0], id, sizeof(*id)), (ssize_t)sizeof(*id));
	close(fds[0]);
	cr_assert_eq(waitpid(pid, &ws, 0), pid);
	cr_assert(id->start != 0, "no /proc: start time unknown");
}

/* Writes a segment at name by hand: a header (ready or not) and some room. */
static void write_segment(const char *name, const struct shmcoll_arena_hdr *h, int ready)
{
	struct shmcoll_arena_hdr copy = *h;
	int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);

	cr_assert(fd >= 0, "shm_open %s: %s", name, strerror(errno));
	store_relaxed(&copy.ready, ready ? SHMCOLL_ARENA_READY : 0u);
	cr_assert_eq(pwrite(fd, &copy, sizeof(copy), 0), (ssize_t)sizeof(copy));
	cr_assert_eq(ftruncate(fd, 65536), 0);
	close(fd);
}

static void good_header(struct shmcoll_arena_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = SHMCOLL_ARENA_MAGIC;
	h->version = SHMCOLL_ARENA_VERSION;
	h->hdr_bytes = sizeof(*h);
	h->nranks = 2;
	h->total_bytes = 65536;
}

static void set_age(const char *path, long seconds)
{
	struct timespec t[2];

	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= seconds;
	t[1] = t[0];
	cr_assert_eq(utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW), 0, "utimensat: %s",
	             strerror(errno));
}

Test(arena, sweep_removes_arenas_of_dead_creators)
{
	struct shmcoll_arena_hdr h;
	struct notes n;
	char ready_job[64], early_job[64], name[SHMCOLL_NAME_MAX], early[SHMCOLL_NAME_MAX];
	char path[SHMCOLL_NAME_MAX + 16];

	/* Made by rank 0 of a job that died before every rank attached. */
	th_job_name(ready_job, sizeof(ready_job));
	create_in_dead_child(ready_job, 2);
	job_path(ready_job, name, path, sizeof(path));
	cr_assert(path_exists(path));
	/* A creator that died before it stored ready. */
	th_job_name(early_job, sizeof(early_job));
	job_path(early_job, early, path, sizeof(path));
	good_header(&h);
	dead_identity(&h.creator);
	write_segment(early, &h, 0);

	cr_assert_geq(sweep(&n), 0);
	assert_removed(&n, name, "is gone");
	assert_removed(&n, early, "is gone");
}

Test(arena, sweep_keeps_live_and_unknown_creators)
{
	struct shmcoll_arena a;
	struct shmcoll_arena_hdr h;
	struct notes n;
	char live_job[64], ns_job[64], old_job[64], ns[SHMCOLL_NAME_MAX], old[SHMCOLL_NAME_MAX];
	char path[SHMCOLL_NAME_MAX + 16];

	th_job_name(live_job, sizeof(live_job));
	cr_assert_eq(shmcoll__arena_create(&a, live_job, 2, 0, err, sizeof(err)), 0, "%s", err);
	/* A creator in another pid namespace: its pid means nothing here. */
	th_job_name(ns_job, sizeof(ns_job));
	job_path(ns_job, ns, path, sizeof(path));
	good_header(&h);
	dead_identity(&h.creator);
	h.creator.pidns ^= 1;
	write_segment(ns, &h, 1);
	set_age(path, 3600);
	/* Another layout version: not ours to judge. */
	th_job_name(old_job, sizeof(old_job));
	job_path(old_job, old, path, sizeof(path));
	good_header(&h);
	h.version = SHMCOLL_ARENA_VERSION - 1;
	write_segment(old, &h, 1);
	set_age(path, 3600);

	cr_assert_geq(sweep(&n), 0);
	assert_kept(&n, a.name, "is alive");
	assert_kept(&n, ns, "cannot tell");
	assert_kept(&n, old, "layout version");
	shmcoll__arena_release(&a, 1);
	cr_assert_eq(shm_unlink(ns), 0);
	cr_assert_eq(shm_unlink(old), 0);
	cr_assert_not(name_exists(&a));
}

/* A segment without a header: kept while young (its creator may be writing
 * it), removed once over a minute old. */
Test(arena, sweep_removes_headerless_segments_by_age)
{
	struct notes n;
	char job[64], name[SHMCOLL_NAME_MAX], path[SHMCOLL_NAME_MAX + 16];
	int fd;

	th_job_name(job, sizeof(job));
	job_path(job, name, path, sizeof(path));
	fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
	cr_assert(fd >= 0, "%s", strerror(errno));
	close(fd);
	cr_assert_geq(sweep(&n), 0);
	assert_kept(&n, name, "no header yet");
	set_age(path, 120);
	cr_assert_geq(sweep(&n), 0);
	assert_removed(&n, name, "no header");
}

/* Other users' files, symlinks, directories and FIFOs under our prefix are
 * never touched, however old. */
Test(arena, sweep_leaves_what_is_not_ours)
{
	struct notes n;
	char jobs[4][64], names[4][SHMCOLL_NAME_MAX], paths[4][SHMCOLL_NAME_MAX + 16];
	char target[SHMCOLL_NAME_MAX + 16];
	int i, fd, root = geteuid() == 0;

	for (i = 0; i < 4; i++) {
		th_job_name(jobs[i], sizeof(jobs[i]));
		job_path(jobs[i], names[i], paths[i], sizeof(paths[i]));
	}
	/* An old headerless file that would be removed if it were ours. */
	fd = shm_open(names[0], O_CREAT | O_EXCL | O_RDWR, 0600);
	cr_assert(fd >= 0, "%s", strerror(errno));
	if (root)
		cr_assert_eq(fchown(fd, 65534, 65534), 0, "fchown: %s", strerror(errno));
	close(fd);
	set_age(paths[0], 3600);
	snprintf(target, sizeof(target), "%s", paths[0]);
	cr_assert_eq(symlink(root ? target : "/nonexistent", paths[1]), 0);
	set_age(paths[1], 3600);
	cr_assert_eq(mkdir(paths[2], 0700), 0);
	set_age(paths[2], 3600);
	cr_assert_eq(mkfifo(paths[3], 0600), 0);
	set_age(paths[3], 3600);

	cr_assert_geq(sweep(&n), 0);
	for (i = root ? 0 : 1; i < 4; i++)
		assert_kept(&n, names[i], i == 1 ? "cannot open" : "not a regular file of ours");
	if (!root) {
		assert_removed(&n, names[0], "no header");
	} else {
		cr_assert_eq(unlink(paths[0]), 0);
	}
	cr_assert_eq(unlink(paths[1]), 0);
	cr_assert_eq(rmdir(paths[2]), 0);
	cr_assert_eq(unlink(paths[3]), 0);
	if (!root)
		cr_skip_test("ran without root: another user's file could not be made "
		             "(symlinks, directories and FIFOs were checked)");
}

/* A job that reuses the name of a job that died while starting: rank 0's
 * sweep replaces the dead arena, and a rank that comes first does not attach
 * to the dead one. Ranks are threads here, rank 1 started first. */
struct reuse_rank {
	const char *job;
	int rank, rc;
	char err[256];
};

static void *reuse_thread(void *arg)
{
	struct reuse_rank *r = arg;
	shmcoll_config cfg = {.rank = r->rank, .size = 2, .job = r->job, .timeout_ms = 60000};
	shmcoll_comm *comm;
	int32_t x = r->rank + 1;

	r->rc = shmcoll_comm_create(&cfg, &comm);
	if (r->rc < 0) {
		snprintf(r->err, sizeof(r->err), "create: %s", shmcoll_last_error(NULL));
		return NULL;
	}
	r->rc = shmcoll_allreduce(&x, &x, 1, SHMCOLL_INT32, SHMCOLL_SUM, comm);
	if (r->rc == 0 && x != 3)
		r->rc = -ERANGE;
	snprintf(r->err, sizeof(r->err), "%s", shmcoll_last_error(comm));
	shmcoll_comm_destroy(comm);
	return NULL;
}

Test(arena, job_replaces_the_arena_of_a_dead_namesake, .timeout = 120)
{
	struct reuse_rank r[2];
	pthread_t th[2];
	char job[64], name[SHMCOLL_NAME_MAX], path[SHMCOLL_NAME_MAX + 16];
	int i;

	th_job_name(job, sizeof(job));
	job_path(job, name, path, sizeof(path));
	create_in_dead_child(job, 2);
	cr_assert(path_exists(path));
	for (i = 1; i >= 0; i--) {
		r[i] = (struct reuse_rank){.job = job, .rank = i};
		cr_assert_eq(pthread_create(&th[i], NULL, reuse_thread, &r[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		cr_assert_eq(pthread_join(th[i], NULL), 0);
		cr_assert_eq(r[i].rc, 0, "rank %d: %d: %s", i, r[i].rc, r[i].err);
	}
	cr_assert_not(path_exists(path), "the arena is left");
}

/* ---- sizing a new arena to the room there is ---- */

/* The shrunken default layout: within the room, valid, the heap shrinks
 * before the staging halves, and -ENOSPC only below the least layout. */
Test(arena, fit_shrinks_heap_then_staging)
{
	static const uint32_t ranks[] = {1, 2, 3, 8, 64, 1024};
	struct shmcoll_layout def, least, l;
	struct shmcoll_arena_hdr h;
	size_t i;
	uint64_t room, step;
	unsigned long long least_bytes;

	for (i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++) {
		uint32_t n = ranks[i];

		cr_assert_eq(shmcoll__arena_layout(n, 0, &def, err, sizeof(err)), 0);
		cr_assert_eq(shmcoll__arena_fit(n, def.total_bytes, &l), 0);
		cr_assert_eq(l.total_bytes, def.total_bytes, "what fits is not shrunk");
		cr_assert_eq(shmcoll__arena_fit(n, UINT64_MAX, &l), 0);
		cr_assert_eq(l.heap_stride, def.heap_stride);
		/* The least layout: what arena_layout takes as its minimum. */
		shmcoll__arena_layout(n, 1, &least, err, sizeof(err));
		cr_assert_eq(sscanf(strstr(err, "minimum ") + 8, "%llu", &least_bytes), 1, "%s",
		             err);
		room = least_bytes;
		cr_assert_eq(shmcoll__arena_fit(n, room - 1, &l), -ENOSPC, "%u ranks", n);
		step = (def.total_bytes - room) / 997 + 1;
		for (; room < def.total_bytes; room += step) {
			cr_assert_eq(shmcoll__arena_fit(n, room, &l), 0, "%u ranks, %llu", n,
			             (unsigned long long)room);
			cr_assert_leq(l.total_bytes, room);
			cr_assert(l.heap_stride == 0 || l.slot_half == SHMCOLL_DEFAULT_SLOT_HALF,
			          "staging shrank before the heap was gone");
			/* Rings halve only where the larger ones no longer fit: what the heap
			 * got back is less than doubling them would take. */
			cr_assert(l.ring_bytes == def.ring_bytes ||
			              l.heap_stride * n < (uint64_t)n * n * l.ring_bytes,
			          "the rings shrank before the heap was gone");
			cr_assert(l.ring_bytes == SHMCOLL_RING_MIN ||
			              l.slot_half == SHMCOLL_DEFAULT_SLOT_HALF,
			          "staging shrank before the rings were least");
			header_of(&h, &l, n);
			cr_assert_eq(
			    shmcoll__arena_validate(&h, l.total_bytes, n, err, sizeof(err)), 0,
			    "%u ranks, room %llu: %s", n, (unsigned long long)room, err);
		}
	}
}

static void write_file(const char *dir, const char *rel, const char *text)
{
	char path[PATH_MAX], *p;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	for (p = path + strlen(dir) + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		mkdir(path, 0700);
		*p = '/';
	}
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

static void remove_tree(const char *path)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	cr_assert_eq(system(cmd), 0);
}

/* The memory cgroup's room from fake /proc and /sys files: v2 and v1 (with a
 * space in its mount point, and mounted from inside the hierarchy), every
 * ancestor walked, file cache counted as free, "max" as no limit. */
Test(arena, memcg_room_from_cgroup_files)
{
	char dir[] = "/tmp/shmcoll-memcg.XXXXXX", cgf[PATH_MAX], mif[PATH_MAX], text[2048];
	char where[PATH_MAX];
	uint64_t room;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(cgf, sizeof(cgf), "%s/cgroup", dir);
	snprintf(mif, sizeof(mif), "%s/mountinfo", dir);
	/* A mount of another part of the v2 hierarchy comes first. */
	snprintf(text, sizeof(text),
	         "29 20 0:26 /other %s/v2other rw - cgroup2 cgroup2 rw\n"
	         "30 20 0:26 / %s/v2 rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	         "35 31 0:32 /outer %s/v1\\040mem rw,relatime shared:9 - cgroup cgroup "
	         "rw,memory\n"
	         "36 31 0:33 / %s/v1cpu rw,relatime - cgroup cgroup rw,cpu\n",
	         dir, dir, dir, dir);
	write_file(dir, "mountinfo", text);
	write_file(dir, "cgroup", "5:cpu:/x\n4:memory:/outer/a/b\n0::/job/x\n");

	/* Nothing limited: no room limit. */
	shmcoll__memcg_room(cgf, mif, &room, where, sizeof(where));
	cr_assert_eq(room, UINT64_MAX);

	/* v2: the leaf says max, its parent 100 MiB with 60 MiB used, 10 MiB
	 * of it file cache: 50 MiB left. */
	write_file(dir, "v2/job/x/memory.max", "max\n");
	write_file(dir, "v2/job/x/memory.current", "1000\n");
	write_file(dir, "v2/job/memory.max", "104857600\n");
	write_file(dir, "v2/job/memory.current", "62914560\n");
	write_file(dir, "v2/job/memory.stat",
	           "anon 1\nfile 9\nactive_file 5242880\ninactive_file 5242880\nshmem 7\n");
	shmcoll__memcg_room(cgf, mif, &room, where, sizeof(where));
	cr_assert_eq(room, 50ull << 20);
	cr_assert(strstr(where, "/v2/job") && !strstr(where, "/v2/job/x"), "%s", where);

	/* v1, mounted from /outer: the cgroup /outer/a/b is <mount>/a/b. The
	 * leaf is unlimited (v1's huge number), /a has 40 MiB left. */
	write_file(dir, "v1 mem/a/b/memory.limit_in_bytes", "9223372036854771712\n");
	write_file(dir, "v1 mem/a/b/memory.usage_in_bytes", "4096\n");
	write_file(dir, "v1 mem/a/memory.limit_in_bytes", "83886080\n");
	write_file(dir, "v1 mem/a/memory.usage_in_bytes", "62914560\n");
	write_file(dir, "v1 mem/a/memory.stat",
	           "cache 1\ninactive_file 99999999\ntotal_inactive_file 10485760\n"
	           "total_active_file 10485760\n");
	shmcoll__memcg_room(cgf, mif, &room, where, sizeof(where));
	cr_assert_eq(room, 40ull << 20);
	cr_assert(strstr(where, "/v1 mem/a") && !strstr(where, "/v1 mem/a/b"), "%s", where);

	/* Over the limit: no room at all. */
	write_file(dir, "v1 mem/memory.limit_in_bytes", "1048576\n");
	write_file(dir, "v1 mem/memory.usage_in_bytes", "2097152\n");
	shmcoll__memcg_room(cgf, mif, &room, where, sizeof(where));
	cr_assert_eq(room, 0);

	/* Unreadable files: no limit known. */
	shmcoll__memcg_room("/nonexistent", mif, &room, where, sizeof(where));
	cr_assert_eq(room, UINT64_MAX);
	remove_tree(dir);
}

/* Tests that need a /dev/shm of their own run in a child with a private
 * mount namespace and a small tmpfs mounted there: nothing else on the
 * machine sees it, and it disappears with the child. */
#define ISO_SKIP 77

static int iso_fd = -1; /* the isolated child's message pipe */

__attribute__((format(printf, 2, 3))) static int iso_say(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdprintf(iso_fd, fmt, ap);
	va_end(ap);
	dprintf(iso_fd, "\n");
	return code;
}

/* Runs fn in an isolated child whose /dev/shm is a tmpfs mounted with opts;
 * returns its exit code with what it said in msg. Skips the test when a
 * mount namespace or the mount is not permitted here. */
static int run_isolated(int (*fn)(void *), void *arg, const char *opts, char *msg, size_t len)
{
	int fds[2], ws;
	ssize_t n;
	size_t got = 0;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(fds[0]);
		iso_fd = fds[1];
		if (unshare(CLONE_NEWNS) < 0)
			_exit(iso_say(ISO_SKIP, "unshare(CLONE_NEWNS): %s", strerror(errno)));
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(iso_say(ISO_SKIP, "making mounts private: %s", strerror(errno)));
		if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
			_exit(iso_say(ISO_SKIP, "mounting a tmpfs (%s) on /dev/shm: %s", opts,
			              strerror(errno)));
		_exit(fn(arg));
	}
	close(fds[1]);
	while (got + 1 < len && (n = read(fds[0], msg + got, len - 1 - got)) > 0)
		got += (size_t)n;
	msg[got] = '\0';
	close(fds[0]);
	cr_assert_eq(waitpid(pid, &ws, 0), pid);
	cr_assert(WIFEXITED(ws), "the isolated child was killed by signal %d; it said:\n%s",
	          WIFSIGNALED(ws) ? WTERMSIG(ws) : 0, msg);
	if (WEXITSTATUS(ws) == ISO_SKIP)
		cr_skip_test("no private /dev/shm here: %s", msg);
	printf("%s", msg);
	return WEXITSTATUS(ws);
}

/* Entries of this user's arenas in /dev/shm. */
static int shm_entries(void)
{
	char prefix[SHMCOLL_NAME_MAX];
	struct dirent *e;
	DIR *d = opendir("/dev/shm");
	int n = 0;

	if (!d || shmcoll__arena_prefix(prefix, sizeof(prefix)) < 0)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

/* Fills /dev/shm with a file (not an arena: no prefix) so that leave bytes
 * stay free. 0 or -1. */
static int fill_to(uint64_t leave)
{
	struct statvfs sv;
	uint64_t free_bytes;
	int fd, rc;

	if (statvfs("/dev/shm", &sv) < 0)
		return -1;
	free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (free_bytes <= leave)
		return 0;
	fd = open("/dev/shm/filler", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	rc = posix_fallocate(fd, 0, (off_t)(free_bytes - leave));
	close(fd);
	return rc ? -1 : 0;
}

#define MIB (1024ull * 1024)

/* On a 4 MiB /dev/shm: the default arena shrinks its heap, then (with
 * 160 KiB left) its staging halves; an explicit size that does not fit, an
 * arena whose least layout does not fit, and a /dev/shm with almost nothing
 * left are -ENOSPC with the sizes in the message. Nothing is left behind. */
static int iso_preflight(void *arg)
{
	struct shmcoll_layout def;
	struct shmcoll_arena a;
	char e[512], why[512];
	uint64_t room;
	int rc;

	(void)arg;
	room = shmcoll__arena_room(why, sizeof(why));
	if (room > 4 * MIB || !strstr(why, "/dev/shm has"))
		return iso_say(1, "room %llu on a 4 MiB tmpfs: %s", (unsigned long long)room, why);
	shmcoll__arena_layout(3, 0, &def, e, sizeof(e));
	rc = shmcoll__arena_create(&a, "iso-shrink", 3, 0, e, sizeof(e));
	if (rc)
		return iso_say(2, "default arena of 3 ranks on 4 MiB: %d: %s", rc, e);
	iso_say(0,
	        "4 MiB /dev/shm: default arena of 3 ranks %llu -> %llu bytes (heap %llu, "
	        "staging half %llu)",
	        (unsigned long long)def.total_bytes, (unsigned long long)a.lay.total_bytes,
	        (unsigned long long)a.lay.heap_stride, (unsigned long long)a.lay.slot_half);
	if (a.lay.total_bytes > room - room / 8 || !a.lay.heap_stride ||
	    a.lay.heap_stride >= def.heap_stride || a.lay.slot_half != def.slot_half)
		return iso_say(3, "not the heap-shrunk layout");
	shmcoll__arena_release(&a, 1);

	rc = shmcoll__arena_create(&a, "iso-explicit", 2, 8 * MIB, e, sizeof(e));
	if (rc != -ENOSPC || !strstr(e, "8388608") || !strstr(e, "available"))
		return iso_say(4, "explicit 8 MiB on 4 MiB: %d: %s", rc, e);
	iso_say(0, "explicit 8 MiB: %s", e);
	rc = shmcoll__arena_create(&a, "iso-many", SHMCOLL_MAX_RANKS, 0, e, sizeof(e));
	if (rc != -ENOSPC || !strstr(e, "needs") || !strstr(e, "available"))
		return iso_say(5, "default arena of %d ranks on 4 MiB: %d: %s", SHMCOLL_MAX_RANKS,
		               rc, e);
	iso_say(0, "%d ranks: %s", SHMCOLL_MAX_RANKS, e);

	if (fill_to(160 * 1024) < 0)
		return iso_say(6, "cannot fill /dev/shm: %s", strerror(errno));
	room = shmcoll__arena_room(why, sizeof(why));
	rc = shmcoll__arena_create(&a, "iso-tiny", 3, 0, e, sizeof(e));
	if (rc)
		return iso_say(7, "default arena of 3 ranks in %llu bytes: %d: %s",
		               (unsigned long long)room, rc, e);
	iso_say(0,
	        "%llu bytes free: default arena of 3 ranks -> %llu bytes (heap %llu, "
	        "staging half %llu)",
	        (unsigned long long)room, (unsigned long long)a.lay.total_bytes,
	        (unsigned long long)a.lay.heap_stride, (unsigned long long)a.lay.slot_half);
	if (a.lay.total_bytes > room || a.lay.heap_stride || a.lay.slot_half >= def.slot_half)
		return iso_say(8, "not the staging-shrunk layout");
	shmcoll__arena_release(&a, 1);

	unlink("/dev/shm/filler");
	if (fill_to(8192) < 0)
		return iso_say(9, "cannot fill /dev/shm: %s", strerror(errno));
	rc = shmcoll__arena_create(&a, "iso-full", 3, 0, e, sizeof(e));
	if (rc != -ENOSPC || !strstr(e, "needs"))
		return iso_say(10, "default arena of 3 ranks in 8 KiB: %d: %s", rc, e);
	iso_say(0, "8 KiB free: %s", e);
	unlink("/dev/shm/filler");
	if (shm_entries() != 0)
		return iso_say(11, "%d entries left in /dev/shm", shm_entries());
	return 0;
}

Test(arena, preflight_shrinks_or_refuses, .timeout = 120)
{
	char msg[8192];
	int code = run_isolated(iso_preflight, NULL, "size=4m,mode=1777", msg, sizeof(msg));

	cr_assert_eq(code, 0, "check %d failed:\n%s", code, msg);
}

/* The same through shmcoll_comm_create: a rank 0 that cannot have its arena
 * gets -ENOSPC and the message, and leaves nothing. */
static int iso_comm_enospc(void *arg)
{
	shmcoll_config cfg = {.rank = 0, .size = 3, .job = "iso-comm", .timeout_ms = 1000};
	shmcoll_comm *comm = NULL;
	int rc;

	(void)arg;
	cfg.arena_bytes = 8 * MIB;
	rc = shmcoll_comm_create(&cfg, &comm);
	if (rc != -ENOSPC || comm || !strstr(shmcoll_last_error(NULL), "available"))
		return iso_say(1, "explicit 8 MiB: %d: %s", rc, shmcoll_last_error(NULL));
	cfg.arena_bytes = 0;
	if (fill_to(4096) < 0)
		return iso_say(2, "cannot fill /dev/shm: %s", strerror(errno));
	rc = shmcoll_comm_create(&cfg, &comm);
	if (rc != -ENOSPC || comm || !strstr(shmcoll_last_error(NULL), "needs"))
		return iso_say(3, "full /dev/shm: %d: %s", rc, shmcoll_last_error(NULL));
	iso_say(0, "shmcoll_comm_create on a full /dev/shm: %s", shmcoll_last_error(NULL));
	unlink("/dev/shm/filler");
	return shm_entries() == 0 ? 0 : iso_say(4, "entries left in /dev/shm");
}

Test(arena, comm_create_reports_enospc, .timeout = 60)
{
	char msg[8192];
	int code = run_isolated(iso_comm_enospc, NULL, "size=4m,mode=1777", msg, sizeof(msg));

	cr_assert_eq(code, 0, "check %d failed:\n%s", code, msg);
}

/* Every collective, small and pipelined counts, on a shrunken arena. */
struct shrunk {
	uint64_t leave; /* fill /dev/shm so that this much is left; 0: do not */
	int sym;        /* the heap is not empty: use symmetric buffers too */
};

static int every_coll_body(shmcoll_comm *comm, int rank, void *arg)
{
	static const shmcoll_dtype dts[] = {SHMCOLL_FLOAT32, SHMCOLL_INT64};
	const struct shrunk *x = arg;
	int P = shmcoll_comm_size(comm), c, k, d, v, nv, rc, e;
	size_t counts[5] = {0, 1, 7, 4097, 0}, maxb = 0, symb = 0, b;
	th_variant vars[TH_VARIANT_COUNT];
	th_checker *ck;
	th_case kc;

	(void)rank;
	/* Collective: NULL on every rank, since the heap was shrunk. */
	if (shmcoll_malloc(comm, SHMCOLL_DEFAULT_HEAP_BYTES))
		return 90;
	for (c = 0; c < TH_COLL_COUNT; c++) {
		counts[4] = th_large_count(c, SHMCOLL_INT64, P, 256 * 1024);
		for (k = 0; k < 5; k++) {
			b = th_coll_region_elems(c, counts[k], P) * 8;
			maxb = b > maxb ? b : maxb;
		}
		b = th_coll_region_elems(c, 7, P) * 8;
		symb = b > symb ? b : symb;
	}
	ck = th_check_new(comm, maxb, x->sym ? symb : 0, &e);
	if (!ck)
		return e;
	for (c = 0; c < TH_COLL_COUNT; c++) {
		counts[4] = th_large_count(c, SHMCOLL_INT64, P, 256 * 1024);
		nv = th_coll_variants(c, vars);
		for (k = 0; k < 5; k++)
			for (d = 0; d < 2; d++)
				for (v = 0; v < nv; v++) {
					memset(&kc, 0, sizeof(kc));
					kc.coll = c;
					kc.dtype = dts[d];
					kc.op = SHMCOLL_SUM;
					kc.count = counts[k];
					kc.root = P - 1;
					kc.variant = vars[v];
					kc.sym =
					    x->sym && counts[k] <= 7 ? TH_SYM_BOTH : TH_SYM_NONE;
					if (!th_sym_useful(kc.variant, kc.sym) ||
					    !th_check_sym_fits(ck, &kc))
						kc.sym = TH_SYM_NONE;
					th_check_run(ck, &kc);
				}
	}
	e = th_check_first_error(ck);
	rc = th_check_free(ck);
	return e ? e : rc;
}

static int iso_collectives(void *arg)
{
	const struct shrunk *x = arg;
	th_opts o = {.timeout_ms = 60000, .wall_ms = 200000};
	th_result res;
	char why[512];

	if (x->leave && fill_to(x->leave) < 0)
		return iso_say(1, "cannot fill /dev/shm: %s", strerror(errno));
	iso_say(0, "3 ranks, %s", (shmcoll__arena_room(why, sizeof(why)), why));
	th_run_ranks(3, every_coll_body, (void *)x, &o, &res);
	if (!res.ok)
		return iso_say(2, "%s", res.summary);
	unlink("/dev/shm/filler");
	return shm_entries() == 0 ? 0 : iso_say(3, "entries left in /dev/shm");
}

Test(arena, collectives_on_a_heap_shrunk_arena, .timeout = 300)
{
	struct shrunk x = {.leave = 0, .sym = 1};
	char msg[16384];
	int code = run_isolated(iso_collectives, &x, "size=4m,mode=1777", msg, sizeof(msg));

	cr_assert_eq(code, 0, "check %d failed:\n%s", code, msg);
}

Test(arena, collectives_on_a_staging_shrunk_arena, .timeout = 300)
{
	struct shrunk x = {.leave = 160 * 1024, .sym = 0};
	char msg[16384];
	int code = run_isolated(iso_collectives, &x, "size=4m,mode=1777", msg, sizeof(msg));

	cr_assert_eq(code, 0, "check %d failed:\n%s", code, msg);
}

/* Strictly, where no other process can sweep: the sweep itself removes the
 * arena of a dead creator and says so. */
static int iso_sweep(void *arg)
{
	struct shmcoll_arena a;
	struct notes *n = arg;
	char e[512], want[SHMCOLL_NAME_MAX + 64];
	pid_t pid;
	int ws, removed;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return iso_say(1, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(shmcoll__arena_create(&a, "iso-dead", 2, 0, e, sizeof(e)) == 0 ? 0 : 1);
	if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws))
		return iso_say(2, "the child could not create its arena");
	shmcoll__arena_name(a.name, sizeof(a.name), "iso-dead");
	removed = shmcoll__arena_sweep(collect, n);
	snprintf(want, sizeof(want), "removed %s: its creator (pid %ld) is gone", a.name + 1,
	         (long)pid);
	if (removed != 1 || !strstr(n->buf, want))
		return iso_say(3, "swept %d; want '%s' in:\n%s", removed, want, n->buf);
	iso_say(0, "%s", want);
	return shm_entries() == 0 ? 0 : iso_say(4, "entries left in /dev/shm");
}

Test(arena, sweep_in_a_private_shm, .timeout = 60)
{
	static struct notes n;
	char msg[8192];
	int code = run_isolated(iso_sweep, &n, "size=16m,mode=1777", msg, sizeof(msg));

	cr_assert_eq(code, 0, "check %d failed:\n%s", code, msg);
}

/* In a memory cgroup of its own with a 24 MiB limit (cgroup v1, or v2 where
 * our cgroup delegates the memory controller), a default arena of 8 ranks
 * (34 MiB) shrinks to the cgroup's room and an explicit 32 MiB is -ENOSPC,
 * never a memcg OOM kill. */
static int memcg_dir(char *dir, size_t len, int *v2)
{
	char line[1024], ctl[256];
	FILE *f = fopen("/proc/self/cgroup", "r");
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;

		if (!b)
			continue;
		b[strcspn(b, "\n")] = '\0';
		snprintf(ctl, sizeof(ctl), "%.*s", (int)(b - a - 1), a + 1);
		if (!strcmp(ctl, "memory") || strstr(ctl, "memory,") || strstr(ctl, ",memory")) {
			snprintf(dir, len, "/sys/fs/cgroup/memory%s", b + 1);
			*v2 = 0;
			found = 1;
		} else if (!strncmp(line, "0::", 3)) {
			char path[1200], buf[256] = "";
			FILE *s;

			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/cgroup.subtree_control",
			         b + 1);
			s = fopen(path, "r");
			if (s) {
				if (!fgets(buf, sizeof(buf), s))
					buf[0] = '\0';
				fclose(s);
			}
			if (strstr(buf, "memory")) {
				snprintf(dir, len, "/sys/fs/cgroup%s", b + 1);
				*v2 = 1;
				found = 1;
			}
		}
	}
	fclose(f);
	return found;
}

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

Test(arena, preflight_in_a_memory_cgroup, .timeout = 60)
{
	char parent[1024], dir[1100], path[1200], pid[32], e[512], why[1400];
	char djob[64], ejob[64], dname[SHMCOLL_NAME_MAX], ename[SHMCOLL_NAME_MAX];
	char dpath[SHMCOLL_NAME_MAX + 16], epath[SHMCOLL_NAME_MAX + 16];
	struct shmcoll_layout def;
	struct shmcoll_arena a;
	uint64_t room;
	pid_t child;
	int v2, ws, i, code;

	if (geteuid() != 0)
		cr_skip_test("needs root to make a memory cgroup");
	if (!memcg_dir(parent, sizeof(parent), &v2))
		cr_skip_test("no memory cgroup this process may subdivide");
	snprintf(dir, sizeof(dir), "%s/shmcoll-test-%ld", parent, (long)getpid());
	if (mkdir(dir, 0755) < 0)
		cr_skip_test("cannot make a cgroup in %s: %s", parent, strerror(errno));
	snprintf(path, sizeof(path), "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
	if (write_text(path, "25165824") < 0) {
		rmdir(dir);
		cr_skip_test("cannot set %s: %s", path, strerror(errno));
	}
	th_job_name(djob, sizeof(djob));
	th_job_name(ejob, sizeof(ejob));
	job_path(djob, dname, dpath, sizeof(dpath));
	job_path(ejob, ename, epath, sizeof(epath));
	fflush(NULL);
	child = fork();
	cr_assert(child >= 0);
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
		snprintf(pid, sizeof(pid), "%ld", (long)getpid());
		if (write_text(path, pid) < 0)
			_exit(ISO_SKIP);
		room = shmcoll__arena_room(why, sizeof(why));
		printf("in a 24 MiB cgroup: %s\n", why);
		if (room > 24 * MIB || !strstr(why, "memory cgroup"))
			_exit(1);
		shmcoll__arena_layout(8, 0, &def, e, sizeof(e));
		if (shmcoll__arena_create(&a, djob, 8, 0, e, sizeof(e)) < 0) {
			printf("%s\n", e);
			_exit(2);
		}
		printf("default arena of 8 ranks: %llu -> %llu bytes\n",
		       (unsigned long long)def.total_bytes, (unsigned long long)a.lay.total_bytes);
		if (a.lay.total_bytes > room || a.lay.heap_stride >= def.heap_stride)
			_exit(3);
		shmcoll__arena_release(&a, 1);
		code = shmcoll__arena_create(&a, ejob, 2, 32 * MIB, e, sizeof(e));
		printf("explicit 32 MiB: %d: %s\n", code, e);
		if (code != -ENOSPC || !strstr(e, "memory cgroup"))
			_exit(4);
		fflush(NULL);
		_exit(0);
	}
	cr_assert_eq(waitpid(child, &ws, 0), child);
	/* The cgroup is empty once its only process is reaped. */
	for (i = 0; i < 100 && rmdir(dir) < 0 && errno == EBUSY; i++)
		sched_yield();
	cr_assert(WIFEXITED(ws), "the child was killed by signal %d (a memcg OOM kill?)",
	          WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
	if (WEXITSTATUS(ws) == ISO_SKIP)
		cr_skip_test("cannot move a process into %s", dir);
	cr_assert_eq(WEXITSTATUS(ws), 0, "check %d failed (see stdout)", WEXITSTATUS(ws));
	cr_assert_not(path_exists(dpath) || path_exists(epath), "an arena is left in /dev/shm");
}
