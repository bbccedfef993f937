/* harness.h - shared test machinery: run the ranks of a job as forked processes
 * or as threads, and check one collective call byte for byte against values
 * every rank derives from the same deterministic generator. No Criterion here. */
#ifndef SHMCOLL_TESTS_HARNESS_H
#define SHMCOLL_TESTS_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"

#define TH_MAX_RANKS 64

/* Exit codes the harness itself uses; a body returns 0 or a code in 1..199. */
#define TH_EXIT_CREATE  200 /* shmcoll_comm_create failed */
#define TH_EXIT_DESTROY 201 /* shmcoll_comm_destroy failed after a good body */
#define TH_EXIT_ORPHAN  202 /* the parent was already gone after fork */
#define TH_EXIT_RANGE   203 /* the body returned a code outside 0..199 */
#define TH_EXIT_RANK    204 /* shmcoll_comm_rank/size disagree with the config */

typedef int (*th_body_fn)(shmcoll_comm *comm, int rank, void *arg);

typedef struct th_opts {
	size_t arena_bytes; /* shmcoll_config.arena_bytes (0: library default) */
	int timeout_ms;     /* shmcoll_config.timeout_ms (0: library default) */
	int wall_ms;        /* deadline for the whole run; <= 0: 120 s */
	int grace_ms;       /* after the first failed rank, how long the others get; <= 0: 15 s */
} th_opts;

typedef struct th_rank_status {
	int done;   /* reaped (process) or joined (thread) */
	int code;   /* exit code or body return, -1 if none */
	int signo;  /* signal that ended the process, 0 if none */
	int killed; /* the harness killed it (deadline or grace expired) */
} th_rank_status;

typedef struct th_result {
	int nranks;
	int ok;        /* every rank finished with 0 */
	int timed_out; /* the wall deadline expired */
	int first_bad; /* rank that failed first, -1 if none */
	char job[64];
	th_rank_status rank[TH_MAX_RANKS];
	char summary[2048];
} th_result;

/* Fork nranks children; child i creates a communicator (rank i of nranks, a
 * job name unique to this call), runs body, destroys the communicator and
 * _exits with body's code. The parent reaps all of them before opts->wall_ms
 * (then SIGKILLs the rest). Returns 0 if every rank exited 0, 1 if not, or a
 * negative errno if the run could not be started; res is always filled. */
int th_run_ranks(int nranks, th_body_fn body, void *arg, const th_opts *opts, th_result *res);

/* The same with the ranks as threads of this process. A thread still running
 * at the deadline is left behind (detached; its state leaks) and reported. */
int th_run_threads(int nranks, th_body_fn body, void *arg, const th_opts *opts, th_result *res);

/* Records where this rank is (printf-style, one line); a rank that dies or
 * hangs has its last breadcrumb in the summary. th_check_run sets it. */
void th_breadcrumb(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A job name no other call in this or any concurrent test makes. */
void th_job_name(char *buf, size_t len);

/* Whether one process can read a sibling's memory with process_vm_readv, as the library's
 * single copies do between ranks (Yama's ptrace_scope 1 allows reading a child but not a
 * sibling; seccomp may forbid it), found without the library. */
int th_siblings_can_read(void);

/* Under ThreadSanitizer (the tsan stage runs the suites with thread cases) the
 * runs with ranks as single-threaded processes have nothing for it to check
 * and are slow there: suites leave them out with TH_PROCESSES_ONLY(). */
#if defined(__SANITIZE_THREAD__)
#define TH_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TH_UNDER_TSAN 1
#endif
#endif
#ifndef TH_UNDER_TSAN
#define TH_UNDER_TSAN 0
#endif
/* At the top of a Criterion test whose ranks are processes only. */
#define TH_PROCESSES_ONLY()                                                                        \
	do {                                                                                       \
		if (TH_UNDER_TSAN)                                                                 \
			cr_skip_test("ranks as processes only: nothing for ThreadSanitizer");      \
	} while (0)

/* Deterministic values: splitmix64 of (salt, rank, index). */
static inline uint64_t th_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static inline uint64_t th_hash(uint64_t salt, int rank, uint64_t idx)
{
	return th_mix(salt + (uint64_t)rank * 0x9e3779b97f4a7c15ull + idx * 0xd1b54a32d192ed03ull);
}

/* IEEE binary16 and bfloat16, written apart from the library: round to
 * nearest even, NaN stays a (quiet) NaN, overflow gives infinity. */
uint16_t th_f32_to_f16(float f);

/* Reduction inputs from a hash h, the same for every suite. Integers: any value of the type,
 * sign- or zero-extended to 64 bits, so SUM and PROD wrap and AVG needs the exact sum.
 * Floats keep every exact result exact in float32 in any order, so the contract's
 * "accumulate in at least float32, round once" has one answer: SUM/AVG multiples of 1/16 in
 * [-16, 16), exact in every float type (a sum over 8 ranks needs up to 12 significant bits,
 * so float16 and bfloat16 sums round once where a type-width accumulator would round at
 * every step); PROD {+-0.5, +-1, +-2} (|product| in [2^-8, 2^8]); MIN/MAX quarters in
 * [-8, 7.75]. th_store_float stores d as dt at dst (float16 and bfloat16 rounded once). */
uint64_t th_input_int(shmcoll_dtype dt, uint64_t h);
double th_input_float(shmcoll_op op, uint64_t h);
void th_store_float(shmcoll_dtype dt, void *dst, double d);
float th_f16_to_f32(uint16_t h);
uint16_t th_f32_to_bf16(float f);
float th_bf16_to_f32(uint16_t h);

const char *th_dtype_name(shmcoll_dtype dt);
const char *th_op_name(shmcoll_op op);
size_t th_dtype_size(shmcoll_dtype dt);
int th_dtype_is_float(shmcoll_dtype dt);
int th_dtype_is_signed(shmcoll_dtype dt);
/* One element at p as hex and as its value ("0x3f80 (1)"), for messages. */
void th_format_elem(shmcoll_dtype dt, const unsigned char *p, char *buf, size_t len);
/* The contract's valid (dtype, op) pairs: every op on integers, no bitwise op on floats. */
int th_op_valid(shmcoll_dtype dt, shmcoll_op op);

/* ---- one collective call, checked ---- */

typedef enum th_coll {
	TH_ALLREDUCE,
	TH_REDUCE,
	TH_BCAST,
	TH_ALLGATHER,
	TH_REDUCE_SCATTER,
	TH_GATHER,
	TH_SCATTER,
	TH_ALLTOALL,
	TH_BARRIER,
	TH_COLL_COUNT
} th_coll;

typedef enum th_variant {
	TH_OUT_OF_PLACE, /* separate buffers; at rooted non-roots a canary buffer */
	TH_IN_PLACE,     /* the contract's in-place form (bcast: the only form) */
	TH_NULL_NONROOT, /* out of place; NULL for the root-only buffer at non-roots */
	TH_VARIANT_COUNT
} th_variant;

/* Where the buffers come from: malloc or shmcoll_malloc (symmetric). The
 * in-place forms have one buffer: symmetric for BOTH, SEND and RECV (which
 * then repeat BOTH) and for EVEN on even ranks. */
typedef enum th_sym {
	TH_SYM_NONE, /* both malloc */
	TH_SYM_BOTH, /* both symmetric */
	TH_SYM_EVEN, /* both symmetric on even ranks, both malloc on odd ranks */
	TH_SYM_SEND, /* sendbuf symmetric, recvbuf malloc */
	TH_SYM_RECV, /* sendbuf malloc, recvbuf symmetric */
	TH_SYM_COUNT
} th_sym;

typedef struct th_case {
	th_coll coll;
	shmcoll_dtype dtype;
	shmcoll_op op; /* reductions only */
	size_t count;  /* the count argument of the call */
	int root;      /* rooted collectives only */
	th_variant variant;
	th_sym sym;
	size_t misalign; /* bytes added to every buffer address: odd addresses */
	size_t skew;     /* plus skew * rank, so ranks' buffers sit at different offsets
	                  * (mod 64 in total) */
	int edge;        /* reductions: edge values (integer extremes; float
	                  * subnormals, -0, overflow by rounding, infinities) */
} th_case;

/* Codes th_check_run returns (and bodies pass on as exit codes). */
#define TH_E_CALL      10 /* the collective returned an error */
#define TH_E_OUT       11 /* an output element is wrong */
#define TH_E_GUARD     12 /* bytes just outside a buffer were written */
#define TH_E_SEND      13 /* the send data (const) changed */
#define TH_E_UNTOUCHED 14 /* a buffer this rank must not receive into was written */
#define TH_E_NOMEM     15 /* malloc in the test failed */
#define TH_E_SYMALLOC  16 /* shmcoll_malloc failed */
#define TH_E_SYMFREE   17 /* shmcoll_free failed */
#define TH_E_BARRIER   18 /* a rank left a barrier before a peer arrived */
#define TH_E_SETUP     19 /* the case does not fit the checker's buffers */

const char *th_coll_name(th_coll c);
const char *th_sym_name(th_sym s);
/* Whether sym is worth running with variant v (SEND and RECV repeat BOTH in place). */
int th_sym_useful(th_variant v, th_sym sym);
int th_coll_rooted(th_coll c);
int th_coll_reduces(th_coll c);
/* Variants that apply to c (filled into v, at most TH_VARIANT_COUNT); returns how many. */
int th_coll_variants(th_coll c, th_variant *v);
/* Elements in the larger of a rank's send and receive regions for count. */
size_t th_coll_region_elems(th_coll c, size_t count, int size);

/* Buffer sizes of one rank, in elements, for one call. */
typedef struct th_shape {
	size_t sendn, recvn; /* regions passed as sendbuf / recvbuf (bcast: buf is recv) */
	int has_input;       /* sendn (bcast: recvn) elements of real data, else canaries */
	int has_output;      /* recvn elements are this rank's result, else untouched */
} th_shape;
void th_shape_of(th_coll coll, size_t count, int rank, int size, int root, th_shape *sh);

/* The blocking call of coll on c with these arguments (op for the reductions, root for the
 * rooted ones): its result. */
int th_call(shmcoll_comm *c, th_coll coll, const void *s, void *r, size_t n, shmcoll_dtype dt,
            shmcoll_op op, int root);
/* A count whose largest region exceeds 2 * arena_bytes (the smallest such,
 * plus 13 elements so it divides evenly by nothing in particular). */
size_t th_large_count(th_coll c, shmcoll_dtype dt, int size, size_t arena_bytes);
/* Whether a matrix runs its largest counts (past the arena: the chunked protocols) for
 * (dt, op). In a plain build, every pair. Under a sanitizer (TH_SANITIZED, set by
 * tests/meson.build), which makes those cases 2-10x slower and whose findings there depend
 * on the element size, not on the type or the op: one type of each size (int8, float16,
 * float32, float64) with SUM. Every pair still runs at the smaller counts, 4097 (every
 * kernel with a tail, at an odd address too) included. */
int th_large_wanted(shmcoll_dtype dt, shmcoll_op op);

typedef struct th_checker th_checker;

/* Per-rank buffers for cases whose regions hold at most max_bytes (ordinary)
 * and sym_bytes (symmetric, 0 for none; collective: shmcoll_malloc on every
 * rank). Returns NULL and sets *err (TH_E_NOMEM / TH_E_SYMALLOC) on failure. */
th_checker *th_check_new(shmcoll_comm *comm, size_t max_bytes, size_t sym_bytes, int *err);
/* ck (created with sym_bytes 0) uses from's symmetric buffers, which may
 * belong to another communicator: for ck's communicator they are ordinary
 * memory. Free ck before from. */
void th_check_borrow_sym(th_checker *ck, const th_checker *from);
/* Collective when sym_bytes > 0. Returns 0 or TH_E_SYMFREE. */
int th_check_free(th_checker *ck);
/* Whether the symmetric buffers hold kc's regions (true for TH_SYM_NONE). */
int th_check_sym_fits(const th_checker *ck, const th_case *kc);
/* Runs kc (same kc on every rank, in the same order) and checks this rank's
 * buffers. Returns 0 or a TH_E_* code; prints the failing case, the first bad
 * index and got/want to stderr (at most a few lines per checker). */
int th_check_run(th_checker *ck, const th_case *kc);
/* The first failure code seen by this checker, 0 if none. */
int th_check_first_error(const th_checker *ck);

/* rounds barriers; before barrier k (1-based) the rank stores k into its own
 * slot of counters (stride 16 ints, shared by all ranks), after it checks that
 * every slot holds k or k + 1. Returns 0 or TH_E_BARRIER / TH_E_CALL. */
int th_barrier_rounds(shmcoll_comm *comm, int rank, int size, _Atomic int *counters, int rounds);
#define TH_BARRIER_STRIDE 16

#endif
