/* arena.c - create, attach, validate and release a job's shared-memory arena;
 * size it to the room the machine has; sweep the arenas of dead creators. The
 * name lives only until every rank has attached; after that the segment
 * exists only as mappings, so only a job that dies while starting can leave
 * a name behind in /dev/shm, and the sweep removes those. */
#include "shm/arena.h"

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
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "shm/wait.h"

#define PAGE    4096u
#define SHM_DIR "/dev/shm" /* where glibc's shm_open() keeps its objects */
/* A segment without a header this old lost its creator between creating the
 * name and writing the header, which takes a few system calls. */
#define STALE_AGE_S 60
/* Of the room measured, a default arena shrinks to leave this fraction
 * (1/8) free: the ranks' own memory is charged to the same cgroup, and the
 * space is shared with every other user of /dev/shm. */
#define ROOM_MARGIN_DIV 8
/* cgroup v1 writes "no limit" as the largest page multiple of a long. */
#define CG1_UNLIMITED (1ull << 62)
/* Longest cgroup directory looked at (a longer one counts as no limit):
 * kept small, as creation may run on a thread with a small stack. */
#define CG_PATH 1024

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static uint64_t min_half(uint32_t nranks)
{
	/* A chunk of a per-peer split (reduce_scatter, alltoall) must hold at
	 * least one 8-byte element for every rank. */
	uint64_t m = (uint64_t)nranks * 8;

	return round_up(m > SHMCOLL_MIN_SLOT_HALF ? m : SHMCOLL_MIN_SLOT_HALF, SHMCOLL_LINE);
}

/* Where the second ring starts in a control block: after the messages. */
static uint64_t msg_big_off(uint64_t msgs)
{
	return round_up(sizeof(struct shmcoll_ctrl) + msgs * sizeof(struct shmcoll_msg),
	                SHMCOLL_LINE);
}

/* One control block with msgs inline messages carrying up to max bytes each: beyond
 * SHMCOLL_INLINE_MAX, with a second ring of msgs data slots of max bytes. */
static uint64_t ctrl_stride(uint64_t msgs, uint64_t max)
{
	if (max > SHMCOLL_INLINE_MAX)
		return msg_big_off(msgs) + msgs * max;
	return sizeof(struct shmcoll_ctrl) + msgs * sizeof(struct shmcoll_msg);
}

/* The message rings a layout may have (arena.h), the largest first: the deep ring with
 * data slots of SHMCOLL_MSG_DATA_MAX, then SHMCOLL_MSG_DATA_MID, then the shallow ring. */
static const struct {
	uint64_t msgs, max;
} msg_shapes[] = {
    {SHMCOLL_MSG_RING_DEFAULT, SHMCOLL_MSG_DATA_MAX},
    {SHMCOLL_MSG_RING_DEFAULT, SHMCOLL_MSG_DATA_MID},
    {SHMCOLL_MSG_RING_MIN, SHMCOLL_INLINE_MAX},
};
enum { SHAPE_DEEP = 0, SHAPE_LEAST = sizeof(msg_shapes) / sizeof(msg_shapes[0]) - 1 };

/* The shape a header names, -1 for none. */
static int msg_shape_of(uint64_t msgs, uint64_t max)
{
	for (int i = 0; i <= SHAPE_LEAST; i++)
		if (msg_shapes[i].msgs == msgs && msg_shapes[i].max == max)
			return i;
	return -1;
}

/* The header page and the control blocks. */
static uint64_t fixed_bytes(uint32_t nranks, int shape)
{
	return round_up(PAGE + (uint64_t)nranks *
	                           ctrl_stride(msg_shapes[shape].msgs, msg_shapes[shape].max),
	                PAGE);
}

/* The point-to-point control blocks of nranks ranks (arena.h): two arrays of
 * one 32-bit word per rank, each padded to whole lines, then the bell's line
 * and the sleepers' line. */
static uint64_t p2p_stride(uint32_t nranks)
{
	return 2 * round_up((uint64_t)nranks * 4, SHMCOLL_LINE) + 2 * SHMCOLL_LINE;
}

/* The rings' share of nranks ranks with rings of ring bytes. */
static uint64_t p2p_bytes(uint32_t nranks, uint64_t ring)
{
	return round_up((uint64_t)nranks * p2p_stride(nranks), SHMCOLL_LINE) +
	       (uint64_t)nranks * nranks * ring;
}

/* The largest power of two <= v (v >= 1). */
static uint64_t pow2_floor(uint64_t v)
{
	uint64_t p = 1;

	while (p <= v / 2)
		p *= 2;
	return p;
}

uint64_t shmcoll__ring_default(uint32_t nranks)
{
	uint64_t ring = pow2_floor(SHMCOLL_RING_BUDGET / (nranks ? nranks : 1));

	if (ring > SHMCOLL_RING_MAX)
		ring = SHMCOLL_RING_MAX;
	return ring < SHMCOLL_RING_MIN ? SHMCOLL_RING_MIN : ring;
}

/* The least a layout for nranks with message ring shape can be: staging halves of
 * min_half, the smallest rings, no heap. */
static uint64_t min_total_with(uint32_t nranks, int shape)
{
	return fixed_bytes(nranks, shape) + (uint64_t)nranks * 2 * min_half(nranks) +
	       p2p_bytes(nranks, SHMCOLL_RING_MIN);
}

static uint64_t min_total(uint32_t nranks)
{
	return min_total_with(nranks, SHAPE_LEAST);
}

/* The largest message ring whose least layout takes at most half of room, else the
 * shallow one. */
static int shape_for(uint32_t nranks, uint64_t room)
{
	int shape = SHAPE_DEEP;

	while (shape < SHAPE_LEAST && min_total_with(nranks, shape) > room / 2)
		shape++;
	return shape;
}

uint64_t shmcoll__arena_min_bytes(uint32_t nranks)
{
	return min_total(nranks);
}

static void place(struct shmcoll_layout *out, uint32_t nranks, uint64_t half, uint64_t ring,
                  uint64_t heap, int shape)
{
	uint64_t fixed = fixed_bytes(nranks, shape), msgs = msg_shapes[shape].msgs;

	out->msg_ring = msgs;
	out->msg_max = msg_shapes[shape].max;
	out->ctrl_stride = ctrl_stride(msgs, out->msg_max);
	out->msg_big_off = msg_big_off(msgs);
	out->ctrl_off = PAGE;
	out->slot_half = half;
	out->slot_stride = 2 * half;
	out->slot_off = fixed;
	out->p2p_off = fixed + (uint64_t)nranks * out->slot_stride;
	out->p2p_stride = p2p_stride(nranks);
	out->ring_off = round_up(out->p2p_off + (uint64_t)nranks * out->p2p_stride, SHMCOLL_LINE);
	out->ring_bytes = ring;
	out->heap_off = out->p2p_off + p2p_bytes(nranks, ring);
	out->heap_stride = heap;
	out->total_bytes = out->heap_off + (uint64_t)nranks * heap;
}

int shmcoll__arena_layout(uint32_t nranks, size_t arena_bytes, struct shmcoll_layout *out,
                          char *err, size_t errlen)
{
	uint64_t avail, half, heap, ring, minimum, pairs;
	int shape;

	if (nranks < 1 || nranks > SHMCOLL_MAX_RANKS) {
		snprintf(err, errlen, "size %u out of range 1..%d", nranks, SHMCOLL_MAX_RANKS);
		return -EINVAL;
	}
	if (arena_bytes == 0) {
		place(out, nranks, SHMCOLL_DEFAULT_SLOT_HALF, shmcoll__ring_default(nranks),
		      SHMCOLL_DEFAULT_HEAP_BYTES, SHAPE_DEEP);
		return 0;
	}
	minimum = min_total(nranks);
	if (arena_bytes < minimum) {
		snprintf(err, errlen, "arena_bytes %zu too small for %u ranks (minimum %llu)",
		         arena_bytes, nranks, (unsigned long long)minimum);
		return -EINVAL;
	}
	/* The rings take at most an eighth of what is left (never more than by default),
	 * staging at most half of the rest, the heap the rest. */
	shape = shape_for(nranks, arena_bytes);
	pairs = (uint64_t)nranks * nranks;
	avail = arena_bytes - fixed_bytes(nranks, shape) - p2p_bytes(nranks, 0);
	ring = avail / 8 / pairs;
	ring = ring < SHMCOLL_RING_MIN ? SHMCOLL_RING_MIN : pow2_floor(ring);
	if (ring > shmcoll__ring_default(nranks))
		ring = shmcoll__ring_default(nranks);
	avail -= pairs * ring;
	half = avail / 2 / (2 * (uint64_t)nranks) / SHMCOLL_LINE * SHMCOLL_LINE;
	if (half > SHMCOLL_DEFAULT_SLOT_HALF)
		half = SHMCOLL_DEFAULT_SLOT_HALF;
	if (half < min_half(nranks))
		half = min_half(nranks);
	heap = (avail - (uint64_t)nranks * 2 * half) / nranks / SHMCOLL_LINE * SHMCOLL_LINE;
	place(out, nranks, half, ring, heap, shape);
	return 0;
}

int shmcoll__arena_fit(uint32_t nranks, uint64_t room, struct shmcoll_layout *out)
{
	uint64_t per, half = SHMCOLL_DEFAULT_SLOT_HALF, heap = SHMCOLL_DEFAULT_HEAP_BYTES;
	uint64_t ring = shmcoll__ring_default(nranks), rest;
	int shape;

	if (nranks < 1 || nranks > SHMCOLL_MAX_RANKS)
		return -EINVAL;
	place(out, nranks, half, ring, heap, SHAPE_DEEP);
	if (out->total_bytes <= room)
		return 0;
	if (room < min_total(nranks))
		return -ENOSPC;
	/* The heap goes first, then the rings halve, then the staging halves shrink; the deep
	 * message ring only where it takes at most half the room. */
	shape = shape_for(nranks, room);
	rest = room - fixed_bytes(nranks, shape);
	while (ring > SHMCOLL_RING_MIN &&
	       p2p_bytes(nranks, ring) + (uint64_t)nranks * 2 * half > rest)
		ring /= 2;
	rest -= p2p_bytes(nranks, ring);
	per = rest / nranks;
	if (per >= 2 * half) {
		heap = (per - 2 * half) / SHMCOLL_LINE * SHMCOLL_LINE;
	} else {
		heap = 0;
		half = per / 2 / SHMCOLL_LINE * SHMCOLL_LINE;
		if (half < min_half(nranks))
			half = min_half(nranks); /* room >= min_total: it fits */
	}
	place(out, nranks, half, ring, heap, shape);
	return 0;
}

int shmcoll__arena_validate(const struct shmcoll_arena_hdr *h, uint64_t file_bytes, uint32_t nranks,
                            char *err, size_t errlen)
{
	struct shmcoll_layout want;
	int shape;

	/* The caller's count, not the segment's, but the checks below divide
	 * by it: a count the layout could never have is refused first. */
	if (nranks < 1 || nranks > SHMCOLL_MAX_RANKS) {
		snprintf(err, errlen, "rank count %u out of range 1..%d", nranks,
		         SHMCOLL_MAX_RANKS);
		return -EPROTO;
	}
	if (h->magic != SHMCOLL_ARENA_MAGIC) {
		snprintf(err, errlen, "bad magic %016llx", (unsigned long long)h->magic);
		return -EPROTO;
	}
	if (h->version != SHMCOLL_ARENA_VERSION || h->hdr_bytes != sizeof(*h)) {
		snprintf(err, errlen, "layout version %u (header %u bytes), expected %u (%zu)",
		         h->version, h->hdr_bytes, SHMCOLL_ARENA_VERSION, sizeof(*h));
		return -EPROTO;
	}
	if (h->nranks != nranks) {
		snprintf(err, errlen, "arena made for %u ranks, this communicator has %u",
		         h->nranks, nranks);
		return -EPROTO;
	}
	if (h->total_bytes != file_bytes) {
		snprintf(err, errlen, "header says %llu bytes, the segment has %llu",
		         (unsigned long long)h->total_bytes, (unsigned long long)file_bytes);
		return -EPROTO;
	}
	if (h->creator.pid <= 0 || h->creator.pad || h->pad) {
		snprintf(err, errlen, "bad creator pid %d", (int)h->creator.pid);
		return -EPROTO;
	}
	/* Recompute the parts from the three sizes that define them: any other
	 * offset or length in the header is rejected rather than trusted. */
	if (h->slot_half < min_half(nranks) || h->slot_half > SHMCOLL_DEFAULT_SLOT_HALF ||
	    h->slot_half % SHMCOLL_LINE || h->heap_stride % SHMCOLL_LINE ||
	    h->heap_stride > file_bytes || h->ring_bytes < SHMCOLL_RING_MIN ||
	    h->ring_bytes > SHMCOLL_RING_MAX || (h->ring_bytes & (h->ring_bytes - 1)) ||
	    (shape = msg_shape_of(h->msg_ring, h->msg_max)) < 0) {
		snprintf(err, errlen, "slot, ring, message ring or heap size out of range");
		return -EPROTO;
	}
	/* Every rank's heap inside the file, checked without the overflow that
	 * heap_off + nranks * heap_stride could wrap around to. */
	place(&want, nranks, h->slot_half, h->ring_bytes, 0, shape);
	if (file_bytes < want.heap_off || h->heap_stride > (file_bytes - want.heap_off) / nranks) {
		snprintf(err, errlen, "the heaps do not fit in the segment");
		return -EPROTO;
	}
	place(&want, nranks, h->slot_half, h->ring_bytes, h->heap_stride, shape);
	if (h->ctrl_off != want.ctrl_off || h->slot_off != want.slot_off ||
	    h->slot_stride != want.slot_stride || h->heap_off != want.heap_off ||
	    h->p2p_off != want.p2p_off || h->p2p_stride != want.p2p_stride ||
	    h->ring_off != want.ring_off || h->total_bytes != want.total_bytes) {
		snprintf(err, errlen, "inconsistent offsets in the header");
		return -EPROTO;
	}
	return 0;
}

static void layout_from(struct shmcoll_layout *l, const struct shmcoll_arena_hdr *h)
{
	l->total_bytes = h->total_bytes;
	l->ctrl_off = h->ctrl_off;
	l->slot_off = h->slot_off;
	l->slot_stride = h->slot_stride;
	l->slot_half = h->slot_half;
	l->heap_off = h->heap_off;
	l->heap_stride = h->heap_stride;
	l->p2p_off = h->p2p_off;
	l->p2p_stride = h->p2p_stride;
	l->ring_off = h->ring_off;
	l->ring_bytes = h->ring_bytes;
	l->msg_ring = h->msg_ring;
	l->msg_max = h->msg_max;
	l->ctrl_stride = ctrl_stride(h->msg_ring, h->msg_max);
	l->msg_big_off = msg_big_off(h->msg_ring);
}

/* ---- room: the shared-memory filesystem and the memory cgroup ---- */

/* The first whitespace-separated number of a small file: 1 with *v set, 0
 * for "max" (no limit), -1 when the file is missing or holds neither. */
static int read_limit(const char *path, uint64_t *v)
{
	char buf[64], *end;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (!strncmp(buf, "max", 3))
		return 0;
	errno = 0;
	*v = strtoull(buf, &end, 10);
	return errno || end == buf ? -1 : 1;
}

/* Sum of the values of keys k1 and k2 in a "key value" file (memory.stat). */
static uint64_t stat_keys(const char *path, const char *k1, const char *k2)
{
	char key[64];
	unsigned long long v;
	uint64_t sum = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return 0;
	while (fscanf(f, "%63s %llu", key, &v) == 2)
		if (!strcmp(key, k1) || !strcmp(key, k2))
			sum += v;
	fclose(f);
	return sum;
}

/* One level of the hierarchy: what its limit leaves, if it has one. */
static void cg_level(const char *dir, int v2, uint64_t *room, char *where, size_t wherelen)
{
	char path[CG_PATH + 32];
	uint64_t limit, used = 0, cache, left;

	snprintf(path, sizeof(path), "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
	if (read_limit(path, &limit) != 1 || (!v2 && limit >= CG1_UNLIMITED))
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
	if (read_limit(path, &used) != 1)
		used = 0;
	snprintf(path, sizeof(path), "%s/memory.stat", dir);
	cache = v2 ? stat_keys(path, "active_file", "inactive_file")
	           : stat_keys(path, "total_active_file", "total_inactive_file");
	used -= cache < used ? cache : used;
	left = limit > used ? limit - used : 0;
	if (left < *room) {
		*room = left;
		if (where)
			snprintf(where, wherelen, "%s", dir);
	}
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

static int has_option(const char *opts, const char *want)
{
	size_t n = strlen(want);
	const char *p;

	for (p = opts; p; p = strchr(p, ',')) {
		if (*p == ',')
			p++;
		if (!strncmp(p, want, n) && (p[n] == ',' || p[n] == '\0'))
			return 1;
	}
	return 0;
}

/* Whether the cgroup path cg lies under root (a path within the hierarchy). */
static int under(const char *cg, const char *root)
{
	size_t n = strcmp(root, "/") ? strlen(root) : 0;

	return !strncmp(cg, root, n) && (cg[n] == '/' || !cg[n]);
}

/* The mount of the cgroup v2 hierarchy (v2) or of the v1 hierarchy with the
 * memory controller that shows cgroup cg (else the first such mount): its
 * root within the hierarchy and its mount point. */
static int find_mount(const char *mountinfo_file, int v2, const char *cg, char *root, char *mnt,
                      size_t len)
{
	char *line = NULL, *f[64], *save, *tok;
	size_t cap = 0;
	int n, sep, found = 0;
	FILE *mi = fopen(mountinfo_file, "re");

	if (!mi)
		return 0;
	while (found < 2 && getline(&line, &cap, mi) > 0) {
		n = 0;
		for (tok = strtok_r(line, " \n", &save); tok && n < 64;
		     tok = strtok_r(NULL, " \n", &save))
			f[n++] = tok;
		/* id parent dev root mountpoint opts [optional...] - fstype source superopts */
		for (sep = 6; sep < n && strcmp(f[sep], "-"); sep++)
			;
		if (sep + 3 >= n)
			continue;
		if (v2 ? strcmp(f[sep + 1], "cgroup2") != 0
		       : strcmp(f[sep + 1], "cgroup") != 0 || !has_option(f[sep + 3], "memory"))
			continue;
		unescape(f[3]);
		unescape(f[4]);
		if (found && !under(cg, f[3]))
			continue;
		snprintf(root, len, "%s", f[3]);
		snprintf(mnt, len, "%s", f[4]);
		found = under(cg, f[3]) ? 2 : 1;
	}
	free(line);
	fclose(mi);
	return found;
}

/* This process's cgroup path in the hierarchy: the "0::" line (v2) or the
 * line whose controllers include memory (v1). */
static int find_cgroup(const char *cgroup_file, int v2, char *path, size_t len)
{
	char *line = NULL, *ctl, *p;
	size_t cap = 0;
	ssize_t n;
	int found = 0;
	FILE *f = fopen(cgroup_file, "re");

	if (!f)
		return 0;
	while (!found && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			line[n - 1] = '\0';
		ctl = strchr(line, ':');
		p = ctl ? strchr(ctl + 1, ':') : NULL;
		if (!p)
			continue;
		*p++ = '\0';
		*ctl++ = '\0';
		if (v2 ? strcmp(line, "0") || *ctl : !has_option(ctl, "memory"))
			continue;
		snprintf(path, len, "%s", p);
		found = 1;
	}
	free(line);
	fclose(f);
	return found;
}

static void cg_walk(const char *cgroup_file, const char *mountinfo_file, int v2, uint64_t *room,
                    char *where, size_t wherelen)
{
	char root[CG_PATH], mnt[CG_PATH], cg[CG_PATH], dir[2 * CG_PATH];
	const char *rel;
	size_t mntlen;
	char *slash;

	if (!find_cgroup(cgroup_file, v2, cg, sizeof(cg)) ||
	    !find_mount(mountinfo_file, v2, cg, root, mnt, sizeof(root)))
		return;
	/* The mount shows the hierarchy from root down: a cgroup outside it
	 * (another cgroup namespace's view) is seen from the mount's top. */
	rel = under(cg, root) ? cg + (strcmp(root, "/") ? strlen(root) : 0) : "";
	mntlen = strlen(mnt);
	while (mntlen > 1 && mnt[mntlen - 1] == '/')
		mnt[--mntlen] = '\0';
	snprintf(dir, sizeof(dir), "%s%s", mnt, rel);
	for (;;) {
		size_t n = strlen(dir);

		while (n > mntlen && dir[n - 1] == '/')
			dir[--n] = '\0';
		cg_level(dir, v2, room, where, wherelen);
		if (n <= mntlen)
			break;
		slash = strrchr(dir + mntlen, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
}

void shmcoll__memcg_room(const char *cgroup_file, const char *mountinfo_file, uint64_t *room,
                         char *where, size_t wherelen)
{
	*room = UINT64_MAX;
	if (where && wherelen)
		where[0] = '\0';
	cg_walk(cgroup_file, mountinfo_file, 1, room, where, wherelen);
	cg_walk(cgroup_file, mountinfo_file, 0, room, where, wherelen);
}

uint64_t shmcoll__arena_room(char *why, size_t whylen)
{
	char where[2 * CG_PATH], fsmsg[96] = "", cgmsg[2 * CG_PATH + 64] = "";
	uint64_t fs = UINT64_MAX, cg;
	struct statvfs sv;

	/* A tmpfs mounted with size=0 has no limit and reports no blocks. */
	if (statvfs(SHM_DIR, &sv) == 0 && sv.f_blocks) {
		fs = (uint64_t)sv.f_bavail * sv.f_frsize;
		snprintf(fsmsg, sizeof(fsmsg), SHM_DIR " has %llu bytes free",
		         (unsigned long long)fs);
	}
	shmcoll__memcg_room("/proc/self/cgroup", "/proc/self/mountinfo", &cg, where, sizeof(where));
	if (cg != UINT64_MAX)
		snprintf(cgmsg, sizeof(cgmsg), "the memory cgroup %s has %llu bytes left", where,
		         (unsigned long long)cg);
	snprintf(why, whylen, "%s%s%s", fsmsg, fsmsg[0] && cgmsg[0] ? ", " : "", cgmsg);
	return fs < cg ? fs : cg;
}

/* Chooses the layout of a new arena from the room there is: an explicit size
 * must fit as it is, the default shrinks to fit with a margin. */
static int preflight(struct shmcoll_layout *lay, uint32_t nranks, size_t arena_bytes,
                     const char *name, char *err, size_t errlen)
{
	char why[2 * CG_PATH + 200];
	uint64_t room = shmcoll__arena_room(why, sizeof(why)), usable, want = lay->total_bytes;

	if (room == UINT64_MAX)
		return 0;
	if (arena_bytes) {
		if (want <= room)
			return 0;
		snprintf(err, errlen,
		         "no room for the %llu-byte arena %s: %llu bytes available (%s)",
		         (unsigned long long)want, name, (unsigned long long)room, why);
		return -ENOSPC;
	}
	usable = room - room / ROOM_MARGIN_DIV;
	if (want <= usable || shmcoll__arena_fit(nranks, usable, lay) == 0)
		return 0;
	/* The margin is a preference: the least layout may still take it. */
	if (min_total(nranks) <= room) {
		place(lay, nranks, min_half(nranks), SHMCOLL_RING_MIN, 0, SHAPE_LEAST);
		return 0;
	}
	snprintf(err, errlen,
	         "no room for the arena %s of %u ranks: it needs %llu bytes (%llu by default), "
	         "%llu available (%s)",
	         name, nranks, (unsigned long long)min_total(nranks), (unsigned long long)want,
	         (unsigned long long)room, why);
	return -ENOSPC;
}

/* ---- one mapping per segment per process ---- */

/* Threads of one process that are ranks of one job share the first mapping
 * of the segment made in the process: ThreadSanitizer then sees every access
 * to a shared word at one address, and the address space is spent once. The
 * registry is process-wide by nature, hence global; its lock is held only
 * for list operations, never across a system call that can block. */
struct mapping {
	struct mapping *next;
	char name[SHMCOLL_NAME_MAX];
	dev_t dev;
	ino_t ino;
	struct shmcoll_proc_id creator;
	uint8_t *base;
	size_t bytes;
	unsigned long refs;
	int inherited; /* registered before a fork(): the child never reuses it */
};

static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t maps_once = PTHREAD_ONCE_INIT;
static struct mapping *maps;

/* fork() copies the registry with its lock held by the forking thread, so
 * the copy is consistent; the child keeps the entries (its copies of the
 * parent's communicators still release them) but never reuses them. */
static void maps_prepare(void)
{
	pthread_mutex_lock(&maps_lock);
}

static void maps_parent(void)
{
	pthread_mutex_unlock(&maps_lock);
}

static void maps_child(void)
{
	struct mapping *m;

	for (m = maps; m; m = m->next)
		m->inherited = 1;
	pthread_mutex_unlock(&maps_lock);
}

static void maps_init(void)
{
	pthread_atfork(maps_prepare, maps_parent, maps_child);
}

static struct mapping *maps_find(const char *name, const struct stat *st,
                                 const struct shmcoll_proc_id *creator, size_t bytes)
{
	struct mapping *m;

	for (m = maps; m; m = m->next)
		if (!m->inherited && m->dev == st->st_dev && m->ino == st->st_ino &&
		    m->bytes == bytes && !strcmp(m->name, name) && m->creator.pid == creator->pid &&
		    m->creator.start == creator->start && m->creator.pidns == creator->pidns)
			return m;
	return NULL;
}

/* The registered mapping of this segment with one more reference, or NULL. */
static uint8_t *maps_get(const char *name, const struct stat *st,
                         const struct shmcoll_proc_id *creator, size_t bytes)
{
	struct mapping *m;
	uint8_t *base = NULL;

	pthread_once(&maps_once, maps_init);
	pthread_mutex_lock(&maps_lock);
	m = maps_find(name, st, creator, bytes);
	if (m) {
		m->refs++;
		base = m->base;
	}
	pthread_mutex_unlock(&maps_lock);
	return base;
}

/* Registers base, the caller's new mapping. If another thread registered
 * the segment meanwhile, returns that mapping (referenced) and the caller
 * unmaps its own. Without memory for an entry, base stays unregistered:
 * correct, only not shared. */
static uint8_t *maps_put(const char *name, const struct stat *st,
                         const struct shmcoll_proc_id *creator, uint8_t *base, size_t bytes)
{
	struct mapping *m;

	pthread_once(&maps_once, maps_init);
	pthread_mutex_lock(&maps_lock);
	m = maps_find(name, st, creator, bytes);
	if (m) {
		m->refs++;
		base = m->base;
	} else {
		m = calloc(1, sizeof(*m));
		if (m) {
			snprintf(m->name, sizeof(m->name), "%s", name);
			m->dev = st->st_dev;
			m->ino = st->st_ino;
			m->creator = *creator;
			m->base = base;
			m->bytes = bytes;
			m->refs = 1;
			m->next = maps;
			maps = m;
		}
	}
	pthread_mutex_unlock(&maps_lock);
	return base;
}

/* Drops one reference to the mapping at base; unmaps it with the last. */
static void maps_drop(uint8_t *base, size_t bytes)
{
	struct mapping **pp, *m = NULL, **own = NULL, **any = NULL;

	pthread_once(&maps_once, maps_init);
	pthread_mutex_lock(&maps_lock);
	for (pp = &maps; *pp; pp = &(*pp)->next) {
		if ((*pp)->base != base || (*pp)->bytes != bytes)
			continue;
		if (!(*pp)->inherited && !own)
			own = pp;
		if (!any)
			any = pp;
	}
	pp = own ? own : any;
	if (pp) {
		m = *pp;
		if (--m->refs > 0) {
			pthread_mutex_unlock(&maps_lock);
			return;
		}
		*pp = m->next;
	}
	pthread_mutex_unlock(&maps_lock);
	free(m);
	munmap(base, bytes);
}

/* ---- reading a segment without mapping it ---- */

/* Reads the header of the segment open at fd into h. 1 when its creator has
 * stored ready, 0 when not (yet) or the file is shorter than a header,
 * -errno. pread, not a mapping: a file that shrinks gives a short read,
 * never SIGBUS. */
static int read_header(int fd, struct shmcoll_arena_hdr *h)
{
	ssize_t n = pread(fd, h, sizeof(*h), 0);

	if (n < 0)
		return -errno;
	if ((size_t)n < sizeof(*h) || load_relaxed(&h->ready) != SHMCOLL_ARENA_READY)
		return 0;
	/* Pairs with the release store of ready in arena_create(): the second
	 * read of the fields comes after the read that saw ready. */
	fence_acquire();
	n = pread(fd, h, sizeof(*h), 0);
	if (n < 0)
		return -errno;
	return (size_t)n == sizeof(*h);
}

/* Refuses what no rank of ours created: not a regular file, another owner,
 * or any mode but 0600. */
static int check_file(int fd, const char *name, struct stat *st, char *err, size_t errlen)
{
	if (fstat(fd, st) < 0) {
		int rc = -errno;

		snprintf(err, errlen, "cannot stat %s: %s", name, strerror(-rc));
		return rc;
	}
	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s is not a regular file (mode %o): refusing it", name,
		         (unsigned)st->st_mode);
		return -EPROTO;
	}
	if (st->st_uid != geteuid() || (st->st_mode & 07777) != 0600) {
		snprintf(err, errlen, "%s is not ours (owner %u, mode %o): refusing it", name,
		         (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777));
		return -EPROTO;
	}
	return 0;
}

/* ---- the stale sweep ---- */

static void notef(void (*note)(void *, const char *), void *arg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void notef(void (*note)(void *, const char *), void *arg, const char *fmt, ...)
{
	char line[SHMCOLL_NAME_MAX + 160];
	va_list ap;

	if (!note)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	note(arg, line);
}

/* Removes the entry name of dir if it is still the file open at fd. It is
 * moved to a private name first (a name no job can have: '~' is not in the
 * sanitised alphabet) and checked there, so a segment created under the old
 * name after we judged it is never removed; one moved by mistake goes back.
 * 1: removed, 0: not (gone already or replaced), -errno. */
static int remove_if_same(int dir, const char *name, const struct stat *st)
{
	static _Atomic unsigned long counter;
	char tmp[SHMCOLL_NAME_MAX + 64], prefix[SHMCOLL_NAME_MAX];
	struct stat now;
	int rc;

	if (shmcoll__arena_prefix(prefix, sizeof(prefix)) < 0)
		return -EINVAL;
	snprintf(tmp, sizeof(tmp), "%s~sweep.%ld.%lu", prefix, (long)getpid(),
	         fetch_add_seqcst(&counter, 1));
	if (renameat2(dir, name, dir, tmp, RENAME_NOREPLACE) < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno != EINVAL && errno != ENOSYS)
			return -errno;
		/* No renameat2 here: check and remove in place, a narrow race. */
		if (fstatat(dir, name, &now, AT_SYMLINK_NOFOLLOW) < 0)
			return errno == ENOENT ? 0 : -errno;
		if (now.st_dev != st->st_dev || now.st_ino != st->st_ino)
			return 0;
		return unlinkat(dir, name, 0) < 0 ? (errno == ENOENT ? 0 : -errno) : 1;
	}
	if (fstatat(dir, tmp, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st->st_dev &&
	    now.st_ino == st->st_ino)
		return unlinkat(dir, tmp, 0) < 0 ? -errno : 1;
	rc = renameat2(dir, tmp, dir, name, RENAME_NOREPLACE);
	return rc < 0 ? -errno : 0;
}

/* Judges one entry of the prefix; 1 if it was removed. */
static int sweep_one(int dir, const char *name, void (*note)(void *, const char *), void *arg)
{
	struct shmcoll_arena_hdr h;
	struct timespec t;
	struct stat st;
	const char *why;
	char whybuf[96];
	int fd, rc, ready;

	fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			notef(note, arg, "kept %s: cannot open it: %s", name, strerror(errno));
		return 0;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		notef(note, arg, "kept %s: not a regular file of ours", name);
		close(fd);
		return 0;
	}
	memset(&h, 0, sizeof(h));
	ready = read_header(fd, &h);
	close(fd);
	/* The creator writes the whole header (but ready) before it sizes the
	 * segment, so a header with our magic names its creator even when the
	 * creator died before ready. */
	if (ready >= 0 && (size_t)st.st_size >= sizeof(h) && h.magic == SHMCOLL_ARENA_MAGIC) {
		if (h.version != SHMCOLL_ARENA_VERSION || h.hdr_bytes != sizeof(h)) {
			notef(note, arg, "kept %s: layout version %u, not %u", name, h.version,
			      SHMCOLL_ARENA_VERSION);
			return 0;
		}
		switch (shmcoll__proc_state(&h.creator)) {
		case SHMCOLL_PROC_ALIVE:
			notef(note, arg, "kept %s: its creator (pid %d) is alive", name,
			      (int)h.creator.pid);
			return 0;
		case SHMCOLL_PROC_UNKNOWN:
			notef(note, arg,
			      "kept %s: cannot tell whether its creator (pid %d) is "
			      "alive",
			      name, (int)h.creator.pid);
			return 0;
		case SHMCOLL_PROC_DEAD:
			break;
		}
		snprintf(whybuf, sizeof(whybuf), "its creator (pid %d) is gone",
		         (int)h.creator.pid);
		why = whybuf;
	} else {
		clock_gettime(CLOCK_REALTIME, &t);
		/* mtime, not ctime: the creator's ftruncate set both, and only
		 * mtime can be set back by the tests that age a segment. */
		if (t.tv_sec - st.st_mtim.tv_sec <= STALE_AGE_S) {
			notef(note, arg, "kept %s: no header yet, created %lld s ago", name,
			      (long long)(t.tv_sec - st.st_mtim.tv_sec));
			return 0;
		}
		snprintf(whybuf, sizeof(whybuf), "no header, untouched for %lld s",
		         (long long)(t.tv_sec - st.st_mtim.tv_sec));
		why = whybuf;
	}
	rc = remove_if_same(dir, name, &st);
	if (rc == 1)
		notef(note, arg, "removed %s: %s", name, why);
	else if (rc < 0)
		notef(note, arg, "kept %s: cannot remove it: %s", name, strerror(-rc));
	return rc == 1;
}

int shmcoll__arena_sweep(void (*note)(void *arg, const char *line), void *arg)
{
	char prefix[SHMCOLL_NAME_MAX];
	struct dirent *e;
	int dir, removed = 0;
	DIR *d;

	if (shmcoll__arena_prefix(prefix, sizeof(prefix)) < 0)
		return -EINVAL;
	dir = open(SHM_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -errno;
	d = fdopendir(dir);
	if (!d) {
		int rc = -errno;

		close(dir);
		return rc;
	}
	/* Entries renamed or removed meanwhile are fine: readdir may or may
	 * not return them, and each is judged on what is there when opened. */
	while ((e = readdir(d)) != NULL)
		if (!strncmp(e->d_name, prefix, strlen(prefix)))
			removed += sweep_one(dir, e->d_name, note, arg);
	closedir(d);
	return removed;
}

/* ---- create, attach, join, release ---- */

int shmcoll__arena_create(struct shmcoll_arena *a, const char *job, uint32_t nranks,
                          size_t arena_bytes, char *err, size_t errlen)
{
	struct shmcoll_layout lay;
	struct shmcoll_arena_hdr h0;
	struct stat st;
	uint8_t *base;
	ssize_t n;
	int fd, rc;

	memset(a, 0, sizeof(*a));
	rc = shmcoll__arena_layout(nranks, arena_bytes, &lay, err, errlen);
	if (rc < 0)
		return rc;
	rc = shmcoll__arena_name(a->name, sizeof(a->name), job);
	if (rc < 0) {
		snprintf(err, errlen, "job name unusable");
		return rc;
	}
	/* Best effort: a dead job's segment frees its space, and its name if
	 * this job reuses it. */
	shmcoll__arena_sweep(NULL, NULL);
	rc = preflight(&lay, nranks, arena_bytes, a->name, err, errlen);
	if (rc < 0)
		return rc;

	fd = shm_open(a->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create %s: %s%s", a->name, strerror(errno),
		         errno == EEXIST ? " (another job with this name is running, or a "
		                           "stale segment: remove it from /dev/shm)"
		                         : "");
		return rc;
	}
	/* 0600 whatever the umask: attachers refuse any other mode. */
	if (fchmod(fd, 0600) < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot set up %s: %s", a->name, strerror(errno));
		goto err_unlink;
	}

	/* The whole header but ready goes in first, before the segment is
	 * sized: from here on a sweep can tell whether the creator lives. */
	memset(&h0, 0, sizeof(h0));
	h0.magic = SHMCOLL_ARENA_MAGIC;
	h0.version = SHMCOLL_ARENA_VERSION;
	h0.nranks = nranks;
	h0.total_bytes = lay.total_bytes;
	h0.ctrl_off = lay.ctrl_off;
	h0.slot_off = lay.slot_off;
	h0.slot_stride = lay.slot_stride;
	h0.slot_half = lay.slot_half;
	h0.heap_off = lay.heap_off;
	h0.heap_stride = lay.heap_stride;
	h0.p2p_off = lay.p2p_off;
	h0.p2p_stride = lay.p2p_stride;
	h0.ring_off = lay.ring_off;
	h0.ring_bytes = lay.ring_bytes;
	h0.msg_ring = (uint32_t)lay.msg_ring;
	h0.msg_max = (uint32_t)lay.msg_max;
	shmcoll__proc_self(&h0.creator);
	h0.hdr_bytes = sizeof(h0);
	n = pwrite(fd, &h0, sizeof(h0), 0);
	if (n != (ssize_t)sizeof(h0)) {
		rc = n < 0 ? -errno : -ENOSPC;
		snprintf(err, errlen, "no room for the header of %s: %s", a->name, strerror(-rc));
		if (rc == -ENOMEM)
			rc = -ENOSPC;
		goto err_unlink;
	}
	if (ftruncate(fd, (off_t)lay.total_bytes) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot size %s to %llu bytes: %s", a->name,
		         (unsigned long long)lay.total_bytes, strerror(errno));
		goto err_unlink;
	}
	/* Reserve every page now: a full /dev/shm (or a memory cgroup that
	 * cannot charge them: ENOMEM) must fail here with ENOSPC, not later
	 * with SIGBUS on first touch. The preflight above makes this rare; it
	 * is what settles a race for the same space. */
	rc = posix_fallocate(fd, 0, (off_t)lay.total_bytes);
	if (rc != 0) {
		snprintf(err, errlen, "no room for the %llu-byte arena %s: %s",
		         (unsigned long long)lay.total_bytes, a->name, strerror(rc));
		rc = rc == ENOSPC || rc == EFBIG || rc == ENOMEM ? -ENOSPC : -rc;
		goto err_unlink;
	}
	base = mmap(NULL, lay.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen, "cannot map %s: %s", a->name, strerror(errno));
		goto err_unlink;
	}
	close(fd);

	/* Pairs with the acquire fence in read_header(). */
	store_release(&((struct shmcoll_arena_hdr *)base)->ready, SHMCOLL_ARENA_READY);
	/* A new file: nobody else can have registered it, so this is base. */
	a->base = maps_put(a->name, &st, &h0.creator, base, lay.total_bytes);
	a->hdr = (struct shmcoll_arena_hdr *)a->base;
	a->bytes = lay.total_bytes;
	a->lay = lay;
	a->nranks = nranks;
	return 0;

err_unlink:
	shm_unlink(a->name);
	close(fd);
	return rc;
}

static void nap(int64_t *ns)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = *ns};

	nanosleep(&ts, NULL);
	if (*ns < 10000000)
		*ns *= 2;
}

int shmcoll__arena_attach(struct shmcoll_arena *a, const char *job, uint32_t nranks,
                          int64_t timeout_ns, char *err, size_t errlen)
{
	struct shmcoll_arena_hdr copy;
	int64_t start = shmcoll__now_ns(), delay = 100000;
	const char *waiting = "for rank 0 to create it";
	struct stat st, again;
	uint8_t *base, *shared;
	int fd, rc;

	memset(a, 0, sizeof(*a));
	rc = shmcoll__arena_name(a->name, sizeof(a->name), job);
	if (rc < 0) {
		snprintf(err, errlen, "job name unusable");
		return rc;
	}
	for (;;) {
		if (timeout_ns >= 0 && shmcoll__now_ns() - start > timeout_ns) {
			snprintf(err, errlen, "timed out waiting for rank 0 to create %s (%s)",
			         a->name, waiting);
			return -ETIMEDOUT;
		}
		fd = shm_open(a->name, O_RDWR | O_CLOEXEC, 0);
		if (fd < 0) {
			if (errno == ELOOP || errno == EISDIR || errno == EINVAL) {
				/* glibc opens with O_NOFOLLOW: a symlink is ELOOP;
				 * it reports a directory as EINVAL (our names are
				 * valid). */
				snprintf(err, errlen, "%s is not a regular file: refusing it",
				         a->name);
				return -EPROTO;
			}
			if (errno != ENOENT) {
				rc = -errno;
				snprintf(err, errlen, "cannot open %s: %s", a->name,
				         strerror(errno));
				return rc;
			}
			nap(&delay);
			continue;
		}
		rc = check_file(fd, a->name, &st, err, errlen);
		if (rc < 0) {
			close(fd);
			return rc;
		}
		rc = read_header(fd, &copy);
		if (rc < 0) {
			close(fd);
			snprintf(err, errlen, "cannot read %s: %s", a->name, strerror(-rc));
			return rc;
		}
		if (rc == 0) {
			close(fd); /* the creator has not finished it yet */
			waiting = "it exists but is not ready";
			nap(&delay);
			continue;
		}
		/* The size read before the header may predate the creator's
		 * ftruncate; a ready header means it is final now. */
		if (fstat(fd, &st) < 0) {
			rc = -errno;
			close(fd);
			snprintf(err, errlen, "cannot stat %s: %s", a->name, strerror(-rc));
			return rc;
		}
		if (shmcoll__proc_state(&copy.creator) == SHMCOLL_PROC_DEAD) {
			/* A dead job's: rank 0 sweeps it and makes ours. */
			close(fd);
			waiting = "the segment there is a dead job's";
			nap(&delay);
			continue;
		}
		break;
	}
	rc = shmcoll__arena_validate(&copy, (uint64_t)st.st_size, nranks, err, errlen);
	if (rc < 0) {
		close(fd);
		return rc;
	}

	shared = maps_get(a->name, &st, &copy.creator, (size_t)copy.total_bytes);
	if (shared) {
		close(fd);
		base = shared;
	} else {
		base =
		    mmap(NULL, (size_t)copy.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (base == MAP_FAILED) {
			rc = -errno;
			close(fd);
			snprintf(err, errlen, "cannot map %s: %s", a->name, strerror(-rc));
			return rc;
		}
		/* Shrunk between the check and the mapping: its tail would
		 * fault with SIGBUS. */
		rc = fstat(fd, &again);
		close(fd);
		if (rc < 0 || (uint64_t)again.st_size != copy.total_bytes) {
			munmap(base, (size_t)copy.total_bytes);
			snprintf(err, errlen, "%s changed size while it was being attached",
			         a->name);
			return -EPROTO;
		}
		shared = maps_put(a->name, &st, &copy.creator, base, (size_t)copy.total_bytes);
		if (shared != base) {
			munmap(base, (size_t)copy.total_bytes);
			base = shared;
		}
	}
	a->base = base;
	a->bytes = (size_t)copy.total_bytes;
	a->hdr = (struct shmcoll_arena_hdr *)base;
	layout_from(&a->lay, &copy);
	a->nranks = nranks;
	return 0;
}

void shmcoll__arena_join(struct shmcoll_arena *a, uint32_t rank)
{
	struct shmcoll_arena_hdr *h = a->hdr;
	cpu_set_t set;
	uint32_t n;
	int cpu, w;

	/* Published by the seq_cst fetch-add of attached below. */
	shmcoll__proc_self(&shmcoll__ctrl(a, rank)->proc);
	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		for (cpu = 0; cpu < SHMCOLL_CPU_WORDS * 64 && cpu < CPU_SETSIZE; cpu++)
			if (CPU_ISSET(cpu, &set)) {
				w = cpu / 64;
				fetch_or_relaxed(&h->cpus[w], 1ull << (cpu % 64));
			}
	}
	/* seq_cst: the affinity bits above are visible to whoever sees the
	 * final count (they read cpus after waiting for attached). */
	n = fetch_add_seqcst(&h->attached, 1) + 1;
	if (n == a->nranks) {
		shm_unlink(a->name);
		shmcoll__wake_all(&h->attached);
	}
}

void shmcoll__arena_release(struct shmcoll_arena *a, int unlink_name)
{
	if (unlink_name && a->name[0])
		shm_unlink(a->name);
	if (a->base)
		maps_drop(a->base, a->bytes);
	a->base = NULL;
	a->hdr = NULL;
}

/* ---- heap segments ---- */

static int segment_name(char *buf, size_t len, const struct shmcoll_arena *a, uint32_t seq)
{
	int n = snprintf(buf, len, "%s.h%u", a->name, seq);

	return n < 0 || (size_t)n >= len ? -EINVAL : 0;
}

static int segment_total(uint32_t nranks, uint64_t part, uint64_t *total)
{
	if (!part || part % PAGE || part > (UINT64_MAX - PAGE) / nranks ||
	    PAGE + part * nranks > SIZE_MAX)
		return -EINVAL;
	*total = PAGE + part * nranks;
	return 0;
}

uint8_t *shmcoll__segment_part(const struct shmcoll_segment *s, uint32_t rank)
{
	return s->base + PAGE + (uint64_t)rank * s->part;
}

int shmcoll__segment_create(struct shmcoll_segment *s, const struct shmcoll_arena *a, uint32_t seq,
                            uint64_t part, char *err, size_t errlen)
{
	char why[2 * CG_PATH + 200];
	struct shmcoll_arena_hdr h0;
	uint64_t total, room;
	struct stat st;
	uint8_t *base;
	ssize_t n;
	int fd, rc;

	memset(s, 0, sizeof(*s));
	if (segment_name(s->name, sizeof(s->name), a, seq) < 0 ||
	    segment_total(a->nranks, part, &total) < 0) {
		snprintf(err, errlen, "a heap segment of %llu bytes per rank is too large",
		         (unsigned long long)part);
		return -ENOMEM;
	}
	room = shmcoll__arena_room(why, sizeof(why));
	if (room != UINT64_MAX && total > room) {
		snprintf(err, errlen,
		         "no room for a %llu-byte heap segment (%llu per rank): %llu "
		         "bytes available (%s)",
		         (unsigned long long)total, (unsigned long long)part,
		         (unsigned long long)room, why);
		return -ENOSPC;
	}
	fd = shm_open(s->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create %s: %s", s->name, strerror(errno));
		return rc;
	}
	if (fchmod(fd, 0600) < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot set up %s: %s", s->name, strerror(errno));
		goto err_unlink;
	}
	/* An arena's header (so the sweep sees its creator), but slot_half 0: it is no arena,
	 * and arena_validate refuses it as one. */
	memset(&h0, 0, sizeof(h0));
	h0.magic = SHMCOLL_ARENA_MAGIC;
	h0.version = SHMCOLL_ARENA_VERSION;
	h0.nranks = a->nranks;
	h0.total_bytes = total;
	h0.heap_off = PAGE;
	h0.heap_stride = part;
	shmcoll__proc_self(&h0.creator);
	h0.hdr_bytes = sizeof(h0);
	n = pwrite(fd, &h0, sizeof(h0), 0);
	if (n != (ssize_t)sizeof(h0) || ftruncate(fd, (off_t)total) < 0) {
		rc = n < 0 ? -errno : -ENOSPC;
		snprintf(err, errlen, "cannot size %s to %llu bytes: %s", s->name,
		         (unsigned long long)total, strerror(errno));
		goto err_unlink;
	}
	/* As for the arena: a full /dev/shm or memory cgroup fails here, not with SIGBUS. */
	rc = posix_fallocate(fd, 0, (off_t)total);
	if (rc != 0) {
		snprintf(err, errlen, "no room for the %llu-byte heap segment %s: %s",
		         (unsigned long long)total, s->name, strerror(rc));
		rc = rc == ENOSPC || rc == EFBIG || rc == ENOMEM ? -ENOSPC : -rc;
		goto err_unlink;
	}
	base = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen, "cannot map %s: %s", s->name, strerror(errno));
		goto err_unlink;
	}
	close(fd);
	/* Pairs with the acquire fence in read_header(). */
	store_release(&((struct shmcoll_arena_hdr *)base)->ready, SHMCOLL_ARENA_READY);
	s->base = maps_put(s->name, &st, &h0.creator, base, (size_t)total);
	s->bytes = (size_t)total;
	s->part = part;
	return 0;

err_unlink:
	shm_unlink(s->name);
	close(fd);
	return rc;
}

int shmcoll__segment_attach(struct shmcoll_segment *s, const struct shmcoll_arena *a, uint32_t seq,
                            uint64_t part, const struct shmcoll_proc_id *creator, char *err,
                            size_t errlen)
{
	struct shmcoll_arena_hdr h;
	struct stat st, again;
	uint64_t total;
	uint8_t *base, *shared;
	int fd, rc;

	memset(s, 0, sizeof(*s));
	if (segment_name(s->name, sizeof(s->name), a, seq) < 0 ||
	    segment_total(a->nranks, part, &total) < 0) {
		snprintf(err, errlen, "a heap segment of %llu bytes per rank is too large",
		         (unsigned long long)part);
		return -ENOMEM;
	}
	fd = shm_open(s->name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open the heap segment %s: %s", s->name,
		         strerror(errno));
		return errno == ELOOP || errno == EISDIR ? -EPROTO : rc;
	}
	rc = check_file(fd, s->name, &st, err, errlen);
	if (rc == 0 && read_header(fd, &h) != 1)
		rc = -EPROTO;
	/* Only what the caller expects: the segment rank 0 (creator) just made for this
	 * layout, nothing else found under the name. */
	if (rc == 0 && (h.magic != SHMCOLL_ARENA_MAGIC || h.version != SHMCOLL_ARENA_VERSION ||
	                h.hdr_bytes != sizeof(h) || h.nranks != a->nranks || h.slot_half != 0 ||
	                h.heap_off != PAGE || h.heap_stride != part || h.total_bytes != total ||
	                (uint64_t)st.st_size != total || h.creator.pid != creator->pid ||
	                h.creator.start != creator->start || h.creator.pidns != creator->pidns))
		rc = -EPROTO;
	if (rc < 0) {
		close(fd);
		if (rc == -EPROTO)
			snprintf(err, errlen, "%s is not the heap segment rank 0 made: refusing it",
			         s->name);
		return rc;
	}
	shared = maps_get(s->name, &st, &h.creator, (size_t)total);
	if (shared) {
		close(fd);
		base = shared;
	} else {
		base = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		rc = base == MAP_FAILED ? -errno : 0;
		if (rc == 0 && (fstat(fd, &again) < 0 || (uint64_t)again.st_size != total)) {
			munmap(base, (size_t)total);
			rc = -EPROTO;
		}
		close(fd);
		if (rc < 0) {
			snprintf(err, errlen, "cannot map %s: %s", s->name, strerror(-rc));
			return rc;
		}
		base = maps_put(s->name, &st, &h.creator, base, (size_t)total);
	}
	s->base = base;
	s->bytes = (size_t)total;
	s->part = part;
	return 0;
}

void shmcoll__segment_unlink(const struct shmcoll_segment *s)
{
	shm_unlink(s->name);
}

void shmcoll__segment_release(struct shmcoll_segment *s)
{
	if (s->base)
		maps_drop(s->base, s->bytes);
	s->base = NULL;
}
