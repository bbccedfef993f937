/* matrix.h - the correctness matrix of one collective, run by every rank of
 * a communicator in lockstep: used by test_coll (forked ranks) and by the
 * contract program (ranks started by shmcoll-run). Public API only. */
#ifndef SHMCOLL_TESTS_MATRIX_H
#define SHMCOLL_TESTS_MATRIX_H

#include <stdatomic.h>
#include <stddef.h>

#include "tests/harness.h"

/* A small arena keeps "larger than the arena" cheap: 64 KiB holds the
 * header, control lines, staging slots and the per-rank symmetric heaps of
 * up to 8 ranks (at P=8, as measured on the library: 1.75 KiB staging halves
 * and a 3.5 KiB heap per rank). Symmetric buffers live in that heap, so the
 * small-arena job uses them only for counts {0, 1, 7}; a second job with an
 * arena sized for them runs symmetric buffers at count 4097 and at a ~300 KB
 * message (several staging chunks read in place). Counts larger than the
 * arena are by definition ordinary buffers only. Integer inputs are
 * arbitrary values of the type (SUM/PROD wrap, AVG needs the exact sum);
 * float inputs are chosen so every result is exact or rounds exactly once
 * (see gen_float() in harness.c). */
#define ARENA_SMALL     (96 * 1024)
#define TIMEOUT_MS      30000
#define SMALL_SYM_COUNT 7
#define MID_COUNT       4097
#define SYM_LARGE_BYTES 300000
#define BARRIER_ROUNDS  2000

enum th_phase {
	PHASE_SMALL_ARENA, /* malloc: {0, 1, 7, 4097, large}; symmetric: {0, 1, 7} */
	PHASE_SYM,         /* symmetric (every kind but malloc): {4097, ~300 KB} */
};

struct th_matrix {
	th_coll coll;
	enum th_phase phase;
	_Atomic int *counters; /* barrier: one slot per rank, shared by the forked ranks */
};

/* A th_body_fn: arg is a const struct th_matrix *. Returns 0 or the first
 * TH_E_* code this rank saw. */
int th_matrix_body(shmcoll_comm *comm, int rank, void *arg);

/* The arena the PHASE_SYM job needs for coll at P ranks. */
size_t th_matrix_sym_arena(th_coll c, int P);

#endif
