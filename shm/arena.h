/* arena.h - the in-segment layout of a job's POSIX shared-memory arena and the
 * calls that create, attach to, validate and release it.
 *
 * Layout (offsets from the start of the segment; every part page- or
 * line-aligned; nothing inside is a pointer):
 *   0                      struct shmcoll_arena_hdr (one page)
 *   ctrl_off               nranks x control block of ctrl_stride bytes:
 *                          struct shmcoll_ctrl, then msg_ring messages
 *   slot_off               nranks x data slot: two halves of slot_half bytes
 *   p2p_off                nranks x point-to-point control block of p2p_stride
 *                          bytes: heads[nranks], tails[nranks], bell, sleepers
 *   ring_off               nranks x nranks rings of ring_bytes: ring (s -> r)
 *                          at (r * nranks + s) * ring_bytes
 *   heap_off               nranks x symmetric heap of heap_stride bytes
 */
#ifndef SHMCOLL_SHM_ARENA_H
#define SHMCOLL_SHM_ARENA_H

#include <assert.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/atomics.h"
#include "shm/name.h"
#include "shm/proc.h"

#define SHMCOLL_ARENA_MAGIC   0x314c4c4f434d4853ull /* "SHMCOLL1" */
#define SHMCOLL_ARENA_VERSION 11u
#define SHMCOLL_ARENA_READY   0x59444552u /* "REDY" */
#define SHMCOLL_MAX_RANKS     1024
#define SHMCOLL_CPU_WORDS     16 /* affinity union of up to 1024 CPUs */

/* Defaults when the caller gives no arena size: 128 KiB staging halves keep a
 * rank's two halves L2-resident (on the reference machine 128 KiB chunks were
 * the fastest up to 4 MiB), and each rank gets a 4 MiB symmetric heap. */
#define SHMCOLL_DEFAULT_SLOT_HALF  (128u * 1024)
#define SHMCOLL_DEFAULT_HEAP_BYTES (4u * 1024 * 1024)
#define SHMCOLL_MIN_SLOT_HALF      512u

/* Point-to-point rings (lib/core/p2p.c), one per ordered pair of ranks: a
 * power of two between these bounds. By default each receiver's rings share
 * SHMCOLL_RING_BUDGET (so 256 KiB rings up to 4 ranks, 128 KiB at 8, 16 KiB
 * at 64, the least from 2048 on); a given arena_bytes gives them at most an
 * eighth. */
#define SHMCOLL_RING_MIN    256u
#define SHMCOLL_RING_MAX    (256u * 1024)
#define SHMCOLL_RING_BUDGET (1u << 20)
/* What one call is, for the peers' match check: written by the owner into
 * call[s & 1] before it publishes step s, the first step of the call; read by
 * peers after their acquire of that step. It shares seq's cache line, so the
 * check costs no cache miss beyond the one that brings the new seq. */
struct shmcoll_call {
	uint32_t step; /* the step this call began at */
	uint8_t kind;  /* which collective (lib/ numbering) */
	uint8_t dtype;
	uint8_t op;
	uint8_t algo; /* the protocol it runs: all ranks must agree */
	int32_t root;
	uint32_t zc; /* bit 0: desc[s & 1].src_off, bit 1: its res_off name a heap buffer */
	uint64_t count;
};
static_assert(sizeof(struct shmcoll_call) == 24, "two calls and seq fit one 64-byte line");

/* The rest of a call's description, read only when the call word says it
 * is needed (a zero-copy source, a heap offset) or to explain a mismatch.
 * Written and read under the same rules as shmcoll_call. */
struct shmcoll_desc {
	uint32_t kind; /* which collective (lib/ numbering) */
	uint32_t dtype;
	uint32_t op;
	int32_t root;
	uint64_t count;
	uint64_t src_off; /* offset of the source in the owner's heap, or UINT64_MAX */
	uint64_t aux;     /* per-collective extra (e.g. heap offset of a malloc) */
	uint32_t step;    /* the step this descriptor was written for */
	uint32_t pad0;
	uint64_t res_off; /* offset of the result in the owner's heap, or UINT64_MAX */
	uint64_t addr;    /* single-copy protocol: the owner's address of the buffer its
	                   * peers read with process_vm_readv (lib/cma.c), else 0 */
};
static_assert(sizeof(struct shmcoll_desc) == 64, "a descriptor is one 64-byte line");

/* Payloads up to this size travel inline in every layout, in the message the
 * reader polls (docs/BENCHMARKS.md: 1 KiB measured 1.6-2.3x faster than staging
 * for small rooted calls with a 25 ns hop). In the deep message ring a message's
 * data may be longer, up to the layout's msg_max: SHMCOLL_MSG_DATA_MAX where the
 * arena has room, SHMCOLL_MSG_DATA_MID in a smaller one (arena.c, msg_shapes).
 * With a 60 ns hop, where how far a writer runs ahead of its readers decides,
 * rooted calls of 2-32 KiB were 1.2-2.2x faster inline than staged, which lets a
 * writer run one call ahead only ("The 60 ns state"). Such data does not fit the
 * message: it goes to the rank's slot of the same index in a second ring
 * (msg_big_off, msg_max bytes each), and the message's len carries
 * SHMCOLL_MSG_BIG, so the messages stay packed one after another as they were,
 * which a reader's prefetcher runs along (4 KiB messages in one ring made every
 * 1 KiB call 0.90-0.95x). Where there is a second ring it takes all data over
 * SHMCOLL_MSG_PACKED_MAX: 512 B-2 KiB calls were 1.1-1.4x faster that way than
 * with 1 KiB in the packed message (a reader's prefetcher then runs into lines
 * the writer is about to rewrite). The shallow ring of a small arena has no second ring,
 * so the least arena for a rank count does not grow. Calls in which every rank
 * reads every peer's message stop at 1 KiB (lib/core/algo.h,
 * SHMCOLL_INLINE_ALL_MAX). */
#define SHMCOLL_INLINE_MAX     1024
#define SHMCOLL_MSG_PACKED_MAX 256 /* data beyond: to the second ring, where there is one */
#define SHMCOLL_MSG_DATA_MID   4096
#define SHMCOLL_MSG_DATA_MAX   32768
#define SHMCOLL_MSG_BIG        (1u << 30) /* in len: the data is in the second ring */

/* A small call's whole contribution: written by the owner into
 * msg[s % msg_ring] (stamp last, release) before it publishes step s,
 * the first and only step of the call. The stamp, call word and first 32
 * bytes of data share one 64-byte line, so a reader that spins on the stamp
 * gets a small call's data and call word in one cache-line transfer, where
 * seq and a staging half would take two; longer data follows in the next
 * lines. Every rank of an inline call writes its message, with no data if it
 * has none to give, so the call word a peer may need to explain a mismatch is
 * always there. A slot is rewritten msg_ring steps later, once every
 * peer has published the step after the one it held (lib/engine.c:
 * msg_guard): a root can run that many calls ahead of its readers, as MPI's
 * eager "fast boxes" do. */
struct shmcoll_msg {
	_Alignas(64) _Atomic uint32_t stamp; /* the step this message is for */
	uint32_t len;
	struct shmcoll_call call;
	uint8_t data[SHMCOLL_INLINE_MAX];
};
static_assert(sizeof(struct shmcoll_msg) % 64 == 0, "a message is whole 64-byte lines");
static_assert(offsetof(struct shmcoll_msg, data) + 32 <= 64,
              "the stamp, call word and 32 bytes of data share the first line");

/* The 64-byte lines [p, p + len) touches, by address: returns the first line's, *end the
 * address past the last. A message's data starts part-way into its first line, so counting
 * 64-byte steps from the data instead would leave out a range's last line. */
static inline uintptr_t shmcoll__lines(const void *p, size_t len, uintptr_t *end)
{
	*end = (uintptr_t)p + len;
	return (uintptr_t)p & ~(uintptr_t)63;
}

/* Inline messages per rank (msg_ring), a power of two: how many small calls a
 * rank can run ahead of its slowest reader. 16 by default: a reader then
 * rarely polls the writer's lines, and a writer whose readers lag does not
 * wait (back-to-back 8 B bcast with a 200 ns hop: 0.163 us with 4, 0.140
 * with 8, 0.081 with 16, docs/BENCHMARKS.md). 4 where a caller's small arena
 * cannot spare the 77 KiB per rank more that 16 messages with data slots of
 * SHMCOLL_MSG_DATA_MID take. */
#define SHMCOLL_MSG_RING_MIN 4u
#ifndef SHMCOLL_MSG_RING_DEFAULT /* -DSHMCOLL_MSG_RING_DEFAULT=4 builds the shallow ring, to       \
                                    measure */
#define SHMCOLL_MSG_RING_DEFAULT 16u
#endif
static_assert((SHMCOLL_MSG_RING_MIN & (SHMCOLL_MSG_RING_MIN - 1)) == 0 &&
                  (SHMCOLL_MSG_RING_DEFAULT & (SHMCOLL_MSG_RING_DEFAULT - 1)) == 0 &&
                  SHMCOLL_MSG_RING_MIN >= 2,
              "the ring is indexed by step % msg_ring and holds the step parity");

/* Per-rank control block. Writer of each line in its comment. */
struct shmcoll_ctrl {
	_Alignas(SHMCOLL_LINE) _Atomic uint32_t seq;        /* owner: the last step it published */
	struct shmcoll_call call[2];                        /* owner, by step parity */
	_Alignas(SHMCOLL_LINE) _Atomic uint32_t sleepers;   /* peers: count asleep on seq */
	_Alignas(SHMCOLL_LINE) struct shmcoll_desc desc[2]; /* owner, by step parity */
	/* owner, once at attach (before it counts itself attached): who it is,
	 * for the peers' liveness checks (lib/live.c). */
	_Alignas(SHMCOLL_LINE) struct shmcoll_proc_id proc;
	_Atomic uint32_t left; /* owner, at shmcoll_comm_destroy: 1, after its last publish */
	/* owner: 1 + the rank whose buffer it reads in place for a rendezvous now, else 0; a
	 * sender whose sends fail waits while it names it (lib/core/p2p.c's pull). */
	_Atomic uint32_t pulling;
	/* owner: 1 + the CPU of its last long wait (shm/wait.h's pace), 0 before. Not in the seq
	 * line: a peer polls that line, and a store there during a wait would take it away. */
	_Atomic int32_t cpu;
	/* owner, once before it counts itself attached: its place on the machine, package and
	 * L3 domain (-1: unknown), from which every rank computes the same trees
	 * (lib/core/topo.c). */
	int32_t place_pkg;
	int32_t place_l3;
	/* owner, once before it counts itself attached: where in its memory
	 * peers find cma_nonce, to prove they can read it (lib/cma.c); 0 when
	 * it does not offer single-copy reads. */
	uint64_t cma_addr;
	uint64_t cma_nonce;
	/* owner, by step: msg_ring of them (the arena's layout), then in the deep ring
	 * msg_ring data slots of msg_max bytes at msg_big_off */
	_Alignas(SHMCOLL_LINE) struct shmcoll_msg msg[];
};
static_assert(sizeof(struct shmcoll_ctrl) == 4 * SHMCOLL_LINE, "four lines, then the message ring");
static_assert(offsetof(struct shmcoll_ctrl, call) + sizeof(struct shmcoll_call[2]) <= 64,
              "seq and the call words share one 64-byte coherence line");

/* Room in the header for rank 0's tuning (see tuned below). */
#define SHMCOLL_TUNED_BYTES  512
#define SHMCOLL_TUNED_SOURCE 320

struct shmcoll_arena_hdr {
	/* Written by the creator before it stores `ready`; read-only after. */
	uint64_t magic;
	uint32_t version;
	uint32_t nranks;
	uint64_t total_bytes;
	uint64_t ctrl_off;
	uint64_t slot_off;
	uint64_t slot_stride; /* 2 * slot_half */
	uint64_t slot_half;
	uint64_t heap_off;
	uint64_t heap_stride;
	uint64_t p2p_off;
	uint64_t p2p_stride; /* one rank's point-to-point control block */
	uint64_t ring_off;
	uint64_t ring_bytes; /* one pair's ring */
	/* Who made the segment (pid, start time, pid namespace): the stale
	 * sweep removes a segment whose creator is gone, and the per-process
	 * mapping registry tells two segments of one name apart by it. */
	struct shmcoll_proc_id creator;
	uint32_t hdr_bytes; /* sizeof(struct shmcoll_arena_hdr) of the creator */
	uint32_t pad;       /* 0 */
	uint32_t msg_ring;  /* inline messages per rank */
	uint32_t msg_max;   /* the most data one carries (the layout's msg_max) */

	/* creator: 0 until the fields above are valid (release). */
	_Alignas(SHMCOLL_LINE) _Atomic uint32_t ready;
	/* every rank: fetch-add once when attached; the last one unlinks. */
	_Alignas(SHMCOLL_LINE) _Atomic uint32_t attached;
	_Atomic uint32_t attach_sleepers;
	/* every rank: fetch-add once when it has tried to read every peer's
	 * cma_nonce; cma_failed is set first by any rank that could not. */
	_Alignas(SHMCOLL_LINE) _Atomic uint32_t probed;
	_Atomic uint32_t probe_sleepers;
	_Atomic uint32_t cma_failed;
	/* The copy probe (lib/core/cma.c) at create. copy_probe: rank 0, before it counts
	 * itself attached, 1 if ranks 0 and 1 are to run it; copy_turn: ranks 0 and 1 in
	 * turn while it runs, with rank 1's copy_write_ns and copy_addr; copy_staged_ns and
	 * copy_single_ns: rank 0, before it counts its single-copy verdict (probed), what the
	 * two ways took, 0 for not measured. */
	_Alignas(SHMCOLL_LINE) _Atomic uint32_t copy_turn;
	uint32_t copy_probe;
	uint32_t copy_write_ns;
	uint32_t copy_staged_ns;
	uint32_t copy_single_ns;
	uint32_t pad2; /* 0 */
	uint64_t copy_addr;
	/* any rank: set once to abort the job. */
	_Alignas(SHMCOLL_LINE) _Atomic uint32_t aborted;
	/* any rank: set once, at its first point-to-point operation; from then
	 * on every rank reads its rings while it waits (lib/core/p2p.c). */
	_Alignas(SHMCOLL_LINE) _Atomic uint32_t p2p_used;
	/* every rank: OR of its CPU affinity, for the oversubscription test. */
	_Alignas(SHMCOLL_LINE) _Atomic uint64_t cpus[SHMCOLL_CPU_WORDS];
	/* rank 0, before it counts itself attached: its tuning file's thresholds and where
	 * they came from (lib/core/tuning.h), which every rank takes. Opaque bytes here: the
	 * arena layer knows nothing of protocols. */
	_Alignas(SHMCOLL_LINE) uint8_t tuned[SHMCOLL_TUNED_BYTES];
	char tuned_source[SHMCOLL_TUNED_SOURCE];
};
static_assert(sizeof(struct shmcoll_arena_hdr) <= 4096, "the header fits its page");

/* Sizes of the parts, computed by the creator and checked by everyone. */
struct shmcoll_layout {
	uint64_t total_bytes, ctrl_off, slot_off, slot_stride, slot_half, heap_off, heap_stride;
	uint64_t p2p_off, p2p_stride, ring_off, ring_bytes;
	uint64_t msg_ring, ctrl_stride; /* messages per rank; one control block's bytes */
	uint64_t msg_max;     /* the most data a message carries (SHMCOLL_MSG_BIG beyond 1 KiB) */
	uint64_t msg_big_off; /* in a control block: the second ring (msg_max > 1 KiB only) */
};

/* The process-local view of an attached arena. */
struct shmcoll_arena {
	uint8_t *base;
	size_t bytes;
	struct shmcoll_arena_hdr *hdr;
	struct shmcoll_layout lay; /* validated private copy: offsets come from here */
	uint32_t nranks;
	char name[SHMCOLL_NAME_MAX];
};

/* Computes the layout for nranks in arena_bytes (0: the defaults). Returns 0
 * or -EINVAL (nranks out of range, or arena_bytes too small: the message in
 * err says the minimum). Pure: no shared memory touched. */
int shmcoll__arena_layout(uint32_t nranks, size_t arena_bytes, struct shmcoll_layout *out,
                          char *err, size_t errlen);

/* The least arena_bytes a layout for nranks takes: the header page, the
 * control blocks, two staging halves of the least size per rank, and the
 * point-to-point control blocks and rings of the least size. */
uint64_t shmcoll__arena_min_bytes(uint32_t nranks);

/* The ring size of a default layout for nranks. */
uint64_t shmcoll__ring_default(uint32_t nranks);

/* Checks a header read from a segment of file_bytes bytes against the layout
 * rules and the expected rank count. Returns 0 or -EPROTO with a message. It
 * reads only the given copy, so a hostile segment cannot change it meanwhile. */
int shmcoll__arena_validate(const struct shmcoll_arena_hdr *hdr, uint64_t file_bytes,
                            uint32_t nranks, char *err, size_t errlen);

/* The default layout (arena_bytes == 0) shrunk to fit room bytes: the heap
 * first, down to nothing, then the staging halves, down to the least the
 * layout allows. Returns 0, or -ENOSPC when even that does not fit. Pure. */
int shmcoll__arena_fit(uint32_t nranks, uint64_t room, struct shmcoll_layout *out);

/* The least memory in bytes the memory cgroup of this process can still
 * charge: the tightest limit of its cgroup and every ancestor (cgroup v2
 * memory.max, v1 memory.limit_in_bytes) minus what that level uses, not
 * counting file cache the kernel can reclaim (active_file + inactive_file of
 * memory.stat; tmpfs pages are not in it). cgroup_file and mountinfo_file are
 * /proc/self/cgroup and /proc/self/mountinfo, parameters for the tests.
 * *room is UINT64_MAX when no level has a limit or nothing can be read, and
 * where (if not NULL) names the directory of the tightest level. */
void shmcoll__memcg_room(const char *cgroup_file, const char *mountinfo_file, uint64_t *room,
                         char *where, size_t wherelen);

/* What a new arena may take: the free space of the shared-memory filesystem
 * (statvfs of /dev/shm) or the memory cgroup's room, whichever is less;
 * UINT64_MAX when neither is limited. why describes both, for messages. */
uint64_t shmcoll__arena_room(char *why, size_t whylen);

/* Creates the job's segment (O_CREAT|O_EXCL, 0600), reserves its space, maps
 * it and writes the header, with this process as its creator. First it
 * sweeps stale segments (best effort) and checks the room for the arena:
 * with arena_bytes == 0 the default layout shrinks to fit with a margin (the
 * heap first, then the staging halves); an arena that cannot fit, or an
 * explicit arena_bytes that does not, fails with -ENOSPC and a message giving
 * the bytes needed and available, before anything is created (and a race for
 * the space is still an -ENOSPC from posix_fallocate, never a SIGBUS later).
 * -EEXIST if the name is taken, -EINVAL for a bad size. */
int shmcoll__arena_create(struct shmcoll_arena *a, const char *job, uint32_t nranks,
                          size_t arena_bytes, char *err, size_t errlen);

/* Opens and maps the segment the creator of job made, retrying until it
 * exists and is ready or timeout_ns passes (-ETIMEDOUT; < 0: forever). A
 * segment whose creator is known dead is stale: it is skipped (the sweep of
 * rank 0 replaces it) rather than attached. -EPROTO for a segment that is not
 * a regular file, not this user's, not mode 0600 or fails validation.
 *
 * In one process every rank of a job shares one mapping: the first rank of
 * the process to create or attach maps the segment, later ones (threads)
 * reuse that mapping, counted; release unmaps at the last reference. A forked
 * child never reuses a mapping registered before the fork.
 *
 * Hostile or broken segments: the header is read with pread into private
 * memory and validated before anything is mapped, and the size is checked
 * again once mapped, so a segment truncated before or during attach is
 * -EPROTO (or, shorter than a header, never ready: -ETIMEDOUT), not SIGBUS. A process of the same
 * user that truncates the file after that makes accesses to the lost pages fault with SIGBUS: POSIX
 * shared memory cannot be sealed against shrinking (seals are memfd-only) and a library may not
 * take SIGBUS. Only the owner can do that while the name exists (mode 0600), and nobody without
 * ptrace rights once the last rank has attached and the name is gone. */
int shmcoll__arena_attach(struct shmcoll_arena *a, const char *job, uint32_t nranks,
                          int64_t timeout_ns, char *err, size_t errlen);

/* Registers rank as attached; the last rank to attach unlinks the name, so
 * from then on no crash can leak the segment. */
void shmcoll__arena_join(struct shmcoll_arena *a, uint32_t rank);

/* Removes the name if it still exists (failure paths), then drops this
 * rank's reference to the mapping (unmapped with the process's last one). */
void shmcoll__arena_release(struct shmcoll_arena *a, int unlink_name);

/* Removes the stale arenas of this user from /dev/shm: the entries named
 * with this user's prefix that are regular files owned by this user and
 *   - whose header names a creator that is dead (shmcoll__proc_state DEAD:
 *     gone, a zombie, or its pid reused), or
 *   - that have no header and were last modified more than 60 s ago (a
 *     creator that died between creating the name and writing the header).
 * Everything else is kept: a live or unknown creator (another pid namespace,
 * no /proc), another layout version, other users' files, anything but a
 * regular file. A segment is first renamed to a private name and removed only
 * if it is still the file judged, so one created meanwhile under the old name
 * is never removed. note (may be NULL) gets one line per entry looked at:
 * "removed NAME: why" or "kept NAME: why". Returns how many were removed, or
 * -errno when /dev/shm cannot be read. */
int shmcoll__arena_sweep(void (*note)(void *arg, const char *line), void *arg);

/* Heap segments: more symmetric heap, for a shmcoll_malloc the arena's heap has no room
 * for (lib/core/heap.c). Segment seq of an arena is named after it ("<arena>.h<seq>") and
 * holds a header page - an arena header with heap_off = one page, heap_stride = part and
 * slot_half = 0, so the stale sweep sees its creator and no attach takes it for an arena -
 * then nranks parts of part bytes (a page multiple), part r being rank r's. Rank 0 creates it
 * (checking the room first, reserving every page: -ENOSPC rather than SIGBUS), every other
 * rank attaches to it and checks that it is exactly that (-EPROTO otherwise), and rank 0
 * unlinks the name once every rank has attached. Ranks that are threads of one process share
 * one mapping, as with the arena. */
struct shmcoll_segment {
	uint8_t *base; /* the mapping: the header page, then the parts */
	size_t bytes;
	uint64_t part;
	char name[SHMCOLL_NAME_MAX + 16];
};

int shmcoll__segment_create(struct shmcoll_segment *s, const struct shmcoll_arena *a, uint32_t seq,
                            uint64_t part, char *err, size_t errlen);
/* creator: who rank 0 is (its control block's proc). */
int shmcoll__segment_attach(struct shmcoll_segment *s, const struct shmcoll_arena *a, uint32_t seq,
                            uint64_t part, const struct shmcoll_proc_id *creator, char *err,
                            size_t errlen);
void shmcoll__segment_unlink(const struct shmcoll_segment *s);
void shmcoll__segment_release(struct shmcoll_segment *s);
/* Rank's part of s in this mapping. */
uint8_t *shmcoll__segment_part(const struct shmcoll_segment *s, uint32_t rank);

static inline struct shmcoll_ctrl *shmcoll__ctrl(const struct shmcoll_arena *a, uint32_t rank)
{
	return (struct shmcoll_ctrl *)(a->base + a->lay.ctrl_off +
	                               (uint64_t)rank * a->lay.ctrl_stride);
}

/* The point-to-point words (lib/core/p2p.c). Each rank's control block holds
 *   heads[r]  the bytes it has published into its ring to r (it writes them)
 *   tails[s]  the bytes it has consumed of the ring from s (it writes them)
 *   bell      rung (fetch-add, then a futex wake) by a peer that changed
 *             something this rank sleeps for; its own line
 *   sleepers  how many of this rank's threads sleep on bell; its own line,
 *             written by the rank only
 * Every word only grows (32-bit, wrapping), so no value is ever reused. */
static inline _Atomic uint32_t *shmcoll__p2p_word(const struct shmcoll_arena *a, uint32_t rank,
                                                  uint64_t off)
{
	return (_Atomic uint32_t *)(a->base + a->lay.p2p_off + rank * a->lay.p2p_stride + off);
}

static inline _Atomic uint32_t *shmcoll__ring_head(const struct shmcoll_arena *a, uint32_t from,
                                                   uint32_t to)
{
	return shmcoll__p2p_word(a, from, (uint64_t)to * 4);
}

static inline _Atomic uint32_t *shmcoll__ring_tail(const struct shmcoll_arena *a, uint32_t from,
                                                   uint32_t to)
{
	uint64_t arr = (a->lay.p2p_stride - 2 * SHMCOLL_LINE) / 2;

	return shmcoll__p2p_word(a, to, arr + (uint64_t)from * 4);
}

static inline _Atomic uint32_t *shmcoll__p2p_bell(const struct shmcoll_arena *a, uint32_t rank)
{
	return shmcoll__p2p_word(a, rank, a->lay.p2p_stride - 2 * SHMCOLL_LINE);
}

static inline _Atomic uint32_t *shmcoll__p2p_sleepers(const struct shmcoll_arena *a, uint32_t rank)
{
	return shmcoll__p2p_word(a, rank, a->lay.p2p_stride - SHMCOLL_LINE);
}

/* The data of the ring from rank from to rank to. */
static inline uint8_t *shmcoll__ring(const struct shmcoll_arena *a, uint32_t from, uint32_t to)
{
	return a->base + a->lay.ring_off + ((uint64_t)to * a->nranks + from) * a->lay.ring_bytes;
}

#endif
