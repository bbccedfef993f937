/* cma.c - the single-copy protocol: a rank reads a peer's buffer straight
 * from the peer's memory with process_vm_readv (cross-memory attach), one
 * copy where staging through the arena takes two.
 *
 * Whether it may: at shmcoll_comm_create every rank writes the address and
 * value of a random nonce of its own into its control block before it counts
 * itself attached; once all are attached, each reads every peer's nonce
 * through process_vm_readv and sets the arena's cma_failed if it cannot, or
 * reads another value (a peer in another pid namespace, whose pid names some
 * other process here). A second count, probed, makes every rank wait for
 * every verdict, so all ranks agree: cma.ok is the same everywhere, which the
 * protocol choice needs. SHMCOLL_CMA=0 on any rank turns it off for all.
 * Yama's ptrace_scope >= 1, seccomp filters (containers) and a missing
 * CAP_SYS_PTRACE across users all make the probe fail, and the collectives
 * stage through the arena as before.
 *
 * Every collective that uses it runs the same two steps:
 *   1. Each rank publishes, in its descriptor, the address of the buffer its
 *      peers read (the root's for bcast and scatter, every rank's for gather,
 *      allgather and alltoall), and the step; it waits for the ranks it reads.
 *   2. It reads them - with memcpy from the arena where the buffer is in
 *      the owner's symmetric heap - then publishes the next step and waits
 *      for the ranks that read it, so no owner returns (and lets its caller
 *      reuse the buffer) while a peer still reads.
 * Every rank only ever reads peers and writes its own memory: a confused peer
 * can make a read fail, never corrupt this process. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/cma.h"
#include "lib/core/env.h"
#include "lib/core/state.h"
#include "lib/core/task.h"
#include "shm/proc.h"

/* Single copies run only when asked for: SHMCOLL_ALGO=cma, or SHMCOLL_CMA_MIN for blocks from
 * that size on. Against staging through the arena (scripts/cma-crossover, docs/BENCHMARKS.md,
 * "Single copy"), a process_vm_readv lost at every size from 4 KiB to 64 MiB, for every
 * collective that has one, at P = 2 and at P = 4 on 2 CPUs, in the VM's normal state: the
 * syscall pins every page, and its ~13 GB/s is below what two pipelined copies through the
 * caches reach. It won only where cross-core streaming itself is slow (the VM's slow mode);
 * such a machine sets SHMCOLL_CMA_MIN, and the probe at create keeps it ready. */

static uint64_t nonce_value(void)
{
	uint64_t v = 0;
	struct timespec ts;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v) && v)
		return v;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	v = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20);
	return v ? v : 1;
}

int shmcoll__cma_offer(struct shmcoll_cma *cma, char *err, size_t errlen)
{
	long long min, on;
	int rc;

	rc = shmcoll__env_long("SHMCOLL_CMA_MIN", 0, LLONG_MAX, &min);
	if (rc < 0) {
		snprintf(err, errlen, "SHMCOLL_CMA_MIN is not a byte count");
		return -EINVAL;
	}
	/* Unset: none, staging unless SHMCOLL_ALGO says cma. 0 asks for every size, as 1. */
	cma->min = rc == 0 ? 0 : min ? (size_t)min : 1;
	rc = shmcoll__env_long("SHMCOLL_CMA", 0, 1, &on);
	if (rc < 0) {
		snprintf(err, errlen, "SHMCOLL_CMA is not 0 or 1");
		return -EINVAL;
	}
	cma->nonce = nonce_value();
	cma->ok = rc == 0 || on;
	return 0;
}

void shmcoll__cma_show(struct shmcoll_node *n)
{
	n->st.me->cma_nonce = n->cma.nonce;
	n->st.me->cma_addr = n->cma.ok ? (uint64_t)(uintptr_t)&n->cma.nonce : 0;
}

/* Whether this rank can read rank p's memory: p's nonce, read through
 * process_vm_readv, is the one p wrote into the arena. */
static int can_read(const struct shmcoll_node *n, int p)
{
	const struct shmcoll_ctrl *pc = shmcoll__ctrl(&n->arena, (uint32_t)p);
	const struct shmcoll_ctrl *mine = n->st.me;
	uint64_t got = 0;
	struct iovec l = {&got, sizeof(got)}, r;

	if (!pc->cma_addr || pc->proc.pid <= 0 || pc->proc.pidns != mine->proc.pidns)
		return 0;
	r.iov_base = (void *)(uintptr_t)pc->cma_addr;
	r.iov_len = sizeof(got);
	if (process_vm_readv((pid_t)pc->proc.pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof(got))
		return 0;
	return got == pc->cma_nonce;
}

/* The copy probe: whether single copies pay on this machine, where nobody said. Staging moves
 * a block across cores twice (the writer takes back the lines its reader held, the reader pulls
 * them), a single copy once, through a system call that pins every page. Which wins depends on
 * the machine: on this VM staging won at every size while one core streamed another's lines at
 * ~32 GB/s, while with a 60 ns hop single copies made alltoall 1.1-1.55x faster from 32 KiB
 * blocks and allgather 1.13x from 2 MiB ones, with the buffers rewritten before every call as
 * applications do (lib/core/algo.h says why the other collectives stage anyway;
 * docs/BENCHMARKS.md, "Single copy"). So ranks 0 and 1 race the two at create with a 256 KiB
 * block (the staging slot), six rounds: rank 1
 * rewrites its own buffer, then writes the block into its slot (timed), and rank 0 copies the
 * slot out (timed) and reads rank 1's buffer with process_vm_readv (timed). The fastest round of
 * each part counts; where the single copy takes under 9/10 of the staged write and read
 * together, alltoall runs single copies from SHMCOLL_CMA_AUTO_MIN blocks and allgather from
 * SHMCOLL_CMA_AUTO_ALLGATHER_MIN. The rounds agree within a few percent; the 9/10 keeps a machine
 * where the two are even on one side. It runs only where it can tell: each rank has a CPU (not
 * oversubscribed), the slot holds the block, both may read each other's memory, and rank 0 was left
 * to choose (no SHMCOLL_CMA_MIN in its environment, no tuning file setting cma_min_bytes,
 * SHMCOLL_TUNE not "none"). About 1.2 ms at create, given up after COPY_PROBE_NS. */
#define COPY_PROBE_BYTES  (256u << 10)
#define COPY_PROBE_ROUNDS 6
#define COPY_PROBE_NS     (20 * 1000 * 1000)
#define COPY_STOP         UINT32_MAX

int shmcoll__cma_probe_wanted(const struct shmcoll_node *n)
{
	return n->size >= 2 && !n->cma.min && n->arena.lay.slot_stride >= COPY_PROBE_BYTES;
}

/* Until copy_turn is want: 0, or -1 when the peer gave up or the time did. */
static int copy_wait(_Atomic uint32_t *turn, uint32_t want, int64_t deadline)
{
	for (unsigned i = 1;; i++) {
		uint32_t v = load_acquire(turn);

		if (v == want)
			return 0;
		if (v == COPY_STOP)
			return -1;
		if (i % 64 == 0) {
			if (shmcoll__now_ns() > deadline)
				return -1;
			sched_yield(); /* a CPU each, but never a spin without a yield */
		}
		cpu_relax();
	}
}

static uint32_t ns_since(int64_t t0, uint32_t best)
{
	int64_t d = shmcoll__now_ns() - t0;

	return d > 0 && d < (int64_t)best ? (uint32_t)d : best;
}

/* Ranks 0 and 1. Rank 0 fills copy_staged_ns and copy_single_ns where every round ran. */
static void copy_probe(struct shmcoll_node *n)
{
	struct shmcoll_arena_hdr *h = n->arena.hdr;
	uint8_t *block = n->arena.base + n->arena.lay.slot_off + n->arena.lay.slot_stride;
	int64_t deadline = shmcoll__now_ns() + COPY_PROBE_NS, t0;
	uint32_t i, write = UINT32_MAX, read = UINT32_MAX, single = UINT32_MAX;
	uint8_t *mine = malloc(COPY_PROBE_BYTES);
	struct iovec l = {mine, COPY_PROBE_BYTES}, r = {NULL, COPY_PROBE_BYTES};
	pid_t pid = (pid_t)shmcoll__ctrl(&n->arena, 1)->proc.pid;

	if (!mine)
		goto stop;
	memset(mine, 0, COPY_PROBE_BYTES); /* its pages are there before the timing */
	if (n->rank == 1)
		h->copy_addr = (uint64_t)(uintptr_t)mine;
	for (i = 1; i <= COPY_PROBE_ROUNDS; i++) {
		if (n->rank == 1) {
			if (copy_wait(&h->copy_turn, 2 * i - 2, deadline))
				goto stop;
			memset(mine, (int)i, COPY_PROBE_BYTES);
			t0 = shmcoll__now_ns();
			memset(block, (int)i, COPY_PROBE_BYTES);
			h->copy_write_ns = ns_since(t0, UINT32_MAX);
			store_release(&h->copy_turn, 2 * i - 1);
			continue;
		}
		if (copy_wait(&h->copy_turn, 2 * i - 1, deadline))
			goto stop;
		if (h->copy_write_ns < write)
			write = h->copy_write_ns;
		t0 = shmcoll__now_ns();
		memcpy(mine, block, COPY_PROBE_BYTES);
		read = ns_since(t0, read);
		r.iov_base = (void *)(uintptr_t)h->copy_addr;
		t0 = shmcoll__now_ns();
		if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)COPY_PROBE_BYTES)
			goto stop;
		single = ns_since(t0, single);
		store_release(&h->copy_turn, 2 * i);
	}
	/* Rank 1 keeps its buffer until rank 0 has read it for the last time. */
	if (n->rank == 1 && copy_wait(&h->copy_turn, 2 * COPY_PROBE_ROUNDS, deadline))
		goto stop;
	if (n->rank == 0 && write != UINT32_MAX && read != UINT32_MAX && single != UINT32_MAX) {
		h->copy_staged_ns = write + read < UINT32_MAX - 1 ? write + read + 1 : UINT32_MAX;
		h->copy_single_ns = single + 1;
	}
	free(mine);
	return;
stop:
	store_release(&h->copy_turn, COPY_STOP);
	free(mine);
}

int shmcoll__cma_agree(struct shmcoll_node *n)
{
	struct shmcoll_arena_hdr *h = n->arena.hdr;
	struct shmcoll_waiter w = n->waiter;
	int p, ok = n->st.me->cma_addr != 0, rc;
	uint32_t staged, single;
	int pays;

	for (p = 0; ok && p < n->size; p++)
		if (p != n->rank && !can_read(n, p))
			ok = 0;
	if (!ok)
		store_relaxed(&h->cma_failed, 1);
	/* Alike on ranks 0 and 1: what rank 0 asked, the CPU union, both control blocks. */
	if (n->rank <= 1 && h->copy_probe && !n->waiter.oversubscribed &&
	    shmcoll__ctrl(&n->arena, 0)->cma_addr && shmcoll__ctrl(&n->arena, 1)->cma_addr)
		copy_probe(n);
	/* seq_cst: whoever sees the final count sees cma_failed and the probe's times too. */
	if (fetch_add_seqcst(&h->probed, 1) + 1 == (uint32_t)n->size)
		shmcoll__wake_all(&h->probed);
	w.oversubscribed = 1;
	rc = shmcoll__wait_geq(&w, &h->probed, &h->probe_sleepers, (uint32_t)n->size);
	if (rc < 0)
		return rc;
	n->cma.ok = n->size > 1 && !load_relaxed(&h->cma_failed);
	staged = h->copy_staged_ns;
	single = h->copy_single_ns;
	pays = (uint64_t)single * 10 < (uint64_t)staged * 9;
	if (staged && single && n->cma.ok) {
		size_t len = strlen(n->tune_source);

		if (!n->cma.min && pays) {
			n->cma.min = SHMCOLL_CMA_AUTO_MIN;
			n->cma.probed = 1;
		}
		snprintf(
		    n->tune_source + len, sizeof(n->tune_source) - len,
		    "; 256 KiB across cores at create: staged %.1f us, single copy %.1f us: %s",
		    staged / 1000.0, single / 1000.0,
		    pays ? "single copies: alltoall from 32 KiB blocks, allgather from 2 MiB"
		         : "staging");
	}
	return 0;
}

/* After a read of rank p's memory failed with errno e. A peer that left
 * the call because the communicator broke (its own caller may have freed the
 * buffer since, or exited) is not at fault: report what broke it, as a wait
 * would. A process being killed tears its memory down before it becomes a
 * zombie, and a read in that window fails with EFAULT as for a bad buffer:
 * give it a moment to finish dying before calling the buffer bad. */
static int read_failed(struct shmcoll_node *n, const char *fn, int p, int e, uint64_t addr,
                       size_t len)
{
	const struct shmcoll_ctrl *pc = shmcoll__ctrl(&n->arena, (uint32_t)p);
	const struct timespec ms = {0, 1000000};
	int i;

	for (i = 0;; i++) {
		if (load_relaxed(&n->arena.hdr->aborted))
			return shmcoll__node_enter(n, fn);
		if (e == ESRCH || shmcoll__proc_state(&pc->proc) == SHMCOLL_PROC_DEAD) {
			shmcoll__node_break_by(n, EOWNERDEAD, p);
			return shmcoll__node_fail(
			    n, -EOWNERDEAD,
			    "%s: rank %d (pid %d) died while this rank read its "
			    "buffer",
			    fn, p, (int)pc->proc.pid);
		}
		if (i == 200)
			break;
		nanosleep(&ms, NULL);
	}
	shmcoll__node_break(n, EIO);
	return shmcoll__node_fail(n, -EIO,
	                          "%s: reading %zu bytes of rank %d's buffer at %#llx failed: %s "
	                          "(is its buffer as long as the call says?)",
	                          fn, len, p, (unsigned long long)addr, strerror(e));
}

int shmcoll__cma_read(struct shmcoll_node *n, const char *fn, int p, void *dst, uint64_t addr,
                      size_t len)
{
	const struct shmcoll_ctrl *pc = shmcoll__ctrl(&n->arena, (uint32_t)p);
	uint8_t *to = dst;
	ssize_t got;
	int e;

	while (len) {
		struct iovec l = {to, len}, r = {(void *)(uintptr_t)addr, len};

		got = process_vm_readv((pid_t)pc->proc.pid, &l, 1, &r, 1, 0);
		if (got <= 0) {
			e = got < 0 ? errno : EFAULT;
			if (e == EINTR)
				continue;
			return read_failed(n, fn, p, e, addr, len);
		}
		to += got;
		addr += (uint64_t)got;
		len -= (size_t)got;
	}
	return 0;
}

int shmcoll__cma_fetch(struct shmcoll_node *n, struct shmcoll_task *t, int p, void *dst, size_t off,
                       size_t len)
{
	if (n->st.zc[p]) {
		memcpy(dst, n->st.zc[p] + off, len);
		return 0;
	}
	return shmcoll__cma_read(
	    n, t->fn, p, dst,
	    shmcoll__ctrl(&n->arena, (uint32_t)p)->desc[t->d->step & 1].addr + off, len);
}
