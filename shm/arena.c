/* arena.c - create, attach, validate and release a job's shared-memory arena.
 * The name lives only until every rank has attached; after that the segment
 * exists only as mappings, so no crash can leave it behind in /dev/shm. */
#include "shm/arena.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm/wait.h"

#define PAGE 4096u

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

int shmcoll__arena_layout(uint32_t nranks, size_t arena_bytes, struct shmcoll_layout *out,
			  char *err, size_t errlen)
{
	uint64_t fixed, avail, half, heap, minimum;

	if (nranks < 1 || nranks > SHMCOLL_MAX_RANKS) {
		snprintf(err, errlen, "size %u out of range 1..%d", nranks, SHMCOLL_MAX_RANKS);
		return -EINVAL;
	}
	fixed = round_up(PAGE + (uint64_t)nranks * sizeof(struct shmcoll_ctrl), PAGE);
	if (arena_bytes == 0) {
		half = SHMCOLL_DEFAULT_SLOT_HALF;
		heap = SHMCOLL_DEFAULT_HEAP_BYTES;
	} else {
		minimum = fixed + (uint64_t)nranks * 2 * min_half(nranks);
		if (arena_bytes < minimum) {
			snprintf(err, errlen,
				 "arena_bytes %zu too small for %u ranks (minimum %llu)",
				 arena_bytes, nranks, (unsigned long long)minimum);
			return -EINVAL;
		}
		/* Staging takes at most half of what is left, the heap the rest. */
		avail = arena_bytes - fixed;
		half = avail / 2 / (2 * (uint64_t)nranks) / SHMCOLL_LINE * SHMCOLL_LINE;
		if (half > SHMCOLL_DEFAULT_SLOT_HALF)
			half = SHMCOLL_DEFAULT_SLOT_HALF;
		if (half < min_half(nranks))
			half = min_half(nranks);
		heap = (avail - (uint64_t)nranks * 2 * half) / nranks / SHMCOLL_LINE *
		       SHMCOLL_LINE;
	}
	out->ctrl_off = PAGE;
	out->slot_half = half;
	out->slot_stride = 2 * half;
	out->slot_off = fixed;
	out->heap_off = fixed + (uint64_t)nranks * out->slot_stride;
	out->heap_stride = heap;
	out->total_bytes = out->heap_off + (uint64_t)nranks * heap;
	return 0;
}

int shmcoll__arena_validate(const struct shmcoll_arena_hdr *h, uint64_t file_bytes,
			    uint32_t nranks, char *err, size_t errlen)
{
	struct shmcoll_layout want;
	char lerr[128];

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
	/* Recompute the parts from the two sizes that define them: any other
	 * offset or length in the header is rejected rather than trusted. */
	if (h->slot_half < min_half(nranks) || h->slot_half > SHMCOLL_DEFAULT_SLOT_HALF ||
	    h->slot_half % SHMCOLL_LINE || h->heap_stride % SHMCOLL_LINE ||
	    h->heap_stride > file_bytes) {
		snprintf(err, errlen, "slot or heap size out of range");
		return -EPROTO;
	}
	if (shmcoll__arena_layout(nranks, 0, &want, lerr, sizeof(lerr)) < 0) {
		snprintf(err, errlen, "%s", lerr);
		return -EPROTO;
	}
	want.slot_half = h->slot_half;
	want.slot_stride = 2 * h->slot_half;
	want.heap_off = want.slot_off + (uint64_t)nranks * want.slot_stride;
	want.heap_stride = h->heap_stride;
	want.total_bytes = want.heap_off + (uint64_t)nranks * want.heap_stride;
	if (h->ctrl_off != want.ctrl_off || h->slot_off != want.slot_off ||
	    h->slot_stride != want.slot_stride || h->heap_off != want.heap_off ||
	    h->total_bytes != want.total_bytes) {
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
}

int shmcoll__arena_create(struct shmcoll_arena *a, const char *job, uint32_t nranks,
			  size_t arena_bytes, char *err, size_t errlen)
{
	struct shmcoll_layout lay;
	struct shmcoll_arena_hdr *h;
	void *base;
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
	fd = shm_open(a->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create %s: %s%s", a->name, strerror(errno),
			 errno == EEXIST ? " (another job with this name is running, or a "
					   "stale segment: remove it from /dev/shm)"
					 : "");
		return rc;
	}
	if (ftruncate(fd, (off_t)lay.total_bytes) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot size %s to %llu bytes: %s", a->name,
			 (unsigned long long)lay.total_bytes, strerror(errno));
		goto err_unlink;
	}
	/* Reserve every page now: a full /dev/shm must fail here with ENOSPC,
	 * not later with SIGBUS on first touch. */
	rc = posix_fallocate(fd, 0, (off_t)lay.total_bytes);
	if (rc != 0) {
		snprintf(err, errlen, "no room for the %llu-byte arena %s: %s",
			 (unsigned long long)lay.total_bytes, a->name, strerror(rc));
		rc = rc == ENOSPC || rc == EFBIG ? -ENOSPC : -rc;
		goto err_unlink;
	}
	base = mmap(NULL, lay.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen, "cannot map %s: %s", a->name, strerror(errno));
		goto err_unlink;
	}
	close(fd);

	h = base;
	h->magic = SHMCOLL_ARENA_MAGIC;
	h->version = SHMCOLL_ARENA_VERSION;
	h->nranks = nranks;
	h->total_bytes = lay.total_bytes;
	h->ctrl_off = lay.ctrl_off;
	h->slot_off = lay.slot_off;
	h->slot_stride = lay.slot_stride;
	h->slot_half = lay.slot_half;
	h->heap_off = lay.heap_off;
	h->heap_stride = lay.heap_stride;
	h->creator_pid = (int32_t)getpid();
	h->hdr_bytes = sizeof(*h);
	/* Pairs with the acquire load of ready in arena_attach(). */
	store_release(&h->ready, SHMCOLL_ARENA_READY);

	a->base = base;
	a->bytes = lay.total_bytes;
	a->hdr = h;
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
	struct stat st;
	void *base;
	int fd, rc;

	memset(a, 0, sizeof(*a));
	rc = shmcoll__arena_name(a->name, sizeof(a->name), job);
	if (rc < 0) {
		snprintf(err, errlen, "job name unusable");
		return rc;
	}
	for (;;) {
		if (timeout_ns >= 0 && shmcoll__now_ns() - start > timeout_ns) {
			snprintf(err, errlen, "timed out waiting for rank 0 to create %s",
				 a->name);
			return -ETIMEDOUT;
		}
		fd = shm_open(a->name, O_RDWR | O_CLOEXEC, 0);
		if (fd < 0) {
			if (errno != ENOENT) {
				rc = -errno;
				snprintf(err, errlen, "cannot open %s: %s", a->name,
					 strerror(errno));
				return rc;
			}
			nap(&delay);
			continue;
		}
		if (fstat(fd, &st) < 0) {
			rc = -errno;
			close(fd);
			snprintf(err, errlen, "cannot stat %s: %s", a->name, strerror(-rc));
			return rc;
		}
		if (st.st_uid != geteuid() || (st.st_mode & 077)) {
			close(fd);
			snprintf(err, errlen, "%s is not ours (owner %u, mode %o): refusing it",
				 a->name, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
			return -EPROTO;
		}
		if ((uint64_t)st.st_size < sizeof(struct shmcoll_arena_hdr)) {
			close(fd); /* the creator has not sized it yet */
			nap(&delay);
			continue;
		}
		base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (base == MAP_FAILED) {
			rc = -errno;
			snprintf(err, errlen, "cannot map %s: %s", a->name, strerror(-rc));
			return rc;
		}
		/* Pairs with the release store of ready in arena_create(). */
		if (load_acquire(&((struct shmcoll_arena_hdr *)base)->ready) ==
		    SHMCOLL_ARENA_READY)
			break;
		munmap(base, (size_t)st.st_size);
		nap(&delay);
	}
	memcpy(&copy, base, sizeof(copy));
	rc = shmcoll__arena_validate(&copy, (uint64_t)st.st_size, nranks, err, errlen);
	if (rc < 0) {
		munmap(base, (size_t)st.st_size);
		return rc;
	}
	a->base = base;
	a->bytes = (size_t)st.st_size;
	a->hdr = base;
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
		munmap(a->base, a->bytes);
	a->base = NULL;
	a->hdr = NULL;
}
