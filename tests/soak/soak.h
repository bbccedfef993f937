/* soak.h - shmcoll-soak: the call sequence every rank draws from the shared
 * seed (draw.c) and the checked execution of one call (check.c). Public API
 * plus the test harness's helpers (tests/harness.h) only. */
#ifndef SHMCOLL_TESTS_SOAK_H
#define SHMCOLL_TESTS_SOAK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tests/harness.h"

#define SOAK_GUARD        64               /* canary bytes before and after every buffer */
#define SOAK_AREA_EXTRA   (3 * SOAK_GUARD) /* guards plus up to SOAK_GUARD - 1 of offset */
#define SOAK_SYM_MAX      (1536u * 1024)   /* largest symmetric buffer: two fit 4 MiB */
#define SOAK_SYM_MIN      4096u            /* below this a failed shmcoll_malloc is an error */
#define SOAK_REALLOC_ODDS 64               /* one call in this many first reallocates */
#define SOAK_MAX_REPORTS  10               /* mismatch reports printed per rank */

/* The sequence: splitmix64 over a counter. Every rank holds one, seeded
 * alike, and draws from it at the same points, so all draw the same calls. */
struct soak_rng {
	uint64_t state;
};

static inline uint64_t soak_next(struct soak_rng *r)
{
	r->state += 0x9e3779b97f4a7c15ull;
	return th_mix(r->state);
}

/* Call flags. */
#define SOAK_IN_PLACE 1u /* the contract's in-place form (rooted: at the root; bcast: always) */
#define SOAK_NULL     2u /* NULL for the root-only buffer at non-roots */

/* One call, the same on every rank. */
struct soak_call {
	uint64_t index; /* 0-based position in the sequence */
	uint64_t salt;  /* inputs: th_hash(salt, rank, element), salt from (seed, index) */
	th_coll coll;
	shmcoll_dtype dtype;
	shmcoll_op op; /* reductions only */
	size_t count;  /* the count argument */
	int root;      /* rooted collectives only */
	unsigned flags;
	th_sym sym;      /* buffer kind (malloc when the region exceeds the symmetric size) */
	size_t misalign; /* bytes added to every buffer address */
	size_t skew;     /* plus skew * rank (mod SOAK_GUARD in total) */
};

struct soak_limits {
	int size;
	size_t max_bytes; /* largest region (send or receive buffer) of one rank */
};

/* Draws the next call of the sequence into c (c->index is the caller's). */
void soak_draw(struct soak_rng *rng, const struct soak_limits *lim, uint64_t seed,
               struct soak_call *c);
/* Whether the sequence reallocates the symmetric buffers before the next call. */
int soak_draw_realloc(struct soak_rng *rng);

/* Bytes of results the call delivers, summed over all ranks. */
uint64_t soak_result_bytes(const struct soak_call *c, int size);
/* "allreduce dtype=int8 op=sum count=7 root=- flags=in-place buffers=malloc
 * misalign=0+0*rank" into buf. */
void soak_describe(const struct soak_call *c, char *buf, size_t len);

/* Hidden self-test: SHMCOLL_SOAK_CORRUPT=K[:R[:guard]] damages, on rank R
 * (every rank when absent), one received element (or, with "guard", one
 * canary byte after the receive buffer) of the first call at index >= K
 * that has a receive buffer on that rank, after the call returned and
 * before it is checked. The run must then fail. */
struct soak_corrupt {
	int armed;
	uint64_t at;
	int rank; /* -1: every rank */
	int guard;
};

/* A rank's checking state: its buffers and what it has seen. */
struct soak_state {
	shmcoll_comm *comm;
	int rank, size;
	uint64_t seed;
	size_t cap;                      /* region bytes of the ordinary areas */
	unsigned char *a, *b;            /* ordinary areas: cap + SOAK_AREA_EXTRA */
	unsigned char *in, *ex;          /* this rank's input, expected output: cap */
	unsigned char *sa, *sb, *spacer; /* symmetric areas; spacer shifts their offsets */
	size_t symcap;                   /* region bytes of sa and sb */
	_Atomic uint32_t *bar;           /* barrier counters, stride SOAK_BAR_STRIDE, shared */
	int bar_shared;                  /* bar is seen by every rank (else only checked locally) */
	uint32_t nbarrier;               /* barriers so far */
	struct soak_corrupt corrupt;
	int reports; /* mismatch reports printed */
	uint64_t sym_reallocs, sym_shrinks;
};
#define SOAK_BAR_STRIDE 16 /* 64 bytes: one counter per cache line */

/* Allocates the ordinary buffers (cap bytes of region each). 0 or -ENOMEM. */
int soak_state_init(struct soak_state *st, shmcoll_comm *comm, uint64_t seed, size_t cap);
/* Collective: frees the symmetric buffers and draws and allocates new ones
 * (halving on a failure every rank sees alike). 0, or a negative errno when
 * not even SOAK_SYM_MIN bytes could be had; the message is on stderr. */
int soak_sym_realloc(struct soak_state *st, struct soak_rng *rng, size_t max_bytes);
/* Collective: frees the symmetric buffers. 0 or the first error. */
int soak_sym_free(struct soak_state *st);
void soak_state_fini(struct soak_state *st);

/* Runs c on this rank and checks everything this rank can see: the result,
 * the canaries around every buffer, the send data, buffers that must stay
 * untouched, and after a barrier its peers' arrival counters. Returns 0
 * when all is right, 1 on a mismatch (reported on stderr), or the call's
 * negative errno (reported on stderr; nothing was checked). */
int soak_run(struct soak_state *st, const struct soak_call *c);

#endif
