/* copy.c - the copy mode of shmcoll-bench: one-way copy bandwidth from rank to rank through a
 * ring of chunks in the job's arena (private buffer -> ring -> private buffer), with ordinary
 * and non-temporal stores, for pairs of ranks, or for two threads of one rank at P = 1.
 *
 * The ring of a pair, its protocol:
 *  1. Chunk k (k = 1, 2, ... over the whole run: the numbers only grow) goes through slot
 *     (k - 1) % slots.
 *  2. The sender waits until consumed >= k - slots (the slot's last chunk has been read),
 *     copies its private bytes into the slot, and release-stores ready = k.
 *  3. The receiver waits until ready >= k (acquire), copies the slot into its private buffer,
 *     and release-stores consumed = k: the slot is the sender's again.
 *  Each side remembers the partner's flag as last read, and reads it again only when that is
 *  not enough, so the flag lines cross between the cores no more often than they must.
 *
 * Where it lives: every rank allocates the same block (shmcoll_malloc is symmetric): a line for
 * ready, a line for consumed, then the slots. A pair uses the sender's slots and ready line and
 * the receiver's consumed line, so each flag sits in its writer's partition, one writer per
 * line. The slots are the sender's, as the library's own staging slots belong to the rank that
 * writes them and peers pull from them; the sender first touches them too (bench_shared_alloc
 * zeroes each rank's own partition), which on a NUMA machine puts them next to the writer. */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bench/mem.h"
#include "bench/plot.h"
#include "lib/kernels/copy.h"
#include "shm/arena.h"

#define MODE       "copy"
#define MAX_CHUNKS 16
#define MAX_SLOTS  1024
#define MAX_REPS   1000
#define MAX_BYTES  ((size_t)1 << 34) /* 16 GiB of message: beyond it, a typo */
#define MAX_CHUNK  ((size_t)1 << 30)

enum { ROLE_IDLE, ROLE_SEND, ROLE_RECV };

enum { ST_NORMAL, ST_NT, ST_NT_RING, ST_COUNT };

static const char *const store_names[ST_COUNT] = {"normal", "nt", "nt-ring"};

struct opts {
	size_t minb, maxb;
	size_t chunk[MAX_CHUNKS];
	int nchunks;
	int store[ST_COUNT];
	int nstores;
	int slots, reps;
	const char *cpus, *csv, *plot;
};

/* The head of every rank's block: ready is written by the sender of the pair whose slots
 * follow, consumed by the receiver that owns this block; each alone on its line, and the two
 * lines 128 bytes apart, so a prefetcher that fetches lines in pairs (as AMD's and Intel's
 * do) never drags one flag along with the other, which matters at P = 1 where both are in
 * the one block. */
struct ring_hdr {
	_Alignas(64) _Atomic uint64_t ready;
	char pad0[120];
	_Atomic uint64_t consumed;
	char pad1[120];
};
static_assert(offsetof(struct ring_hdr, consumed) == 128, "the flags two lines apart");
static_assert(sizeof(struct ring_hdr) == 256, "the slots start on a line");

/* P = 1: what the sender (thread 0) and the receiver (thread 1) share to meet between
 * measurements and agree on results; side[i] is written by thread i only. */
#define TEAM_VALS 4

struct tside {
	_Alignas(64) _Atomic uint64_t arrived;
	double v[TEAM_VALS];
	int flag;
};

struct tshare {
	struct tside side[2];
};

/* What rank 0 (thread 0) keeps: per size, per column (stores x chunk), per pair (0 = the
 * aggregate, 1 + k = pair k), the best and median GB/s. */
struct results {
	int nsizes, ncols, npairs;
	size_t *bytes;
	long *iters;
	double *best, *median;
	double *times; /* (1 + npairs) x reps: one point's measurements */
};

/* One participant: a rank, or one of the two threads at P = 1. */
struct part {
	const struct opts *o;
	shmcoll_comm *comm;
	struct tshare *ts; /* P = 1 only */
	int threads;
	int id; /* the rank, or the thread (0 sends, 1 receives) */
	int role;
	int pair, npairs;
	_Atomic uint64_t *ready, *consumed;
	uint8_t *ring;
	uint8_t *buf;        /* the private message buffer (max-bytes) */
	uint64_t seq;        /* chunks this side has moved so far */
	uint64_t seen;       /* the partner's flag as last read */
	uint64_t tseq;       /* P = 1: the meetings so far */
	double *vals;        /* npairs: one measurement's times */
	double *sum;         /* npairs */
	struct results *res; /* id 0 only */
	const int *cpu_of;   /* the CPU of each rank (thread) */
	int broken;          /* a partner may be anywhere: no more collectives */
	int status;
};

void bench_copy_usage(FILE *f)
{
	fprintf(
	    f,
	    "  " PROG " copy [OPTIONS]\n"
	    "      One-way copy bandwidth from rank to rank through the arena: the sender\n"
	    "      copies a message from its private buffer chunk by chunk into a ring of\n"
	    "      slots in its own part of the arena and publishes each chunk (a release\n"
	    "      store of a growing sequence number); the receiver waits for it (acquire),\n"
	    "      copies it into its private buffer and hands the slot back (another\n"
	    "      sequence number, on a line of its own). Under the launcher:\n"

	    "        shmcoll-run -n P " PROG " copy [OPTIONS]\n"
	    "      Ranks 0->1, 2->3, ... are pairs that run at the same time, rank i on the\n"
	    "      i-th CPU of --cpus (an odd last rank idles); P = 1 runs the receiver as a\n"
	    "      second thread on the second CPU (so it needs two). The table: GB/s =\n"
	    "      1e9 message bytes per second one way, best (median) over the reps, a row\n"
	    "      per message size, a column per (stores, chunk); with several pairs it is\n"
	    "      their aggregate: all pairs' bytes over the slowest pair's time.\n"
	    "      --min-bytes N    smallest message (default 4K); sizes double up to\n"
	    "      --max-bytes N    the largest (default 256M); both at least 64\n"
	    "      --chunk LIST     chunk (slot) sizes, multiples of 64 (default 8K,32K,128K);\n"
	    "                       a chunk larger than the message is cut to its size\n"
	    "      --slots N        slots in each ring, 1..%d (default 8)\n"
	    "      --stores LIST    normal:  memcpy into the ring and out of it;\n"
	    "                       nt:      the receiver writes its private buffer with\n"
	    "                                non-temporal stores (shmcoll__copy_nt, the way\n"
	    "                                the library writes huge results), the sender\n"
	    "                                copies into the ring with memcpy;\n"
	    "                       nt-ring: as nt, and the sender's copy into the ring\n"
	    "                                is non-temporal too (the ring then comes\n"
	    "                                from memory, not from the sender's cache)\n"
	    "                       (default normal,nt)\n"
	    "      --reps N         measurements per point, 1..%d (default 7), each of\n"
	    "                       clamp(2^26 / bytes, 3, 10000) messages back to back, timed\n"
	    "                       from the sender's start to the receiver's last byte, after\n"
	    "                       one checked message and one warm-up; best and median kept\n"
	    "      --cpus LIST      the CPUs of ranks 0, 1, ... (of the two threads at P = 1);\n"
	    "                       default the CPUs the job may use\n"
	    "      --csv FILE       write mode,partner,pair,sender_cpu,receiver_cpu,stores,\n"
	    "                       chunk_bytes,slots,bytes,iters,reps,best_GBps,median_GBps:\n"
	    "                       a row per pair and one with pair=all (the aggregate);\n"
	    "                       partner is threads or processes, chunk_bytes as given\n"
	    "      --plot FILE.png  draw GB/s (best) against message size with gnuplot\n"
	    "      Each rank's arena heap must hold 256 + slots x the largest chunk bytes;\n"
	    "      when SHMCOLL_ARENA_BYTES is not set the benchmark sizes the arena itself.\n",
	    MAX_SLOTS, MAX_REPS);
}

/* Splits a comma-separated list into at most max items of at most 31 characters. The number
 * of items, or -1. */
static int split(const char *s, char items[][32], int max)
{
	const char *p = s, *end;
	int n = 0;
	size_t len;

	for (;;) {
		end = strchr(p, ',');
		len = end ? (size_t)(end - p) : strlen(p);
		if (len == 0 || len >= 32 || n == max)
			return -1;
		memcpy(items[n], p, len);
		items[n++][len] = 0;
		if (!end)
			return n;
		p = end + 1;
	}
}

static int parse_chunks(const char *v, struct opts *o)
{
	char items[MAX_CHUNKS][32];
	int n, i, j;

	n = split(v, items, MAX_CHUNKS);
	if (n < 0)
		return bench_usage_error(MODE ": bad --chunk '%s' (a list of up to %d sizes, such "
		                              "as 8K,32K,128K)",
		                         v, MAX_CHUNKS);
	for (i = 0; i < n; i++) {
		if (bench_parse_size(items[i], &o->chunk[i]))
			return bench_usage_error(MODE ": bad --chunk size '%s'", items[i]);
		if (o->chunk[i] < 64 || o->chunk[i] % 64 || o->chunk[i] > MAX_CHUNK)
			return bench_usage_error(MODE ": --chunk %s: a chunk is a multiple of 64 "
			                              "bytes, from 64 to 1G",
			                         items[i]);
		for (j = 0; j < i; j++)
			if (o->chunk[j] == o->chunk[i])
				return bench_usage_error(MODE ": --chunk lists %s twice", items[i]);
	}
	o->nchunks = n;
	return 0;
}

static int parse_stores(const char *v, struct opts *o)
{
	char items[ST_COUNT][32];
	int n, i, j, s;

	n = split(v, items, ST_COUNT);
	if (n < 0)
		return bench_usage_error(MODE ": bad --stores '%s' (a list of normal, nt, nt-ring)",
		                         v);
	for (i = 0; i < n; i++) {
		for (s = 0; s < ST_COUNT && strcmp(items[i], store_names[s]); s++)
			;
		if (s == ST_COUNT)
			return bench_usage_error(MODE ": unknown --stores '%s' (normal, nt or "
			                              "nt-ring)",
			                         items[i]);
		for (j = 0; j < i; j++)
			if (o->store[j] == s)
				return bench_usage_error(MODE ": --stores lists %s twice",
				                         items[i]);
		o->store[i] = s;
	}
	o->nstores = n;
	return 0;
}

static int parse_count(const char *a, const char *v, int lo, int hi, int *out)
{
	double n;

	if (bench_parse_positive(v, &n) || n != (double)(long)n || n < lo || n > hi)
		return bench_usage_error(MODE ": bad %s '%s' (%d..%d)", a, v, lo, hi);
	*out = (int)n;
	return 0;
}

/* 0, -1 after --help, or EXIT_USAGE. Every rank parses the same line the same way. */
static int parse(int argc, char **argv, struct opts *o)
{
	const char *a, *v;
	int i, rc;

	*o = (struct opts){
	    .minb = 4096,
	    .maxb = (size_t)256 << 20,
	    .chunk = {8192, 32768, 131072},
	    .nchunks = 3,
	    .store = {ST_NORMAL, ST_NT},
	    .nstores = 2,
	    .slots = 8,
	    .reps = 7,
	};
	for (i = 1; i < argc; i++) {
		a = argv[i];
		if (bench_help(a))
			return -1;
		if (strcmp(a, "--min-bytes") && strcmp(a, "--max-bytes") && strcmp(a, "--chunk") &&
		    strcmp(a, "--slots") && strcmp(a, "--stores") && strcmp(a, "--reps") &&
		    strcmp(a, "--cpus") && strcmp(a, "--csv") && strcmp(a, "--plot"))
			return bench_usage_error("unknown option '%s' in the copy mode", a);
		v = bench_optarg(argc, argv, &i);
		if (!v)
			return EXIT_USAGE;
		rc = 0;
		if (!strcmp(a, "--min-bytes")) {
			if (bench_parse_size(v, &o->minb))
				return bench_usage_error(MODE ": bad --min-bytes '%s'", v);
		} else if (!strcmp(a, "--max-bytes")) {
			if (bench_parse_size(v, &o->maxb))
				return bench_usage_error(MODE ": bad --max-bytes '%s'", v);
		} else if (!strcmp(a, "--chunk")) {
			rc = parse_chunks(v, o);
		} else if (!strcmp(a, "--stores")) {
			rc = parse_stores(v, o);
		} else if (!strcmp(a, "--slots")) {
			rc = parse_count(a, v, 1, MAX_SLOTS, &o->slots);
		} else if (!strcmp(a, "--reps")) {
			rc = parse_count(a, v, 1, MAX_REPS, &o->reps);
		} else if (!strcmp(a, "--cpus")) {
			o->cpus = v;
		} else if (!strcmp(a, "--csv")) {
			o->csv = v;
		} else {
			o->plot = v;
		}
		if (rc)
			return rc;
	}
	if (o->minb < 64 || o->maxb < 64)
		return bench_usage_error(MODE ": messages are at least 64 bytes (--min-bytes %zu, "
		                              "--max-bytes %zu)",
		                         o->minb, o->maxb);
	if (o->minb > o->maxb)
		return bench_usage_error(MODE ": --min-bytes %zu is larger than --max-bytes %zu",
		                         o->minb, o->maxb);
	if (o->maxb > MAX_BYTES)
		return bench_usage_error(MODE ": --max-bytes %zu is more than the 16G this mode "
		                              "sends",
		                         o->maxb);
	return 0;
}

static size_t largest_chunk(const struct opts *o)
{
	size_t m = 0;
	int i;

	for (i = 0; i < o->nchunks; i++)
		if (o->chunk[i] > m)
			m = o->chunk[i];
	return m;
}

/* The bytes of each rank's block: the flags, then slots x the largest chunk. */
static size_t block_bytes(const struct opts *o)
{
	return sizeof(struct ring_hdr) + (size_t)o->slots * largest_chunk(o);
}

/* --- meeting the partners between measurements ------------------------------------------ */

static int team_sync(struct part *p)
{
	struct tside *me, *other;
	int rc;

	if (!p->threads) {
		rc = shmcoll_barrier(p->comm);
		if (rc < 0) {
			p->broken = 1;
			fprintf(stderr, PROG ": " MODE ": rank %d: shmcoll_barrier: %s\n", p->id,
			        shmcoll_last_error(p->comm));
			return -1;
		}
		return 0;
	}
	me = &p->ts->side[p->id];
	other = &p->ts->side[!p->id];
	p->tseq++;
	/* Pairs with the other thread's bench_wait_ge below: what this thread wrote before the
	 * meeting (its side's values) is visible to it after. */
	atomic_store_explicit(&me->arrived, p->tseq, memory_order_release);
	if (bench_wait_ge(&other->arrived, p->tseq) < 0) {
		p->broken = 1;
		fprintf(stderr, PROG ": " MODE ": the %s thread waited %d s for the other one\n",
		        p->id ? "receiver" : "sender", BENCH_WAIT_S);
		return -1;
	}
	return 0;
}

/* v[0..n) summed over the participants, in place on every one. */
static int team_sum(struct part *p, double *v, int n)
{
	const struct tside *other;
	int i, rc;

	if (!p->threads) {
		rc = shmcoll_allreduce(v, p->sum, (size_t)n, SHMCOLL_FLOAT64, SHMCOLL_SUM, p->comm);
		if (rc < 0) {
			p->broken = 1;
			fprintf(stderr, PROG ": " MODE ": rank %d: shmcoll_allreduce: %s\n", p->id,
			        shmcoll_last_error(p->comm));
			return -1;
		}
		memcpy(v, p->sum, (size_t)n * sizeof(*v));
		return 0;
	}
	other = &p->ts->side[!p->id];
	memcpy(p->ts->side[p->id].v, v, (size_t)n * sizeof(*v));
	if (team_sync(p) < 0)
		return -1;
	for (i = 0; i < n; i++)
		v[i] += other->v[i];
	/* Both have read before either writes its side again. */
	return team_sync(p);
}

/* The largest *flag of the participants, on every one. */
static int team_max(struct part *p, int *flag)
{
	int32_t in = *flag, out;
	int rc, o;

	if (!p->threads) {
		rc = shmcoll_allreduce(&in, &out, 1, SHMCOLL_INT32, SHMCOLL_MAX, p->comm);
		if (rc < 0) {
			p->broken = 1;
			fprintf(stderr, PROG ": " MODE ": rank %d: shmcoll_allreduce: %s\n", p->id,
			        shmcoll_last_error(p->comm));
			return -1;
		}
		*flag = out;
		return 0;
	}
	p->ts->side[p->id].flag = *flag;
	if (team_sync(p) < 0)
		return -1;
	o = p->ts->side[!p->id].flag;
	if (o > *flag)
		*flag = o;
	return team_sync(p);
}

/* --- the ring ------------------------------------------------------------------------------ */

static int stalled(struct part *p, const char *what)
{
	p->broken = 1;
	fprintf(stderr,
	        PROG ": " MODE ": pair %d: the %s waited %d s for %s (chunk %llu): is the %s "
	             "alive and running?\n",
	        p->pair, p->role == ROLE_SEND ? "sender" : "receiver", BENCH_WAIT_S, what,
	        (unsigned long long)p->seq, p->role == ROLE_SEND ? "receiver" : "sender");
	return -1;
}

/* Steps 1-2 of the protocol for bytes of the private buffer, in chunks of chunk bytes. */
static int send_msg(struct part *p, size_t bytes, size_t chunk, int nt)
{
	uint64_t slots = (uint64_t)p->o->slots, k;
	uint8_t *slot;
	size_t off, n;

	for (off = 0; off < bytes; off += n) {
		n = bytes - off < chunk ? bytes - off : chunk;
		k = ++p->seq;
		if (k > p->seen + slots) {
			if (bench_wait_ge(p->consumed, k - slots) < 0)
				return stalled(p, "a free slot");
			/* Pairs with the receiver's release of consumed in recv_msg: its reads
			 * of the slot are over before this copy overwrites it. */
			p->seen = atomic_load_explicit(p->consumed, memory_order_acquire);
		}
		slot = p->ring + (size_t)((k - 1) % slots) * chunk;
		if (nt)
			shmcoll__copy_nt(slot, p->buf + off, n); /* ends with an sfence */
		else
			memcpy(slot, p->buf + off, n);
		/* Pairs with the acquire in recv_msg: the chunk is there before its number. */
		atomic_store_explicit(p->ready, k, memory_order_release);
	}
	return 0;
}

/* Step 3 of the protocol. */
static int recv_msg(struct part *p, size_t bytes, size_t chunk, int nt)
{
	uint64_t slots = (uint64_t)p->o->slots, k;
	const uint8_t *slot;
	size_t off, n;

	for (off = 0; off < bytes; off += n) {
		n = bytes - off < chunk ? bytes - off : chunk;
		k = ++p->seq;
		if (k > p->seen) {
			if (bench_wait_ge(p->ready, k) < 0)
				return stalled(p, "the next chunk");
			/* Pairs with the sender's release of ready in send_msg. */
			p->seen = atomic_load_explicit(p->ready, memory_order_acquire);
		}
		slot = p->ring + (size_t)((k - 1) % slots) * chunk;
		if (nt)
			shmcoll__copy_nt(p->buf + off, slot, n);
		else
			memcpy(p->buf + off, slot, n);
		/* Pairs with the sender's acquire of consumed in send_msg. */
		atomic_store_explicit(p->consumed, k, memory_order_release);
	}
	return 0;
}

/* --- the checked message --------------------------------------------------------------- */

/* splitmix64's finalizer: every word of a checked message differs, and from one point to the
 * next, so neither a stale chunk nor a misplaced one passes. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void fill(uint8_t *b, size_t n, uint64_t salt)
{
	size_t i, w = n / 8;
	uint64_t v;

	for (i = 0; i < w; i++) {
		v = mix(salt + i);
		memcpy(b + 8 * i, &v, 8);
	}
	if (n % 8) {
		v = mix(salt + w);
		memcpy(b + 8 * w, &v, n % 8);
	}
}

/* The offset of the first byte that differs from fill(salt), or n. */
static size_t check(const uint8_t *b, size_t n, uint64_t salt, unsigned *got, unsigned *want)
{
	uint8_t e[8];
	size_t i, j, len;
	uint64_t v;

	for (i = 0; i < n; i += 8) {
		v = mix(salt + i / 8);
		memcpy(e, &v, 8);
		len = n - i < 8 ? n - i : 8;
		if (!memcmp(b + i, e, len))
			continue;
		for (j = 0; b[i + j] == e[j]; j++)
			;
		*got = b[i + j];
		*want = e[j];
		return i + j;
	}
	return n;
}

/* --- the sweep ----------------------------------------------------------------------------- */

static long iterations(size_t bytes)
{
	size_t it = ((size_t)1 << 26) / bytes;

	return it < 3 ? 3 : it > 10000 ? 10000 : (long)it;
}

static double *at(const struct results *r, double *a, int size, int col, int pair)
{
	return a + ((size_t)size * (size_t)r->ncols + (size_t)col) * (size_t)(1 + r->npairs) +
	       (size_t)pair;
}

static void print_header(const struct part *p);
static void print_row(const struct part *p, int size);

/* One message, checked by the receiver. 0, EXIT_INVALID or EXIT_FAIL, the same on every
 * participant. */
static int checked_message(struct part *p, size_t bytes, size_t chunk, int store, uint64_t salt)
{
	unsigned got = 0, want = 0;
	size_t off;
	int bad = 0;
	char b[32];

	if (p->role == ROLE_SEND) {
		fill(p->buf, bytes, salt);
		if (send_msg(p, bytes, chunk, store == ST_NT_RING) < 0)
			return EXIT_FAIL;
	} else if (p->role == ROLE_RECV) {
		if (recv_msg(p, bytes, chunk, store != ST_NORMAL) < 0)
			return EXIT_FAIL;
		/* The tests' proof that this check can fail: one byte off in the middle. */
		if (bench_fault(MODE))
			p->buf[bytes / 2] ^= 1;
		off = check(p->buf, bytes, salt, &got, &want);
		if (off < bytes) {
			fprintf(
			    stderr,
			    PROG ": " MODE ": VALIDATION FAILED pair %d (%s %d -> %d), %s "
			         "message (%zu bytes), chunk %zu, stores %s: first wrong byte at "
			         "offset %zu (chunk %zu of the message): got 0x%02x, want 0x%02x\n",
			    p->pair, p->threads ? "thread" : "rank", p->threads ? 0 : 2 * p->pair,
			    p->threads ? 1 : 2 * p->pair + 1, bench_bytes_str(bytes, b, sizeof(b)),
			    bytes, chunk, store_names[store], off, off / chunk, got, want);
			bad = EXIT_INVALID;
		}
	}
	if (team_max(p, &bad) < 0)
		return EXIT_FAIL;
	return bad;
}

/* One measurement: iters messages back to back; elapsed time per pair in p->vals, on every
 * participant. */
static int measure(struct part *p, size_t bytes, size_t chunk, int store, long iters)
{
	double t0;
	long i;

	memset(p->vals, 0, (size_t)p->npairs * sizeof(*p->vals));
	if (team_sync(p) < 0)
		return -1;
	/* The sender's start and the receiver's end, on the one CLOCK_MONOTONIC of the machine:
	 * the sum over the participants is each pair's time. */
	if (p->role == ROLE_SEND) {
		t0 = bench_now();
		for (i = 0; i < iters; i++)
			if (send_msg(p, bytes, chunk, store == ST_NT_RING) < 0)
				return -1;
		p->vals[p->pair] = -t0;
	} else if (p->role == ROLE_RECV) {
		for (i = 0; i < iters; i++)
			if (recv_msg(p, bytes, chunk, store != ST_NORMAL) < 0)
				return -1;
		p->vals[p->pair] = bench_now();
	}
	return team_sum(p, p->vals, p->npairs);
}

/* Runs on every participant: the same points in the same order. An exit code. */
static int sweep(struct part *p)
{
	const struct opts *o = p->o;
	struct results *r = p->res;
	int size, si, ci, col, rep, k, fail = 0, rc;
	size_t bytes, chunk;
	uint64_t combo = 0;
	double worst, *t;
	long iters;
	char b[32];

	if (p->role != ROLE_IDLE) {
		/* Allocated and first touched here, pinned, so its pages are this CPU's. */
		if (posix_memalign((void **)&p->buf, 4096, o->maxb) != 0) {
			p->buf = NULL;
			fprintf(stderr,
			        PROG ": " MODE ": %s %d: cannot allocate its %s private buffer "
			             "(--max-bytes)\n",
			        p->threads ? "thread" : "rank", p->id,
			        bench_bytes_str(o->maxb, b, sizeof(b)));
			fail = EXIT_FAIL;
		} else {
			memset(p->buf, 0, o->maxb);
		}
	}
	if (team_max(p, &fail) < 0)
		return EXIT_FAIL;
	if (fail)
		return fail;
	if (r)
		print_header(p);

	for (size = 0, bytes = o->minb; bytes <= o->maxb; bytes *= 2, size++) {
		iters = iterations(bytes);
		for (si = 0; si < o->nstores; si++) {
			for (ci = 0; ci < o->nchunks; ci++) {
				col = si * o->nchunks + ci;
				chunk = o->chunk[ci] < bytes ? o->chunk[ci] : bytes;
				combo++;
				if (team_sync(p) < 0)
					return EXIT_FAIL;
				rc = checked_message(p, bytes, chunk, o->store[si],
				                     mix((combo << 40) ^ bytes));
				if (rc)
					return rc;
				/* Warm-up: the ring and both buffers as the timed messages find
				 * them. */
				if (measure(p, bytes, chunk, o->store[si], 1) < 0)
					return EXIT_FAIL;
				for (rep = 0; rep < o->reps; rep++) {
					if (measure(p, bytes, chunk, o->store[si], iters) < 0)
						return EXIT_FAIL;
					if (!r)
						continue;
					worst = 0;
					for (k = 0; k < p->npairs; k++) {
						r->times[(size_t)(1 + k) * (size_t)o->reps +
						         (size_t)rep] = p->vals[k];
						if (p->vals[k] > worst)
							worst = p->vals[k];
					}
					r->times[rep] = worst;
				}
				if (!r)
					continue;
				for (k = 0; k <= p->npairs; k++) {
					double vol = (double)bytes * (double)iters *
					             (k == 0 ? (double)p->npairs : 1.0);

					t = r->times + (size_t)k * (size_t)o->reps;
					*at(r, r->best, size, col, k) =
					    vol / bench_min(t, o->reps) / 1e9;
					*at(r, r->median, size, col, k) =
					    vol / bench_median(t, o->reps) / 1e9;
				}
			}
		}
		if (r) {
			r->bytes[size] = bytes;
			r->iters[size] = iters;
			print_row(p, size);
		}
	}
	return 0;
}

/* --- output (rank 0) ----------------------------------------------------------------------- */

#define COLW 14

static void cpu_list(const struct part *p, int which, char *s, size_t len)
{
	size_t used = 0;
	int k;

	s[0] = 0;
	for (k = 0; k < p->npairs && used < len; k++)
		used += (size_t)snprintf(s + used, len - used, "%s%d", k ? "," : "",
		                         p->cpu_of[2 * k + which]);
}

static void print_header(const struct part *p)
{
	const struct opts *o = p->o;
	char b[32], c[32], snd[256], rcv[256];
	int si, ci;

	cpu_list(p, 0, snd, sizeof(snd));
	cpu_list(p, 1, rcv, sizeof(rcv));
	printf(MODE ": one-way copy, private buffer -> ring of %d chunk slots in the arena -> "
	            "private buffer, %s\n",
	       o->slots,
	       p->threads ? "threads (P = 1: the receiver is a thread of rank 0)" : "processes");
	if (p->npairs == 1)
		printf("sender on CPU %s -> receiver on CPU %s", snd, rcv);
	else
		printf("%d pairs (rank 2k -> 2k+1) at once, senders on CPUs %s -> receivers on "
		       "CPUs %s",
		       p->npairs, snd, rcv);
	if (!p->threads && shmcoll_comm_size(p->comm) % 2)
		printf("; rank %d idles", shmcoll_comm_size(p->comm) - 1);
	printf("\nmessages %s .. %s, each point best (median) of %d reps of clamp(2^26/bytes, "
	       "3, 10000) messages back to back\n",
	       bench_bytes_str(o->minb, b, sizeof(b)), bench_bytes_str(o->maxb, c, sizeof(c)),
	       o->reps);
	printf("GB/s = 1e9 message bytes per second, one way%s\n",
	       p->npairs > 1 ? "; aggregate: all pairs' bytes / the slowest pair's time" : "");
	printf("stores: normal = memcpy both ways; nt = non-temporal stores into the receiver's "
	       "buffer; nt-ring = into the ring too\n\n");
	printf("%-9s", "stores");
	for (si = 0; si < o->nstores; si++)
		for (ci = 0; ci < o->nchunks; ci++)
			printf("%*s", COLW, store_names[o->store[si]]);
	printf("\n%-9s", "chunk");
	for (si = 0; si < o->nstores; si++)
		for (ci = 0; ci < o->nchunks; ci++)
			printf("%*s", COLW, bench_bytes_str(o->chunk[ci], b, sizeof(b)));
	printf("\nmessage\n");
	fflush(stdout);
}

static void print_row(const struct part *p, int size)
{
	const struct results *r = p->res;
	char b[32], cell[40];
	int col;

	printf("%-9s", bench_bytes_str(r->bytes[size], b, sizeof(b)));
	for (col = 0; col < r->ncols; col++) {
		snprintf(cell, sizeof(cell), "%.1f (%.1f)", *at(r, r->best, size, col, 0),
		         *at(r, r->median, size, col, 0));
		printf("%*s", COLW, cell);
	}
	printf("\n");
	fflush(stdout);
}

/* Writes the CSV into f (opened before the measurements, so a bad path fails at once) and
 * closes it. */
static int write_csv(const struct part *p, FILE *f, const char *path)
{
	const struct opts *o = p->o;
	const struct results *r = p->res;
	char snd[256], rcv[256], pair[16];
	int size, si, ci, col, k, j;

	fprintf(f, "mode,partner,pair,sender_cpu,receiver_cpu,stores,chunk_bytes,slots,bytes,"
	           "iters,reps,best_GBps,median_GBps\n");
	/* The aggregate row names every pair's CPUs, ';'-separated (one pair: just its own). */
	for (size = 0; size < r->nsizes; size++)
		for (si = 0; si < o->nstores; si++)
			for (ci = 0; ci < o->nchunks; ci++) {
				col = si * o->nchunks + ci;
				for (k = 0; k <= r->npairs; k++) {
					if (k == 0) {
						snprintf(pair, sizeof(pair), "all");
						cpu_list(p, 0, snd, sizeof(snd));
						cpu_list(p, 1, rcv, sizeof(rcv));
						for (j = 0; snd[j]; j++)
							if (snd[j] == ',')
								snd[j] = ';';
						for (j = 0; rcv[j]; j++)
							if (rcv[j] == ',')
								rcv[j] = ';';
					} else {
						snprintf(pair, sizeof(pair), "%d", k - 1);
						snprintf(snd, sizeof(snd), "%d",
						         p->cpu_of[2 * (k - 1)]);
						snprintf(rcv, sizeof(rcv), "%d",
						         p->cpu_of[2 * (k - 1) + 1]);
					}
					fprintf(
					    f, MODE ",%s,%s,%s,%s,%s,%zu,%d,%zu,%ld,%d,%.3f,%.3f\n",
					    p->threads ? "threads" : "processes", pair, snd, rcv,
					    store_names[o->store[si]], o->chunk[ci], o->slots,
					    r->bytes[size], r->iters[size], o->reps,
					    *at(r, r->best, size, col, k),
					    *at(r, r->median, size, col, k));
				}
			}
	if (fclose(f) != 0) {
		fprintf(stderr, PROG ": writing %s failed: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int plot(const struct part *p, const char *path)
{
	const struct opts *o = p->o;
	const struct results *r = p->res;
	struct bench_caches caches;
	char *script = NULL, b[32], snd[256], rcv[256];
	size_t len = 0, lo = r->bytes[0], hi = r->bytes[r->nsizes - 1];
	int size, si, ci, col, rc;
	FILE *f;

	/* Only the cache levels inside the plotted sizes: a mark beyond the range would
	 * stretch it. */
	bench_caches(&caches);
	if (caches.l1d < lo || caches.l1d > hi)
		caches.l1d = 0;
	if (caches.l2 < lo || caches.l2 > hi)
		caches.l2 = 0;
	if (caches.l3 < lo || caches.l3 > hi)
		caches.l3 = 0;
	f = open_memstream(&script, &len);
	if (!f) {
		fprintf(stderr, PROG ": --plot: %s\n", strerror(errno));
		return -1;
	}
	cpu_list(p, 0, snd, sizeof(snd));
	cpu_list(p, 1, rcv, sizeof(rcv));
	fprintf(f, "set terminal pngcairo size 1000,640 enhanced font ',10'\nset output ");
	bench_gp_quote(f, path);
	fprintf(f,
	        "\nset title \"" PROG " copy: private -> arena ring of %d slots -> private, "
	        "one way, %s, CPU %s -> %s%s, best of %d\" noenhanced\n",
	        o->slots, p->threads ? "threads" : "processes", snd, rcv,
	        p->npairs > 1 ? ", aggregate of the pairs" : "", o->reps);
	fprintf(f,
	        "set xlabel 'message size'\nset ylabel 'GB/s (1e9 message bytes/s)'\n"
	        "set logscale x 2\nset grid ytics\nset key outside right top vertical noenhanced\n"
	        "set yrange [0:*]\nset xrange [%g:%g]\nset xtics rotate by -45 (",
	        (double)lo / 1.25, (double)hi * 1.25);
	for (size = 0; size < r->nsizes; size++)
		fprintf(f, "%s\"%s\" %zu", size ? ", " : "",
		        bench_bytes_str(r->bytes[size], b, sizeof(b)), r->bytes[size]);
	fprintf(f, ")\n");
	bench_plot_cache_marks(f, &caches);
	for (col = 0; col < r->ncols; col++) {
		fprintf(f, "$c%d << EOD\n", col);
		for (size = 0; size < r->nsizes; size++)
			fprintf(f, "%zu %.3f\n", r->bytes[size], *at(r, r->best, size, col, 0));
		fprintf(f, "EOD\n");
	}
	fprintf(f, "plot");
	for (si = 0; si < o->nstores; si++)
		for (ci = 0; ci < o->nchunks; ci++) {
			col = si * o->nchunks + ci;
			fprintf(
			    f,
			    "%s $c%d using 1:2 with linespoints lw 2 dt %d title '%s, %s chunks'",
			    col ? "," : "", col, si + 1, store_names[o->store[si]],
			    bench_bytes_str(o->chunk[ci], b, sizeof(b)));
		}
	fprintf(f, "\n");
	if (fclose(f) != 0) {
		free(script);
		fprintf(stderr, PROG ": --plot: out of memory\n");
		return -1;
	}
	rc = bench_gnuplot(script);
	free(script);
	return rc;
}

/* --- the job ------------------------------------------------------------------------------- */

static void *receiver_thread(void *arg)
{
	struct part *p = arg;
	char err[256];
	int fail = 0;

	if (bench_pin(p->cpu_of[1], err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": " MODE ": receiver thread: %s\n", err);
		fail = EXIT_FAIL;
	}
	if (team_max(p, &fail) < 0 || fail) {
		p->status = EXIT_FAIL;
		return NULL;
	}
	p->status = sweep(p);
	return NULL;
}

static int alloc_results(struct results *r, const struct opts *o, int npairs)
{
	size_t bytes, cells;

	memset(r, 0, sizeof(*r));
	for (bytes = o->minb; bytes <= o->maxb; bytes *= 2)
		r->nsizes++;
	r->ncols = o->nstores * o->nchunks;
	r->npairs = npairs;
	cells = (size_t)r->nsizes * (size_t)r->ncols * (size_t)(1 + npairs);
	r->bytes = calloc((size_t)r->nsizes, sizeof(*r->bytes));
	r->iters = calloc((size_t)r->nsizes, sizeof(*r->iters));
	r->best = calloc(cells, sizeof(*r->best));
	r->median = calloc(cells, sizeof(*r->median));
	r->times = calloc((size_t)(1 + npairs) * (size_t)o->reps, sizeof(*r->times));
	return r->bytes && r->iters && r->best && r->median && r->times ? 0 : -1;
}

static void free_results(struct results *r)
{
	free(r->bytes);
	free(r->iters);
	free(r->best);
	free(r->median);
	free(r->times);
}

int bench_copy_main(int argc, char **argv)
{
	struct opts o;
	struct bench_cpus cpus;
	struct results res;
	struct tshare ts;
	struct part me, rx;
	shmcoll_comm *comm = NULL;
	const char *env = getenv("SHMCOLL_SIZE");
	long P = env && *env ? strtol(env, NULL, 10) : 1;
	void *block = NULL;
	FILE *csv = NULL;
	pthread_t thread;
	char what[64], err[256];
	int rc, rank, size, fail = 0, status = 0;

	rc = parse(argc, argv, &o);
	if (rc < 0) /* --help */
		return 0;
	if (P < 1)
		P = 1;
	if (rc == 0 && P > BENCH_MAX_CPUS)
		rc = bench_usage_error(MODE ": %ld ranks need %ld CPUs", P, P);
	if (P == 1)
		snprintf(what, sizeof(what), "the sender and receiver threads");
	else
		snprintf(what, sizeof(what), "%ld ranks", P);
	if (rc == 0)
		rc = bench_cpus_for(MODE, o.cpus, P == 1 ? 2 : (int)P, what, &cpus);
	if (rc == 0 && bench_fit_arena(MODE, block_bytes(&o)) < 0)
		rc = EXIT_FAIL;
	/* Every rank found the same; they meet so that rank 0 has said why before any exits. */
	status = bench_mem_init(MODE, &comm);
	if (status)
		return rc ? rc : status;
	if (rc) {
		rc = bench_stop_together(comm, rc);
		shmcoll_comm_destroy(comm);
		return rc;
	}
	rank = shmcoll_comm_rank(comm);
	size = shmcoll_comm_size(comm);
	if (size != P) { /* SHMCOLL_SIZE, which the CPUs were counted for, is the job's size */
		fprintf(stderr, PROG ": " MODE ": the job has %d ranks, SHMCOLL_SIZE says %ld\n",
		        size, P);
		shmcoll_comm_destroy(comm);
		return EXIT_FAIL;
	}
	memset(&res, 0, sizeof(res));
	memset(&ts, 0, sizeof(ts));

	/* Pinned before anything is touched, so the pages land next to their CPU. */
	if (bench_pin(cpus.cpu[rank], err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": " MODE ": rank %d: %s\n", rank, err);
		fail = EXIT_FAIL;
	}
	block = bench_shared_alloc(comm, block_bytes(&o));
	if (!block) {
		if (rank == 0)
			fprintf(stderr,
			        PROG ": " MODE
			             ": cannot place a ring of %d x %zu-byte slots in the "
			             "arena: %s (raise SHMCOLL_ARENA_BYTES)\n",
			        o.slots, largest_chunk(&o), shmcoll_last_error(comm));
		rc = bench_stop_together(comm, EXIT_FAIL);
		shmcoll_comm_destroy(comm);
		return rc;
	}

	me = (struct part){
	    .o = &o,
	    .comm = comm,
	    .threads = size == 1,
	    .id = rank,
	    .role = size == 1                      ? ROLE_SEND
	            : rank == size - 1 && size % 2 ? ROLE_IDLE
	            : rank % 2                     ? ROLE_RECV
	                                           : ROLE_SEND,
	    .pair = size == 1 ? 0 : rank / 2,
	    .npairs = size == 1 ? 1 : size / 2,
	    .cpu_of = cpus.cpu,
	    .ts = &ts,
	};
	if (size == 1) {
		struct ring_hdr *h = block;

		me.ready = &h->ready;
		me.consumed = &h->consumed;
		me.ring = (uint8_t *)block + sizeof(struct ring_hdr);
	} else if (me.role == ROLE_SEND) {
		struct ring_hdr *mine = block, *peer = bench_shared_peer(comm, block, rank + 1);

		me.ready = &mine->ready;
		me.consumed = &peer->consumed;
		me.ring = (uint8_t *)block + sizeof(struct ring_hdr);
	} else if (me.role == ROLE_RECV) {
		struct ring_hdr *mine = block, *peer = bench_shared_peer(comm, block, rank - 1);

		me.ready = &peer->ready;
		me.consumed = &mine->consumed;
		me.ring = (uint8_t *)peer + sizeof(struct ring_hdr);
	}
	me.vals = calloc((size_t)me.npairs, sizeof(*me.vals));
	me.sum = calloc((size_t)me.npairs, sizeof(*me.sum));
	if (!me.vals || !me.sum || (rank == 0 && alloc_results(&res, &o, me.npairs) < 0)) {
		fprintf(stderr, PROG ": " MODE ": rank %d: out of memory\n", rank);
		fail = EXIT_FAIL;
	}
	if (rank == 0) {
		me.res = &res;
		if (o.csv) {
			csv = fopen(o.csv, "w");
			if (!csv) {
				fprintf(stderr, PROG ": " MODE ": cannot write %s: %s\n", o.csv,
				        strerror(errno));
				fail = EXIT_FAIL;
			}
		}
	}
	/* Every rank stops here together if one cannot go on. */
	if (!me.threads) {
		if (team_max(&me, &fail) < 0)
			fail = EXIT_FAIL;
	}
	if (fail) {
		status = fail;
		goto out;
	}

	if (me.threads) {
		rx = me;
		rx.id = 1;
		rx.role = ROLE_RECV;
		rx.res = NULL;
		rx.vals = calloc(1, sizeof(*rx.vals));
		rx.sum = NULL;
		if (!rx.vals || pthread_create(&thread, NULL, receiver_thread, &rx) != 0) {
			fprintf(stderr, PROG ": " MODE ": cannot start the receiver thread\n");
			free(rx.vals);
			status = EXIT_FAIL;
			goto out;
		}
		if (team_max(&me, &fail) < 0 || fail)
			status = EXIT_FAIL;
		else
			status = sweep(&me);
		pthread_join(thread, NULL);
		if (rx.status > status)
			status = rx.status;
		free(rx.buf);
		free(rx.vals);
	} else {
		status = sweep(&me);
	}

	if (status == 0 && rank == 0) {
		if (csv) {
			rc = write_csv(&me, csv, o.csv);
			csv = NULL;
			if (rc < 0)
				status = EXIT_FAIL;
		}
		if (o.plot && plot(&me, o.plot) < 0)
			status = EXIT_FAIL;
	}
out:
	/* shmcoll_free is a collective: not when a partner may never come to it. */
	if (me.threads || !me.broken)
		shmcoll_free(comm, block);
	if (csv) /* the run failed before the CSV was written */
		fclose(csv);
	free(me.buf);
	free(me.vals);
	free(me.sum);
	free_results(&res);
	shmcoll_comm_destroy(comm);
	return status;
}
