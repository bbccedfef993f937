/* mpi_check.c - every collective libshmcoll-mpi.so intercepts, called as MPI_X
 * (through the interposer when it is preloaded) and as PMPI_X (the reference,
 * which nothing intercepts) on the same inputs, the outputs compared byte for
 * byte: many sizes, types, ops and roots, out of place and in place, on
 * MPI_COMM_WORLD, MPI_COMM_SELF, a dup, and a split communicator made and
 * freed over and over; calls whose ranks pass different datatypes of one
 * signature (derived on the root, predefined elsewhere; vectors sent and
 * ints received), which must take one path on every rank; the non-blocking
 * forms, several outstanding at once and completed through every wait and
 * test, their count and displacement arrays zeroed once they started where
 * the interposer takes them; plus cases the interposer must hand to PMPI
 * (reductions on derived types, user-defined ops, 16-bit integers, MINLOC and
 * MAXLOC beyond their size limit).
 *
 * A plain MPI program, built against each MPI. Inputs are small integers, so
 * every reduction is exact in any order and the byte comparison is fair;
 * the LOC ops' pairs are compared by their value and index only, since an
 * MPI writes no padding and need not copy it.
 * Prints what differed, and one summary line on rank 0; exits 1 on any
 * difference. Rank 0 also prints, per collective, how many of the MPI_X
 * calls (over all ranks and threads) the interposer should run through
 * shmcoll and how many it should hand to PMPI, in the form of its own
 * SHMCOLL_MPI_STATS=1 lines ("mpi_check: expect MPI_X N via shmcoll, M
 * fallback"), for run.sh to hold its statistics to.
 *
 * usage: mpi_check [--quick] [--loops N] [--threads]
 *   --quick    a type of each kind and width, not every one, on
 *              MPI_COMM_WORLD, and less elsewhere (for oversubscribed runs,
 *              where an MPI call may wait out a scheduler time slice)
 *   --loops N  how often the split communicator is made, used and freed (20)
 *   --threads  MPI_THREAD_MULTIPLE, and two threads running collectives at
 *              once, each on its own communicator */
#include <fcntl.h>
#include <float.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "mpi/colls.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_ELEMS     70000
#define MAX_EXTENT    32 /* the widest type below (MPI_LONG_DOUBLE_INT) */
#define SENTINEL      0xa5
#define MAX_REPORTS   10 /* differences printed per rank */

enum kind {
	K_SINT,  /* signed integer */
	K_UINT,  /* unsigned integer */
	K_FLOAT, /* float or double */
	K_PAIR,  /* a pair type of the LOC ops: (value, index), see struct pair */
	K_BYTES, /* data movement only */
};

/* A datatype as the test sees it: scalars of one kind and size, nscal of
 * them per element, elements extent bytes apart. */
struct type {
	const char *name;
	MPI_Datatype dt;
	enum kind kind;
	int scal; /* bytes per scalar */
	int nscal;
	int extent;
};

enum op_class { OC_ARITH, OC_PROD, OC_BITS, OC_LOGIC, OC_LOC };

struct op {
	const char *name;
	MPI_Op op;
	enum op_class cls;
};

/* One (type, op) pair of a reduction case. */
struct red {
	const struct type *t;
	const struct op *o;
};

/* What one thread checks with: its communicator and buffers. */
struct ctx {
	MPI_Comm comm;
	int self_tag; /* fill_move's tag on MPI_COMM_SELF, this context's own: its messages
	                 to itself never meet another thread's */
	const char *comm_name;
	int rank, size;
	int world_rank;
	uint8_t *send, *ref, *got, *aux, *tmp;
	uint8_t *send2, *ref2, *got2; /* a second call's, outstanding with the first */
	size_t cap;                   /* bytes in each buffer */
	unsigned long checks, fails;
	/* MPI_X calls the interposer should take ([c][0]) and pass on ([c][1]). */
	unsigned long want[C_COUNT][2];
	int alone; /* every rank a node of its own: the interposer takes nothing */
	int spans; /* the communicator spans (simulated) nodes: scans go to PMPI */
	unsigned seed;
};

static int quick;
static MPI_Datatype t_contig2, t_vector;
static MPI_Op op_user;

static struct type types[] = {
    {"int8", MPI_INT8_T, K_SINT, 1, 1, 1},
    {"signed_char", MPI_SIGNED_CHAR, K_SINT, 1, 1, 1},
    {"uint8", MPI_UINT8_T, K_UINT, 1, 1, 1},
    {"unsigned_char", MPI_UNSIGNED_CHAR, K_UINT, 1, 1, 1},
    {"int", MPI_INT, K_SINT, sizeof(int), 1, sizeof(int)},
    {"int32", MPI_INT32_T, K_SINT, 4, 1, 4},
    {"unsigned", MPI_UNSIGNED, K_UINT, sizeof(unsigned), 1, sizeof(unsigned)},
    {"uint32", MPI_UINT32_T, K_UINT, 4, 1, 4},
    {"long", MPI_LONG, K_SINT, sizeof(long), 1, sizeof(long)},
    {"long_long", MPI_LONG_LONG, K_SINT, sizeof(long long), 1, sizeof(long long)},
    {"int64", MPI_INT64_T, K_SINT, 8, 1, 8},
    {"unsigned_long", MPI_UNSIGNED_LONG, K_UINT, sizeof(long), 1, sizeof(long)},
    {"unsigned_long_long", MPI_UNSIGNED_LONG_LONG, K_UINT, sizeof(long long), 1, sizeof(long long)},
    {"uint64", MPI_UINT64_T, K_UINT, 8, 1, 8},
    {"aint", MPI_AINT, K_SINT, sizeof(MPI_Aint), 1, sizeof(MPI_Aint)},
    {"count", MPI_COUNT, K_SINT, sizeof(MPI_Count), 1, sizeof(MPI_Count)},
    {"float", MPI_FLOAT, K_FLOAT, 4, 1, 4},
    {"double", MPI_DOUBLE, K_FLOAT, 8, 1, 8},
};

/* Types shmcoll does not reduce: the interposer must pass them on. */
static struct type t_short = {"short", MPI_SHORT, K_SINT, sizeof(short), 1, sizeof(short)};
static struct type t_ushort = {"unsigned_short", MPI_UNSIGNED_SHORT, K_UINT, sizeof(short), 1,
                               sizeof(short)};
/* Open MPI 4.1 reduces MPI_OFFSET as unsigned: the interposer leaves it to
 * the MPI, whatever it does. */
static struct type t_offset = {"offset",           MPI_OFFSET, K_SINT,
                               sizeof(MPI_Offset), 1,          sizeof(MPI_Offset)};
/* The pair types of MPI_MINLOC and MPI_MAXLOC: MPI defines them as these C
 * structs, value then index (both of the value's type in the Fortran ones). */
struct pair {
	struct type t;          /* K_PAIR; scal: the value's bytes; extent: the struct's */
	enum kind vkind, kkind; /* the value's and the index's: K_SINT or K_FLOAT */
	int vbytes;             /* the value's bytes that mean something */
	int koff, kbytes;       /* the index: where, and its bytes */
};

/* x86's long double is 10 bytes of data in 16: the MPIs may leave the rest
 * as they find it. */
#define LDBL_BYTES (LDBL_MANT_DIG == 64 ? 10 : (int)sizeof(long double))
#define PAIR(name, dt, T, vkind, kkind, vbytes)                                                    \
	{                                                                                          \
		{name, dt, K_PAIR, sizeof(((struct T *)0)->v), 2, sizeof(struct T)}, vkind, kkind, \
		    vbytes, offsetof(struct T, k), sizeof(((struct T *)0)->k)                      \
	}
static struct pair pairs[] = {
    PAIR("float_int", MPI_FLOAT_INT, float_int, K_FLOAT, K_SINT, sizeof(float)),
    PAIR("double_int", MPI_DOUBLE_INT, double_int, K_FLOAT, K_SINT, sizeof(double)),
    PAIR("long_int", MPI_LONG_INT, long_int, K_SINT, K_SINT, sizeof(long)),
    PAIR("2int", MPI_2INT, int_int, K_SINT, K_SINT, sizeof(int)),
    PAIR("short_int", MPI_SHORT_INT, short_int, K_SINT, K_SINT, sizeof(short)),
    PAIR("long_double_int", MPI_LONG_DOUBLE_INT, long_double_int, K_FLOAT, K_SINT, LDBL_BYTES),
    /* Fortran's, usable from C: INTEGER, REAL and DOUBLE PRECISION are
     * int, float and double with gfortran's defaults. */
    PAIR("2integer", MPI_2INTEGER, int_int, K_SINT, K_SINT, sizeof(int)),
    PAIR("2real", MPI_2REAL, float_float, K_FLOAT, K_FLOAT, sizeof(float)),
    PAIR("2double_precision", MPI_2DOUBLE_PRECISION, double_double, K_FLOAT, K_FLOAT,
         sizeof(double)),
};
#undef PAIR

/* Set up in main (derived types are made at run time). */
static struct type t_contig2_int = {"contiguous(2,int)", MPI_DATATYPE_NULL, K_SINT, sizeof(int), 2,
                                    2 * sizeof(int)};

/* Data movement: every type moves as bytes through shmcoll, packed where its
 * data has holes or is derived other than as contiguous copies. */
static struct type move_types[] = {
    {"byte", MPI_BYTE, K_BYTES, 1, 1, 1},
    {"char", MPI_CHAR, K_BYTES, 1, 1, 1},
    {"short", MPI_SHORT, K_BYTES, sizeof(short), 1, sizeof(short)},
    {"int", MPI_INT, K_BYTES, sizeof(int), 1, sizeof(int)},
    {"double", MPI_DOUBLE, K_BYTES, 8, 1, 8},
    {"2int", MPI_2INT, K_BYTES, 2 * sizeof(int), 1, 2 * sizeof(int)},
    {"c_double_complex", MPI_C_DOUBLE_COMPLEX, K_BYTES, 16, 1, 16},
    /* Packed: a pair type with a hole (6 data bytes in 8), and two derived
     * types, one moved in place (contiguous) and one packed (vector). */
    {"short_int", MPI_SHORT_INT, K_BYTES, 8, 1, 8},
    {"contiguous(2,int)", MPI_DATATYPE_NULL, K_BYTES, 2 * sizeof(int), 1, 2 * sizeof(int)},
    {"vector(2,1,2,int)", MPI_DATATYPE_NULL, K_BYTES, 3 * sizeof(int), 1, 3 * sizeof(int)},
};

static struct op ops[] = {
    {"sum", MPI_SUM, OC_ARITH},   {"prod", MPI_PROD, OC_PROD},  {"min", MPI_MIN, OC_ARITH},
    {"max", MPI_MAX, OC_ARITH},   {"band", MPI_BAND, OC_BITS},  {"bor", MPI_BOR, OC_BITS},
    {"bxor", MPI_BXOR, OC_BITS},  {"land", MPI_LAND, OC_LOGIC}, {"lor", MPI_LOR, OC_LOGIC},
    {"lxor", MPI_LXOR, OC_LOGIC},
};
static struct op op_maxloc = {"maxloc", MPI_MAXLOC, OC_LOC};
static struct op op_minloc = {"minloc", MPI_MINLOC, OC_LOC};
static struct op op_usersum = {"user_sum", MPI_OP_NULL, OC_ARITH};

static const int sizes_full[] = {0, 1, 7, 1000, 70000};
static const int sizes_quick[] = {0, 7, 1000};

/* splitmix64: deterministic inputs from (seed, rank, index). */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t hash3(unsigned seed, int rank, size_t i)
{
	return mix(((uint64_t)seed << 40) ^ ((uint64_t)(unsigned)rank << 28) ^ (uint64_t)i);
}

static void put_scalar(const struct type *t, void *p, long long v, uint64_t bits)
{
	union {
		int8_t i8;
		int16_t i16;
		int32_t i32;
		int64_t i64;
		float f;
		double d;
	} u;

	if (t->kind == K_FLOAT) {
		if (t->scal == 4)
			u.f = (float)v;
		else
			u.d = (double)v;
		memcpy(p, &u, (size_t)t->scal);
		return;
	}
	/* Integers: two's complement, little or big end alike via the value. */
	switch (t->scal) {
	case 1:
		u.i8 = (int8_t)(bits ? bits : (uint64_t)v);
		break;
	case 2:
		u.i16 = (int16_t)(bits ? bits : (uint64_t)v);
		break;
	case 4:
		u.i32 = (int32_t)(bits ? bits : (uint64_t)v);
		break;
	default:
		u.i64 = (int64_t)(bits ? bits : (uint64_t)v);
		break;
	}
	memcpy(p, &u, (size_t)t->scal);
}

/* The pair type t is, or NULL. */
static const struct pair *pair_of(const struct type *t)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(pairs); i++)
		if (t == &pairs[i].t)
			return &pairs[i];
	return NULL;
}

/* A field of a pair: v in the field's type (kind, bytes), only the bytes
 * that mean something written. */
static void put_field(enum kind kind, int bytes, int used, void *p, long long v)
{
	struct type t = {"field", MPI_DATATYPE_NULL, kind, bytes, 1, bytes};
	long double ld = (long double)v;

	if (kind == K_FLOAT && bytes > (int)sizeof(double)) {
		memcpy(p, &ld, (size_t)used);
		return;
	}
	put_scalar(&t, p, v, 0);
}

static long double get_field(enum kind kind, int bytes, const void *p)
{
	union {
		int16_t i16;
		int32_t i32;
		int64_t i64;
		float f;
		double d;
		long double ld;
	} u;

	memcpy(&u, p, (size_t)bytes);
	if (kind == K_FLOAT)
		return bytes == 4 ? u.f : bytes == 8 ? u.d : u.ld;
	return bytes == 2 ? u.i16 : bytes == 4 ? u.i32 : (long double)u.i64;
}

/* n pairs of LOC input: values from only four (-1 .. 2), so that many
 * meet their equal and the index decides, and indexes from -4 .. 4 in no
 * relation to the rank, so that the least index is not simply the
 * first rank's. Padding stays SENTINEL. */
static void fill_pairs(struct ctx *x, const struct pair *p, uint8_t *buf, size_t n)
{
	size_t i, ext = (size_t)p->t.extent;

	memset(buf, SENTINEL, n * ext);
	for (i = 0; i < n; i++) {
		uint64_t h = hash3(x->seed, x->rank, i);

		put_field(p->vkind, p->t.scal, p->vbytes, buf + i * ext, (long long)(h % 4) - 1);
		put_field(p->kkind, p->kbytes, p->kbytes, buf + i * ext + p->koff,
		          (long long)((h >> 32) % 9) - 4);
	}
}

/* n elements of reduction input for op class cls on this rank. Values keep
 * every result exact and in range for up to 6 ranks: sums of [-4, 4],
 * products of mostly 1 with a few 2 and -1, logical 0/1, whole bit patterns
 * for the bitwise ops, pairs full of ties for the LOC ops. */
static void fill_red(struct ctx *x, const struct type *t, enum op_class cls, void *buf, size_t n)
{
	size_t i, k;
	uint8_t *b = buf;

	if (pair_of(t)) {
		fill_pairs(x, pair_of(t), buf, n);
		return;
	}
	memset(buf, SENTINEL, n * (size_t)t->extent);
	for (i = 0; i < n; i++) {
		for (k = 0; k < (size_t)t->nscal; k++) {
			uint64_t h = hash3(x->seed, x->rank, i * 2 + k);
			long long v;
			uint64_t bits = 0;

			switch (cls) {
			case OC_PROD:
				v = h % 8 == 0 ? 2 : (h % 3 == 0 && t->kind != K_UINT) ? -1 : 1;
				break;
			case OC_BITS:
				v = 0;
				bits = h | 1; /* non-zero: put_scalar takes bits */
				break;
			case OC_LOGIC: /* any integer, not only 0 and 1 */
				v = h % 4 == 0 ? 0 : (long long)(h % 5) + 1;
				if (t->kind == K_SINT && h % 3 == 0)
					v = -v;
				break;
			default:
				v = t->kind == K_UINT ? (long long)(h % 9) : (long long)(h % 9) - 4;
				break;
			}
			put_scalar(t, b + i * (size_t)t->extent + k * (size_t)t->scal, v, bits);
		}
	}
}

/* Data movement input: n elements of t, their data bytes random, the holes
 * of a type with holes SENTINEL as in every output buffer (MPI moves data,
 * not holes, so an in-place block copied in whole must carry the same). */
static void fill_move(struct ctx *x, const struct type *t, void *buf, size_t n, int tag)
{
	size_t bytes = n * (size_t)t->extent, i;

	for (i = 0; i < bytes; i++)
		x->tmp[i] = (uint8_t)hash3(x->seed + (unsigned)tag, x->rank, i);
	memset(buf, SENTINEL, bytes);
	PMPI_Sendrecv(x->tmp, (int)n, t->dt, 0, x->self_tag, buf, (int)n, t->dt, 0, x->self_tag,
	              MPI_COMM_SELF, MPI_STATUS_IGNORE);
}

static void compare(struct ctx *x, const char *what, const void *got, const void *want,
                    size_t bytes)
{
	const uint8_t *g = got, *w = want;
	size_t i;

	x->checks++;
	if (!bytes || memcmp(got, want, bytes) == 0)
		return;
	for (i = 0; i < bytes && g[i] == w[i]; i++)
		;
	if (x->fails++ < MAX_REPORTS)
		fprintf(stderr,
		        "mpi_check: rank %d (%d in %s): %s: byte %zu of %zu differs: got 0x%02x, "
		        "PMPI gave 0x%02x\n",
		        x->world_rank, x->rank, x->comm_name, what, i, bytes, g[i], w[i]);
}

/* Reduction results: n elements, then tail bytes after them. Pairs are
 * compared by their fields' meaningful bytes, not their padding. */
static void compare_red(struct ctx *x, const char *what, const struct type *t, const void *got,
                        const void *want, size_t n, size_t tail)
{
	const struct pair *p = pair_of(t);
	const uint8_t *g = got, *w = want;
	size_t ext = (size_t)t->extent, i;

	if (!p) {
		compare(x, what, got, want, n * ext + tail);
		return;
	}
	for (i = 0; i < n; i++, g += ext, w += ext) {
		if (!memcmp(g, w, (size_t)p->vbytes) &&
		    !memcmp(g + p->koff, w + p->koff, (size_t)p->kbytes))
			continue;
		x->checks++;
		if (x->fails++ < MAX_REPORTS)
			fprintf(stderr,
			        "mpi_check: rank %d (%d in %s): %s: pair %zu of %zu differs: got "
			        "(%Lg, %Lg), PMPI gave (%Lg, %Lg)\n",
			        x->world_rank, x->rank, x->comm_name, what, i, n,
			        get_field(p->vkind, p->t.scal, g),
			        get_field(p->kkind, p->kbytes, g + p->koff),
			        get_field(p->vkind, p->t.scal, w),
			        get_field(p->kkind, p->kbytes, w + p->koff));
		return;
	}
	compare(x, what, g, w, tail);
}

static void fail_rc(struct ctx *x, const char *what, int rc)
{
	x->checks++;
	if (rc == MPI_SUCCESS)
		return;
	if (x->fails++ < MAX_REPORTS)
		fprintf(stderr, "mpi_check: rank %d (%d in %s): %s returned %d\n", x->world_rank,
		        x->rank, x->comm_name, what, rc);
}

/* The roots tried: first, middle and last. */
static int roots(int size, int out[3])
{
	int n = 0, cand[3] = {0, size / 2, size - 1}, i, j, dup;

	for (i = 0; i < 3; i++) {
		for (dup = 0, j = 0; j < n; j++)
			dup |= out[j] == cand[i];
		if (!dup)
			out[n++] = cand[i];
	}
	return n;
}

/* Counts a call of c that the interposer should run through shmcoll (shm)
 * or hand to PMPI: on any intra-communicator, on one node or composed
 * across nodes, whatever the size, zero bytes included. */
static void expect(struct ctx *x, enum coll c, int shm)
{
	x->want[c][shm && !x->alone ? 0 : 1]++;
}

/* Whether SHMCOLL_MPI_NODE_SPLIT makes every rank of a communicator of size
 * n a node of its own, where the interposer leaves everything to PMPI: it
 * groups a communicator's ranks by their rank in it, k consecutive ones
 * ("k") or those equal modulo k ("cyclic:k"). */
static int every_rank_alone(int n)
{
	const char *e = getenv("SHMCOLL_MPI_NODE_SPLIT");
	int k;

	if (!e || !*e || n < 2)
		return 0;
	if (!strncmp(e, "cyclic:", 7))
		return (k = atoi(e + 7)) >= n; /* n nodes of one rank */
	return atoi(e) == 1;
}

/* Whether SHMCOLL_MPI_NODE_SPLIT makes a communicator of n ranks span
 * several nodes, where the interposer composes the nine, MPI_Allgatherv,
 * MPI_Reduce_scatter, MPI_Gatherv and MPI_Scatterv, and leaves MPI_Scan,
 * MPI_Exscan, MPI_Alltoallv and the non-blocking calls to PMPI. */
static int spans_nodes(int n)
{
	const char *e = getenv("SHMCOLL_MPI_NODE_SPLIT");

	if (!e || !*e || n < 2)
		return 0;
	if (!strncmp(e, "cyclic:", 7))
		return atoi(e + 7) >= 2; /* min(k, n) nodes */
	return n > atoi(e);
}

static int has_holes(const struct type *t)
{
	int size;

	MPI_Type_size(t->dt, &size);
	return size < t->extent;
}

/* The interposer reduces the types of types[] with the ops of ops[], and
 * the pair types with MINLOC and MAXLOC on a communicator within a node
 * while a rank gathers at most LOC_MAX_BYTES (P blocks of the most pairs a
 * rank gets: mpi/colls.h, in its arithmetic); the fallback cases of
 * red_cases use other types or ops. */
static int red_via_shm(const struct ctx *x, const struct red *r, size_t most)
{
	if (r->o->cls == OC_LOC)
		return pair_of(r->t) && !x->spans &&
		       most <=
		           LOC_MAX_BYTES(has_holes(r->t)) / (size_t)x->size / (size_t)r->t->extent;
	return r->t >= types && r->t < types + ARRAY_SIZE(types) && r->o >= ops &&
	       r->o < ops + ARRAY_SIZE(ops);
}

/* It moves every type, packing those that do not hold their data in order:
 * the path of a call may not depend on one rank's datatype. */
static int move_via_shm(const struct type *t)
{
	return t->dt != MPI_DATATYPE_NULL;
}

/* Reductions */

static void check_allreduce(struct ctx *x, const struct red *r, int n, const char *label)
{
	size_t bytes = (size_t)n * (size_t)r->t->extent;
	char what[160];
	int rc;

	fill_red(x, r->t, r->o->cls, x->send, (size_t)n);
	memset(x->ref, SENTINEL, bytes + 8);
	memset(x->got, SENTINEL, bytes + 8);
	PMPI_Allreduce(x->send, x->ref, n, r->t->dt, r->o->op, x->comm);
	rc = MPI_Allreduce(x->send, x->got, n, r->t->dt, r->o->op, x->comm);
	expect(x, C_ALLREDUCE, red_via_shm(x, r, (size_t)n));
	snprintf(what, sizeof(what), "MPI_Allreduce %s %s n=%d%s", r->t->name, r->o->name, n,
	         label);
	fail_rc(x, what, rc);
	compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 8);

	memcpy(x->got, x->send, bytes);
	rc = MPI_Allreduce(MPI_IN_PLACE, x->got, n, r->t->dt, r->o->op, x->comm);
	expect(x, C_ALLREDUCE, red_via_shm(x, r, (size_t)n));
	snprintf(what, sizeof(what), "MPI_Allreduce %s %s n=%d in place%s", r->t->name, r->o->name,
	         n, label);
	fail_rc(x, what, rc);
	compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 8);
}

static void check_reduce(struct ctx *x, const struct red *r, int n, int root, const char *label)
{
	size_t bytes = (size_t)n * (size_t)r->t->extent;
	int me = x->rank == root, rc;
	char what[160];

	fill_red(x, r->t, r->o->cls, x->send, (size_t)n);
	memset(x->ref, SENTINEL, bytes + 8);
	memset(x->got, SENTINEL, bytes + 8);
	/* recvbuf means nothing off the root: NULL there proves nobody writes it. */
	PMPI_Reduce(x->send, me ? x->ref : NULL, n, r->t->dt, r->o->op, root, x->comm);
	rc = MPI_Reduce(x->send, me ? x->got : NULL, n, r->t->dt, r->o->op, root, x->comm);
	expect(x, C_REDUCE, red_via_shm(x, r, (size_t)n));
	snprintf(what, sizeof(what), "MPI_Reduce %s %s n=%d root=%d%s", r->t->name, r->o->name, n,
	         root, label);
	fail_rc(x, what, rc);
	compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 8);

	memcpy(x->got, x->send, bytes);
	if (me)
		rc = MPI_Reduce(MPI_IN_PLACE, x->got, n, r->t->dt, r->o->op, root, x->comm);
	else
		rc = MPI_Reduce(x->send, NULL, n, r->t->dt, r->o->op, root, x->comm);
	expect(x, C_REDUCE, red_via_shm(x, r, (size_t)n));
	snprintf(what, sizeof(what), "MPI_Reduce %s %s n=%d root=%d in place%s", r->t->name,
	         r->o->name, n, root, label);
	fail_rc(x, what, rc);
	if (me)
		compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 8);
}

static void check_reduce_scatter_block(struct ctx *x, const struct red *r, int n, const char *label)
{
	size_t bytes = (size_t)n * (size_t)r->t->extent, all = bytes * (size_t)x->size;
	char what[160];
	int rc;

	fill_red(x, r->t, r->o->cls, x->send, (size_t)n * (size_t)x->size);
	memset(x->ref, SENTINEL, bytes + 8);
	memset(x->got, SENTINEL, bytes + 8);
	PMPI_Reduce_scatter_block(x->send, x->ref, n, r->t->dt, r->o->op, x->comm);
	rc = MPI_Reduce_scatter_block(x->send, x->got, n, r->t->dt, r->o->op, x->comm);
	expect(x, C_REDUCE_SCATTER_BLOCK, red_via_shm(x, r, (size_t)n));
	snprintf(what, sizeof(what), "MPI_Reduce_scatter_block %s %s n=%d%s", r->t->name,
	         r->o->name, n, label);
	fail_rc(x, what, rc);
	compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 8);

	/* In place: the input is all of recvbuf, the result its first block;
	 * MPI leaves the rest unspecified. */
	memcpy(x->got, x->send, all);
	rc = MPI_Reduce_scatter_block(MPI_IN_PLACE, x->got, n, r->t->dt, r->o->op, x->comm);
	expect(x, C_REDUCE_SCATTER_BLOCK, red_via_shm(x, r, (size_t)n));
	snprintf(what, sizeof(what), "MPI_Reduce_scatter_block %s %s n=%d in place%s", r->t->name,
	         r->o->name, n, label);
	fail_rc(x, what, rc);
	compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 0);
}

/* Prefix reductions: rank r gets the op over ranks 0..r (scan) or 0..r-1
 * (exscan, where rank 0's result is undefined and not compared). */
static void check_scan(struct ctx *x, const struct red *r, int n, int ex, const char *label)
{
	size_t bytes = (size_t)n * (size_t)r->t->extent;
	int cmp = !ex || x->rank > 0, rc;
	/* Exscan with a logical op goes to PMPI: its rank 1 gets rank 0's
	 * input unchanged, which the interposer's 0-or-1 inputs cannot give. */
	int shm = red_via_shm(x, r, (size_t)n) && !x->spans && !(ex && r->o->cls == OC_LOGIC);
	enum coll c = ex ? C_EXSCAN : C_SCAN;
	const char *name = ex ? "MPI_Exscan" : "MPI_Scan";
	char what[160];

	fill_red(x, r->t, r->o->cls, x->send, (size_t)n);
	memset(x->ref, SENTINEL, bytes + 8);
	memset(x->got, SENTINEL, bytes + 8);
	if (ex) {
		PMPI_Exscan(x->send, x->ref, n, r->t->dt, r->o->op, x->comm);
		rc = MPI_Exscan(x->send, x->got, n, r->t->dt, r->o->op, x->comm);
	} else {
		PMPI_Scan(x->send, x->ref, n, r->t->dt, r->o->op, x->comm);
		rc = MPI_Scan(x->send, x->got, n, r->t->dt, r->o->op, x->comm);
	}
	expect(x, c, shm);
	snprintf(what, sizeof(what), "%s %s %s n=%d%s", name, r->t->name, r->o->name, n, label);
	fail_rc(x, what, rc);
	if (cmp)
		compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 8);
	else
		compare(x, what, x->got + bytes, x->ref + bytes, 8);

	memcpy(x->got, x->send, bytes);
	if (ex)
		rc = MPI_Exscan(MPI_IN_PLACE, x->got, n, r->t->dt, r->o->op, x->comm);
	else
		rc = MPI_Scan(MPI_IN_PLACE, x->got, n, r->t->dt, r->o->op, x->comm);
	expect(x, c, shm);
	snprintf(what, sizeof(what), "%s %s %s n=%d in place%s", name, r->t->name, r->o->name, n,
	         label);
	fail_rc(x, what, rc);
	if (cmp)
		compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 8);
}

/* Reduce_scatter with counts that differ between ranks (some zero). */
static void check_reduce_scatter(struct ctx *x, const struct red *r, int n, const char *label)
{
	int counts[64], i, rc, shm, most = 0;
	size_t total = 0, mine, ext = (size_t)r->t->extent;
	char what[160];

	if (x->size > (int)ARRAY_SIZE(counts))
		return;
	for (i = 0; i < x->size; i++) {
		counts[i] = i % 3 == 1 ? n / 2 : i % 3 == 2 ? 0 : n;
		total += (size_t)counts[i];
		most = counts[i] > most ? counts[i] : most;
	}
	/* composed across nodes too, but for the LOC ops (red_via_shm) */
	shm = red_via_shm(x, r, (size_t)most);
	mine = (size_t)counts[x->rank] * ext;
	fill_red(x, r->t, r->o->cls, x->send, total);
	memset(x->ref, SENTINEL, mine + 8);
	memset(x->got, SENTINEL, mine + 8);
	PMPI_Reduce_scatter(x->send, x->ref, counts, r->t->dt, r->o->op, x->comm);
	rc = MPI_Reduce_scatter(x->send, x->got, counts, r->t->dt, r->o->op, x->comm);
	expect(x, C_REDUCE_SCATTER, shm);
	snprintf(what, sizeof(what), "MPI_Reduce_scatter %s %s n=%d%s", r->t->name, r->o->name, n,
	         label);
	fail_rc(x, what, rc);
	compare_red(x, what, r->t, x->got, x->ref, (size_t)counts[x->rank], 8);

	/* In place: the input is all of recvbuf, the result its first block. */
	memcpy(x->got, x->send, total * ext);
	rc = MPI_Reduce_scatter(MPI_IN_PLACE, x->got, counts, r->t->dt, r->o->op, x->comm);
	expect(x, C_REDUCE_SCATTER, shm);
	snprintf(what, sizeof(what), "MPI_Reduce_scatter %s %s n=%d in place%s", r->t->name,
	         r->o->name, n, label);
	fail_rc(x, what, rc);
	compare_red(x, what, r->t, x->got, x->ref, (size_t)counts[x->rank], 0);
}

/* A pair type by its handle (the last one if none is). */
static const struct pair *pair_by_dt(MPI_Datatype dt)
{
	size_t i = 0;

	while (i < ARRAY_SIZE(pairs) - 1 && pairs[i].t.dt != dt)
		i++;
	return &pairs[i];
}

/* The LOC ops' size limits (LOC_MAX_BYTES, mpi/colls.h), on a pair type with
 * holes and one without: the most pairs the interposer takes, and one more,
 * which it passes on. Both sides must count a limit alike, or the
 * statistics differ. A limit past what the buffers hold (MPICH's for holes)
 * is left out. */
static void check_loc_limit(struct ctx *x, const char *label)
{
	const struct pair *p[2] = {pair_by_dt(MPI_DOUBLE_INT), pair_by_dt(MPI_2INT)};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(p); i++) {
		struct red r = {&p[i]->t, i ? &op_maxloc : &op_minloc};
		int n =
		    (int)(LOC_MAX_BYTES(has_holes(r.t)) / (size_t)x->size / (size_t)r.t->extent);

		if (n >= MAX_ELEMS)
			continue;
		x->seed++;
		check_allreduce(x, &r, n, label);
		check_reduce_scatter(x, &r, n, label);
		check_allreduce(x, &r, n + 1, label);
		check_reduce_scatter(x, &r, n + 1, label);
	}
}

/* Data movement */

static void check_bcast(struct ctx *x, const struct type *t, int n, int root, const char *label)
{
	size_t bytes = (size_t)n * (size_t)t->extent;
	char what[160];
	int rc;

	if (x->rank == root)
		fill_move(x, t, x->ref, (size_t)n, 1);
	else
		memset(x->ref, SENTINEL, bytes);
	memset(x->ref + bytes, SENTINEL, 8);
	memcpy(x->got, x->ref, bytes + 8);
	PMPI_Bcast(x->ref, n, t->dt, root, x->comm);
	rc = MPI_Bcast(x->got, n, t->dt, root, x->comm);
	expect(x, C_BCAST, move_via_shm(t));
	snprintf(what, sizeof(what), "MPI_Bcast %s n=%d root=%d%s", t->name, n, root, label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, bytes + 8);
}

static void check_allgather(struct ctx *x, const struct type *t, int n, const char *label)
{
	size_t bytes = (size_t)n * (size_t)t->extent, all = bytes * (size_t)x->size;
	char what[160];
	int rc;

	fill_move(x, t, x->send, (size_t)n, 2);
	memset(x->ref, SENTINEL, all + 8);
	memset(x->got, SENTINEL, all + 8);
	PMPI_Allgather(x->send, n, t->dt, x->ref, n, t->dt, x->comm);
	rc = MPI_Allgather(x->send, n, t->dt, x->got, n, t->dt, x->comm);
	expect(x, C_ALLGATHER, move_via_shm(t));
	snprintf(what, sizeof(what), "MPI_Allgather %s n=%d%s", t->name, n, label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, all + 8);

	/* In place: this rank's block already sits in recvbuf; the send
	 * arguments are ignored. */
	memset(x->got, SENTINEL, all + 8);
	memcpy(x->got + (size_t)x->rank * bytes, x->send, bytes);
	rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x->got, n, t->dt, x->comm);
	expect(x, C_ALLGATHER, move_via_shm(t));
	snprintf(what, sizeof(what), "MPI_Allgather %s n=%d in place%s", t->name, n, label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, all + 8);
}

static void check_gather(struct ctx *x, const struct type *t, int n, int root, const char *label)
{
	size_t bytes = (size_t)n * (size_t)t->extent, all = bytes * (size_t)x->size;
	int me = x->rank == root, rc;
	char what[160];

	fill_move(x, t, x->send, (size_t)n, 3);
	memset(x->ref, SENTINEL, all + 8);
	memset(x->got, SENTINEL, all + 8);
	PMPI_Gather(x->send, n, t->dt, me ? x->ref : NULL, n, t->dt, root, x->comm);
	rc = MPI_Gather(x->send, n, t->dt, me ? x->got : NULL, n, t->dt, root, x->comm);
	expect(x, C_GATHER, move_via_shm(t));
	snprintf(what, sizeof(what), "MPI_Gather %s n=%d root=%d%s", t->name, n, root, label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, all + 8);

	memset(x->got, SENTINEL, all + 8);
	if (me) {
		memcpy(x->got + (size_t)root * bytes, x->send, bytes);
		rc =
		    MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x->got, n, t->dt, root, x->comm);
	} else {
		rc = MPI_Gather(x->send, n, t->dt, NULL, 0, MPI_DATATYPE_NULL, root, x->comm);
	}
	expect(x, C_GATHER, move_via_shm(t));
	snprintf(what, sizeof(what), "MPI_Gather %s n=%d root=%d in place%s", t->name, n, root,
	         label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, all + 8);
}

static void check_scatter(struct ctx *x, const struct type *t, int n, int root, const char *label)
{
	size_t bytes = (size_t)n * (size_t)t->extent, all = bytes * (size_t)x->size;
	int me = x->rank == root, rc;
	char what[160];

	fill_move(x, t, x->send, (size_t)n * (size_t)x->size, 4);
	memcpy(x->aux, x->send, all);
	memset(x->ref, SENTINEL, bytes + 8);
	memset(x->got, SENTINEL, bytes + 8);
	PMPI_Scatter(me ? x->send : NULL, n, t->dt, x->ref, n, t->dt, root, x->comm);
	rc = MPI_Scatter(me ? x->send : NULL, n, t->dt, x->got, n, t->dt, root, x->comm);
	expect(x, C_SCATTER, move_via_shm(t));
	snprintf(what, sizeof(what), "MPI_Scatter %s n=%d root=%d%s", t->name, n, root, label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, bytes + 8);

	/* In place: the root's block stays where it is in sendbuf, which
	 * nobody may change. */
	memset(x->got, SENTINEL, bytes + 8);
	if (me)
		rc = MPI_Scatter(x->send, n, t->dt, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root,
		                 x->comm);
	else
		rc = MPI_Scatter(NULL, 0, MPI_DATATYPE_NULL, x->got, n, t->dt, root, x->comm);
	expect(x, C_SCATTER, move_via_shm(t));
	snprintf(what, sizeof(what), "MPI_Scatter %s n=%d root=%d in place%s", t->name, n, root,
	         label);
	fail_rc(x, what, rc);
	if (me)
		compare(x, what, x->send, x->aux, all);
	else
		compare(x, what, x->got, x->ref, bytes + 8);
}

static void check_alltoall(struct ctx *x, const struct type *t, int n, const char *label)
{
	size_t bytes = (size_t)n * (size_t)t->extent, all = bytes * (size_t)x->size;
	char what[160];
	int rc;

	fill_move(x, t, x->send, (size_t)n * (size_t)x->size, 5);
	memset(x->ref, SENTINEL, all + 8);
	memset(x->got, SENTINEL, all + 8);
	PMPI_Alltoall(x->send, n, t->dt, x->ref, n, t->dt, x->comm);
	rc = MPI_Alltoall(x->send, n, t->dt, x->got, n, t->dt, x->comm);
	expect(x, C_ALLTOALL, move_via_shm(t));
	snprintf(what, sizeof(what), "MPI_Alltoall %s n=%d%s", t->name, n, label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, all + 8);

	memcpy(x->got, x->send, all);
	memset(x->got + all, SENTINEL, 8);
	rc = MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x->got, n, t->dt, x->comm);
	expect(x, C_ALLTOALL, move_via_shm(t));
	snprintf(what, sizeof(what), "MPI_Alltoall %s n=%d in place%s", t->name, n, label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, all + 8);
}

/* The v-collectives. Counts vary by rank (n, n/2, 0), and the blocks lie
 * in reverse rank order with an element's gap after each, so displacements
 * are honoured, not assumed. Returns the elements the layout spans. */
#define V_MAX_RANKS 64

static size_t v_layout(int size, int n, int salt, int *counts, int *displs)
{
	size_t at = 0;
	int i;

	for (i = 0; i < size; i++)
		counts[i] = (i + salt) % 3 == 1 ? n / 2 : (i + salt) % 3 == 2 ? 0 : n;
	for (i = size - 1; i >= 0; i--) {
		displs[i] = (int)at;
		at += (size_t)counts[i] + 1;
	}
	return at;
}

/* The alltoallv layout: rank s sends rank r f(s, r) elements, f symmetric (so the in-place
 * form is valid), the send blocks in rank order and the receive blocks in reverse, an
 * element's gap after each. */
static void a2av_layout(const struct ctx *x, int n, int *sc, int *sd, int *rc, int *rd,
                        size_t *sspan, size_t *rspan)
{
	int i;

	for (i = 0; i < x->size; i++) {
		int k = (x->rank + i) % 3;

		sc[i] = rc[i] = k == 1 ? n / 2 : k == 2 ? 0 : n;
	}
	for (*sspan = 0, i = 0; i < x->size; i++) {
		sd[i] = (int)*sspan;
		*sspan += (size_t)sc[i] + 1;
	}
	for (*rspan = 0, i = x->size - 1; i >= 0; i--) {
		rd[i] = (int)*rspan;
		*rspan += (size_t)rc[i] + 1;
	}
}

/* MPI_Allgatherv of x->send (this rank's rc[rank] elements) into blocks at rd, spanning span
 * elements, against PMPI's, then in place. */
static void check_allgatherv(struct ctx *x, const struct type *t, int n, const int *rc,
                             const int *rd, size_t span, const char *layout, const char *label)
{
	size_t ext = (size_t)t->extent, mine = (size_t)rc[x->rank] * ext;
	char what[200];
	int rcode;

	memset(x->ref, SENTINEL, span * ext + 8);
	memset(x->got, SENTINEL, span * ext + 8);
	PMPI_Allgatherv(x->send, rc[x->rank], t->dt, x->ref, rc, rd, t->dt, x->comm);
	rcode = MPI_Allgatherv(x->send, rc[x->rank], t->dt, x->got, rc, rd, t->dt, x->comm);
	expect(x, C_ALLGATHERV, 1);
	snprintf(what, sizeof(what), "MPI_Allgatherv %s n=%d%s%s", t->name, n, layout, label);
	fail_rc(x, what, rcode);
	compare(x, what, x->got, x->ref, span * ext + 8);
	memset(x->got, SENTINEL, span * ext + 8);
	memcpy(x->got + (size_t)rd[x->rank] * ext, x->send, mine);
	rcode = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x->got, rc, rd, t->dt, x->comm);
	expect(x, C_ALLGATHERV, 1);
	snprintf(what, sizeof(what), "MPI_Allgatherv %s n=%d%s in place%s", t->name, n, layout,
	         label);
	fail_rc(x, what, rcode);
	compare(x, what, x->got, x->ref, span * ext + 8);
}

static void check_vcolls(struct ctx *x, const struct type *t, int n, int root, const char *label)
{
	int rc[V_MAX_RANKS], rd[V_MAX_RANKS], sc[V_MAX_RANKS], sd[V_MAX_RANKS], rcode, i;
	/* Across nodes the interposer composes all but MPI_Alltoallv, which goes to PMPI there
	 * (shm); composed: the others, taken on every communicator. */
	int me = x->rank == root, shm = !x->spans, composed = 1;
	size_t ext = (size_t)t->extent, span, sspan, mine;
	char what[200];

	if (x->size > V_MAX_RANKS)
		return;
	/* allgatherv: the sweep's layout, then the blocks back to back in rank order, as most
	 * programs lay them out (across nodes of consecutive ranks the interposer then gathers
	 * and exchanges in recvbuf itself) */
	span = v_layout(x->size, n, 0, rc, rd);
	mine = (size_t)rc[x->rank] * ext;
	fill_move(x, t, x->send, (size_t)rc[x->rank], 21);
	check_allgatherv(x, t, n, rc, rd, span, "", label);
	for (span = 0, i = 0; i < x->size; i++) {
		rd[i] = (int)span;
		span += (size_t)rc[i];
	}
	check_allgatherv(x, t, n, rc, rd, span, " packed", label);

	/* gatherv, to root */
	span = v_layout(x->size, n, 1, rc, rd);
	mine = (size_t)rc[x->rank] * ext;
	fill_move(x, t, x->send, (size_t)rc[x->rank], 22);
	memset(x->ref, SENTINEL, span * ext + 8);
	memset(x->got, SENTINEL, span * ext + 8);
	PMPI_Gatherv(x->send, rc[x->rank], t->dt, me ? x->ref : NULL, rc, rd, t->dt, root, x->comm);
	rcode = MPI_Gatherv(x->send, rc[x->rank], t->dt, me ? x->got : NULL, rc, rd, t->dt, root,
	                    x->comm);
	expect(x, C_GATHERV, composed);
	snprintf(what, sizeof(what), "MPI_Gatherv %s n=%d root=%d%s", t->name, n, root, label);
	fail_rc(x, what, rcode);
	compare(x, what, x->got, x->ref, span * ext + 8);
	memset(x->got, SENTINEL, span * ext + 8);
	if (me) {
		memcpy(x->got + (size_t)rd[root] * ext, x->send, mine);
		rcode = MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x->got, rc, rd, t->dt, root,
		                    x->comm);
	} else {
		rcode = MPI_Gatherv(x->send, rc[x->rank], t->dt, NULL, NULL, NULL,
		                    MPI_DATATYPE_NULL, root, x->comm);
	}
	expect(x, C_GATHERV, composed);
	snprintf(what, sizeof(what), "MPI_Gatherv %s n=%d root=%d in place%s", t->name, n, root,
	         label);
	fail_rc(x, what, rcode);
	compare(x, what, x->got, x->ref, span * ext + 8);

	/* scatterv, from root */
	sspan = v_layout(x->size, n, 2, sc, sd);
	mine = (size_t)sc[x->rank] * ext;
	fill_move(x, t, x->send, sspan, 23);
	memcpy(x->aux, x->send, sspan * ext);
	memset(x->ref, SENTINEL, mine + 8);
	memset(x->got, SENTINEL, mine + 8);
	PMPI_Scatterv(me ? x->send : NULL, sc, sd, t->dt, x->ref, sc[x->rank], t->dt, root,
	              x->comm);
	rcode = MPI_Scatterv(me ? x->send : NULL, sc, sd, t->dt, x->got, sc[x->rank], t->dt, root,
	                     x->comm);
	expect(x, C_SCATTERV, composed);
	snprintf(what, sizeof(what), "MPI_Scatterv %s n=%d root=%d%s", t->name, n, root, label);
	fail_rc(x, what, rcode);
	compare(x, what, x->got, x->ref, mine + 8);
	memset(x->got, SENTINEL, mine + 8);
	if (me)
		rcode = MPI_Scatterv(x->send, sc, sd, t->dt, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
		                     root, x->comm);
	else
		rcode = MPI_Scatterv(NULL, NULL, NULL, MPI_DATATYPE_NULL, x->got, sc[x->rank],
		                     t->dt, root, x->comm);
	expect(x, C_SCATTERV, composed);
	snprintf(what, sizeof(what), "MPI_Scatterv %s n=%d root=%d in place%s", t->name, n, root,
	         label);
	fail_rc(x, what, rcode);
	if (me)
		compare(x, what, x->send, x->aux, sspan * ext);
	else
		compare(x, what, x->got, x->ref, mine + 8);

	/* alltoallv: rank s sends rank r f(s, r) elements, f symmetric so that
	 * the in-place form (what it sends laid out as what it receives) is
	 * valid too */
	if (root != 0)
		return; /* once per size, not per root */
	a2av_layout(x, n, sc, sd, rc, rd, &sspan, &span);
	fill_move(x, t, x->send, sspan, 24);
	memset(x->ref, SENTINEL, span * ext + 8);
	memset(x->got, SENTINEL, span * ext + 8);
	PMPI_Alltoallv(x->send, sc, sd, t->dt, x->ref, rc, rd, t->dt, x->comm);
	rcode = MPI_Alltoallv(x->send, sc, sd, t->dt, x->got, rc, rd, t->dt, x->comm);
	expect(x, C_ALLTOALLV, shm);
	snprintf(what, sizeof(what), "MPI_Alltoallv %s n=%d%s", t->name, n, label);
	fail_rc(x, what, rcode);
	compare(x, what, x->got, x->ref, span * ext + 8);
	/* in place: the send data laid out as the receive */
	fill_move(x, t, x->got, span, 25);
	memset(x->got + span * ext, SENTINEL, 8);
	memcpy(x->ref, x->got, span * ext + 8);
	PMPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, x->ref, rc, rd, t->dt, x->comm);
	rcode = MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, x->got, rc, rd, t->dt,
	                      x->comm);
	expect(x, C_ALLTOALLV, shm);
	snprintf(what, sizeof(what), "MPI_Alltoallv %s n=%d in place%s", t->name, n, label);
	fail_rc(x, what, rcode);
	compare(x, what, x->got, x->ref, span * ext + 8);
}

/* Receive blocks that overlap: erroneous by the standard ("no location written more than
 * once"), accepted by both MPIs (MPICH's allgatherv4 puts several ranks' blocks at
 * displacement 0), so the interposer must run them too rather than fail the job. Every block
 * holds m ints and the blocks lie in reverse rank order, each overlapping the next by half,
 * rank 1's on rank 0's; what a block holds is a function of where it lands (g(position)),
 * so the result does not depend on which rank's bytes are written last. MPI_Allgatherv (and
 * in place), MPI_Gatherv to rank 0, MPI_Alltoallv, and their non-blocking forms, against
 * PMPI's blocking calls. */
static int g_at(size_t pos)
{
	return (int)(uint32_t)(pos * 2654435761u + 12345u);
}

static void fill_at(int *buf, size_t at, int m)
{
	for (int j = 0; j < m; j++)
		buf[j] = g_at(at + (size_t)j);
}

static void check_voverlap(struct ctx *x, int m, const char *label)
{
	int c[V_MAX_RANKS], d[V_MAX_RANKS], sd[V_MAX_RANKS], i, rcode, nb;
	int shm = !x->spans, me = x->rank;
	size_t span = 0, bytes;
	int *send = (int *)x->send, *ref = (int *)x->ref, *got = (int *)x->got;
	MPI_Request q;
	char what[200];

	if (x->size > V_MAX_RANKS)
		return;
	for (i = 0; i < x->size; i++) {
		c[i] = m;
		d[i] = i == 1 ? d[0] : (x->size - 1 - i) * (m / 2);
		sd[i] = i * m; /* alltoallv's send blocks, in rank order */
		if ((size_t)d[i] + (size_t)m > span)
			span = (size_t)d[i] + (size_t)m;
	}
	bytes = span * sizeof(int) + 8;
	for (nb = 0; nb < 2; nb++) {
		const char *how = nb ? " (non-blocking)" : "";

		fill_at(send, (size_t)d[me], m);
		memset(ref, SENTINEL, bytes);
		memset(got, SENTINEL, bytes);
		PMPI_Allgatherv(send, m, MPI_INT, ref, c, d, MPI_INT, x->comm);
		if (nb) {
			rcode = MPI_Iallgatherv(send, m, MPI_INT, got, c, d, MPI_INT, x->comm, &q);
			if (rcode == MPI_SUCCESS)
				rcode = MPI_Wait(&q, MPI_STATUS_IGNORE);
		} else {
			rcode = MPI_Allgatherv(send, m, MPI_INT, got, c, d, MPI_INT, x->comm);
		}
		expect(x, nb ? C_IALLGATHERV : C_ALLGATHERV, nb ? shm : 1);
		snprintf(what, sizeof(what), "MPI_%sllgatherv int m=%d overlapping%s%s",
		         nb ? "Ia" : "A", m, how, label);
		fail_rc(x, what, rcode);
		compare(x, what, got, ref, bytes);
		if (!nb) {
			memset(got, SENTINEL, bytes);
			memcpy(got + d[me], send, (size_t)m * sizeof(int));
			rcode = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, c, d,
			                       MPI_INT, x->comm);
			expect(x, C_ALLGATHERV, 1);
			snprintf(what, sizeof(what),
			         "MPI_Allgatherv int m=%d overlapping in place%s", m, label);
			fail_rc(x, what, rcode);
			compare(x, what, got, ref, bytes);
		}

		memset(ref, SENTINEL, bytes);
		memset(got, SENTINEL, bytes);
		PMPI_Gatherv(send, m, MPI_INT, me ? NULL : ref, c, d, MPI_INT, 0, x->comm);
		if (nb) {
			rcode = MPI_Igatherv(send, m, MPI_INT, me ? NULL : got, c, d, MPI_INT, 0,
			                     x->comm, &q);
			if (rcode == MPI_SUCCESS)
				rcode = MPI_Wait(&q, MPI_STATUS_IGNORE);
		} else {
			rcode = MPI_Gatherv(send, m, MPI_INT, me ? NULL : got, c, d, MPI_INT, 0,
			                    x->comm);
		}
		expect(x, nb ? C_IGATHERV : C_GATHERV, nb ? shm : 1);
		snprintf(what, sizeof(what), "%s int m=%d root=0 overlapping%s%s",
		         nb ? "MPI_Igatherv" : "MPI_Gatherv", m, how, label);
		fail_rc(x, what, rcode);
		compare(x, what, got, ref, bytes);

		/* alltoallv: rank s sends rank r the block r places at d[s], the same for every r
		 */
		for (i = 0; i < x->size; i++)
			fill_at(send + sd[i], (size_t)d[me], m);
		memset(ref, SENTINEL, bytes);
		memset(got, SENTINEL, bytes);
		PMPI_Alltoallv(send, c, sd, MPI_INT, ref, c, d, MPI_INT, x->comm);
		if (nb) {
			rcode =
			    MPI_Ialltoallv(send, c, sd, MPI_INT, got, c, d, MPI_INT, x->comm, &q);
			if (rcode == MPI_SUCCESS)
				rcode = MPI_Wait(&q, MPI_STATUS_IGNORE);
		} else {
			rcode = MPI_Alltoallv(send, c, sd, MPI_INT, got, c, d, MPI_INT, x->comm);
		}
		expect(x, nb ? C_IALLTOALLV : C_ALLTOALLV, shm);
		snprintf(what, sizeof(what), "MPI_%slltoallv int m=%d overlapping%s%s",
		         nb ? "Ia" : "A", m, how, label);
		fail_rc(x, what, rcode);
		compare(x, what, got, ref, bytes);
	}
}

/* One call, different datatypes on different ranks: MPI matches type
 * signatures, not datatypes, so a rank may describe its data as n
 * vector(2,1,2,int) (8 data bytes in 12, packed) where another describes
 * the same ints as 2n MPI_INT, or a root may gather into n
 * contiguous(2,int) what the others send as ints. Every rank must take the
 * same path, which no rank can tell from its own arguments alone. */
static const struct type *move_type(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(move_types); i++)
		if (!strcmp(move_types[i].name, name))
			return &move_types[i];
	return NULL;
}

static void check_mixed(struct ctx *x, int n, const char *label)
{
	const struct type *vec = move_type("vector(2,1,2,int)"),
	                  *con = move_type("contiguous(2,int)"), *in = move_type("int");
	int rt[3], nroots = roots(x->size, rt), k, me, rc, n2 = 2 * n;
	size_t vb = (size_t)n * (size_t)vec->extent, ib = (size_t)n2 * sizeof(int), all;
	char what[200];

	for (k = 0; k < nroots; k++) {
		int root = rt[k];

		me = x->rank == root;
		/* bcast: the root's vectors, the others' ints */
		if (me)
			fill_move(x, vec, x->ref, (size_t)n, 11);
		else
			memset(x->ref, SENTINEL, ib);
		memset(x->ref + (me ? vb : ib), SENTINEL, 8);
		memcpy(x->got, x->ref, (me ? vb : ib) + 8);
		PMPI_Bcast(x->ref, me ? n : n2, me ? vec->dt : MPI_INT, root, x->comm);
		rc = MPI_Bcast(x->got, me ? n : n2, me ? vec->dt : MPI_INT, root, x->comm);
		expect(x, C_BCAST, 1);
		snprintf(what, sizeof(what), "MPI_Bcast root %s, others int, n=%d root=%d%s",
		         vec->name, n, root, label);
		fail_rc(x, what, rc);
		compare(x, what, x->got, x->ref, (me ? vb : ib) + 8);

		/* gather: vectors sent, gathered as contiguous(2,int) */
		all = (size_t)n * (size_t)con->extent * (size_t)x->size;
		fill_move(x, vec, x->send, (size_t)n, 12);
		memset(x->ref, SENTINEL, all + 8);
		memset(x->got, SENTINEL, all + 8);
		PMPI_Gather(x->send, n, vec->dt, me ? x->ref : NULL, n, con->dt, root, x->comm);
		rc = MPI_Gather(x->send, n, vec->dt, me ? x->got : NULL, n, con->dt, root, x->comm);
		expect(x, C_GATHER, 1);
		snprintf(what, sizeof(what), "MPI_Gather %s into %s, n=%d root=%d%s", vec->name,
		         con->name, n, root, label);
		fail_rc(x, what, rc);
		compare(x, what, x->got, x->ref, all + 8);

		/* gather: ints sent, gathered into vectors (packed at the root only) */
		all = vb * (size_t)x->size;
		fill_move(x, in, x->send, (size_t)n2, 13);
		memset(x->ref, SENTINEL, all + 8);
		memset(x->got, SENTINEL, all + 8);
		PMPI_Gather(x->send, n2, MPI_INT, me ? x->ref : NULL, n, vec->dt, root, x->comm);
		rc =
		    MPI_Gather(x->send, n2, MPI_INT, me ? x->got : NULL, n, vec->dt, root, x->comm);
		expect(x, C_GATHER, 1);
		snprintf(what, sizeof(what), "MPI_Gather int into %s, n=%d root=%d%s", vec->name, n,
		         root, label);
		fail_rc(x, what, rc);
		compare(x, what, x->got, x->ref, all + 8);

		/* scatter: the root's vectors, received as ints (the root's as
		 * contiguous(2,int)) */
		if (me)
			fill_move(x, vec, x->send, (size_t)n * (size_t)x->size, 14);
		memset(x->ref, SENTINEL, ib + 8);
		memset(x->got, SENTINEL, ib + 8);
		PMPI_Scatter(me ? x->send : NULL, n, vec->dt, x->ref, me ? n : n2,
		             me ? con->dt : MPI_INT, root, x->comm);
		rc = MPI_Scatter(me ? x->send : NULL, n, vec->dt, x->got, me ? n : n2,
		                 me ? con->dt : MPI_INT, root, x->comm);
		expect(x, C_SCATTER, 1);
		snprintf(what, sizeof(what), "MPI_Scatter %s to int, n=%d root=%d%s", vec->name, n,
		         root, label);
		fail_rc(x, what, rc);
		compare(x, what, x->got, x->ref, ib + 8);
	}

	/* allgather: every rank's vectors, received as ints */
	all = ib * (size_t)x->size;
	fill_move(x, vec, x->send, (size_t)n, 15);
	memset(x->ref, SENTINEL, all + 8);
	memset(x->got, SENTINEL, all + 8);
	PMPI_Allgather(x->send, n, vec->dt, x->ref, n2, MPI_INT, x->comm);
	rc = MPI_Allgather(x->send, n, vec->dt, x->got, n2, MPI_INT, x->comm);
	expect(x, C_ALLGATHER, 1);
	snprintf(what, sizeof(what), "MPI_Allgather %s to int, n=%d%s", vec->name, n, label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, all + 8);

	/* alltoall: ints sent, received as vectors; then vectors sent, received
	 * as contiguous(2,int) */
	all = vb * (size_t)x->size;
	fill_move(x, in, x->send, (size_t)n2 * (size_t)x->size, 16);
	memset(x->ref, SENTINEL, all + 8);
	memset(x->got, SENTINEL, all + 8);
	PMPI_Alltoall(x->send, n2, MPI_INT, x->ref, n, vec->dt, x->comm);
	rc = MPI_Alltoall(x->send, n2, MPI_INT, x->got, n, vec->dt, x->comm);
	expect(x, C_ALLTOALL, 1);
	snprintf(what, sizeof(what), "MPI_Alltoall int to %s, n=%d%s", vec->name, n, label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, all + 8);

	all = ib * (size_t)x->size;
	fill_move(x, vec, x->send, (size_t)n * (size_t)x->size, 17);
	memset(x->ref, SENTINEL, all + 8);
	memset(x->got, SENTINEL, all + 8);
	PMPI_Alltoall(x->send, n, vec->dt, x->ref, n, con->dt, x->comm);
	rc = MPI_Alltoall(x->send, n, vec->dt, x->got, n, con->dt, x->comm);
	expect(x, C_ALLTOALL, 1);
	snprintf(what, sizeof(what), "MPI_Alltoall %s to %s, n=%d%s", vec->name, con->name, n,
	         label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, all + 8);
}

/* Nobody leaves before everyone arrived. Every rank adds one to a counter in
 * a file all of them map, the last one 50 ms late, then enters the barrier;
 * after it, every rank must see all the additions. A barrier that lets a
 * rank out early shows a short count (the delay makes that all but
 * certain); a correct one never does, however the ranks are scheduled. */
static void check_barrier(struct ctx *x)
{
	struct timespec late = {0, 50 * 1000 * 1000};
	char path[64] = "/tmp/mpi_check.XXXXXX", what[96];
	_Atomic int *count = MAP_FAILED;
	int rc, fd = -1, seen;

	rc = MPI_Barrier(x->comm);
	expect(x, C_BARRIER, 1);
	fail_rc(x, "MPI_Barrier", rc);
	if (x->size < 2)
		return;
	if (x->rank == 0)
		fd = mkstemp(path);
	PMPI_Bcast(path, sizeof(path), MPI_CHAR, 0, x->comm);
	if (fd >= 0 && ftruncate(fd, sizeof(*count)) != 0) {
		close(fd);
		fd = -1;
	}
	PMPI_Barrier(x->comm); /* sized before anyone maps it */
	if (x->rank != 0)
		fd = open(path, O_RDWR);
	if (fd >= 0 && lseek(fd, 0, SEEK_END) >= (off_t)sizeof(*count))
		count = mmap(NULL, sizeof(*count), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	PMPI_Barrier(x->comm);
	if (x->rank == 0)
		unlink(path);
	x->checks++;
	if (count == MAP_FAILED) {
		if (x->fails++ < MAX_REPORTS)
			fprintf(stderr, "mpi_check: rank %d: cannot map %s for the barrier check\n",
			        x->world_rank, path);
		if (fd >= 0)
			close(fd);
		return;
	}
	if (x->rank == x->size - 1)
		nanosleep(&late, NULL);
	atomic_fetch_add(count, 1);
	rc = MPI_Barrier(x->comm);
	expect(x, C_BARRIER, 1);
	fail_rc(x, "MPI_Barrier", rc);
	seen = atomic_load(count);
	if (seen < x->size) {
		snprintf(what, sizeof(what),
		         "MPI_Barrier let this rank out when %d of %d ranks had "
		         "arrived",
		         seen, x->size);
		if (x->fails++ < MAX_REPORTS)
			fprintf(stderr, "mpi_check: rank %d (%d in %s): %s\n", x->world_rank,
			        x->rank, x->comm_name, what);
	}
	munmap((void *)count, sizeof(*count));
	close(fd);
}

/* Matrices */

/* How much of the matrix a communicator gets. FULL: every mapped type with
 * every op, every data movement type, every size. SMALL: a type of each kind
 * and width with a few ops each, every size. TINY: three of each, no large
 * size. Every level keeps fallback cases. */
enum level { TINY, SMALL, FULL };

static const char *const small_reds[][2] = {
    {"int", "sum"},          {"int", "bxor"},          {"uint8", "max"}, {"int64", "prod"},
    {"uint64", "band"},      {"unsigned_long", "bor"}, {"float", "min"}, {"double", "sum"},
    {"int", "land"},         {"uint8", "lxor"},        {"int64", "lor"}, {"double_int", "minloc"},
    {"short_int", "maxloc"},
};
static const char *const tiny_reds[][2] = {
    {"int", "sum"}, {"double", "max"}, {"int", "lor"}, {"2int", "minloc"}};
static const char *const small_moves[] = {"byte", "int",       "double",
                                          "2int", "short_int", "vector(2,1,2,int)"};
static const char *const tiny_moves[] = {"byte", "double", "vector(2,1,2,int)"};

static int listed(const char *name, const char *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(name, list[i]))
			return 1;
	return 0;
}

static int listed_pair(const struct type *t, const struct op *o, const char *const (*list)[2],
                       size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(t->name, list[i][0]) && !strcmp(o->name, list[i][1]))
			return 1;
	return 0;
}

static size_t red_cases(struct red *out, size_t cap, enum level level)
{
	size_t n = 0, i, j;

	for (i = 0; i < ARRAY_SIZE(types); i++) {
		const struct type *t = &types[i];

		for (j = 0; j < ARRAY_SIZE(ops); j++) {
			if ((ops[j].cls == OC_BITS || ops[j].cls == OC_LOGIC) && t->kind == K_FLOAT)
				continue;
			/* MPI_AINT and MPI_COUNT are not C integers: logical
			 * ops on them are not MPI's to promise. */
			if (ops[j].cls == OC_LOGIC &&
			    (!strcmp(t->name, "aint") || !strcmp(t->name, "count")))
				continue;
			if ((level == SMALL &&
			     !listed_pair(t, &ops[j], small_reds, ARRAY_SIZE(small_reds))) ||
			    (level == TINY &&
			     !listed_pair(t, &ops[j], tiny_reds, ARRAY_SIZE(tiny_reds))))
				continue;
			if (n < cap)
				out[n++] = (struct red){t, &ops[j]};
		}
	}
	for (i = 0; i < ARRAY_SIZE(pairs); i++) {
		for (j = 0; j < 2; j++) {
			const struct op *o = j ? &op_maxloc : &op_minloc;

			if ((level == SMALL &&
			     !listed_pair(&pairs[i].t, o, small_reds, ARRAY_SIZE(small_reds))) ||
			    (level == TINY &&
			     !listed_pair(&pairs[i].t, o, tiny_reds, ARRAY_SIZE(tiny_reds))))
				continue;
			if (n < cap)
				out[n++] = (struct red){&pairs[i].t, o};
		}
	}
	/* Fallbacks. */
	if (n + 10 <= cap) {
		/* A derived type takes a user-defined op: Open MPI 4.1 and
		 * MPICH 4.0 both reject MPI_SUM on one (MPI_ERR_OP). */
		out[n++] = (struct red){&t_contig2_int, &op_usersum};
		if (level == TINY)
			return n;
		out[n++] = (struct red){&t_short, &ops[0]};
		if (level == SMALL)
			return n;
		out[n++] = (struct red){&types[4], &op_usersum};
		out[n++] = (struct red){&t_offset, &ops[2]};
		out[n++] = (struct red){&t_short, &ops[3]};
		out[n++] = (struct red){&t_ushort, &ops[5]};
	}
	return n;
}

/* Non-blocking collectives */

/* Completes r in the way style says: MPI_Wait, a loop of MPI_Test, MPI_Waitall,
 * MPI_Waitany, a loop of MPI_Testall, MPI_Waitsome (the interposer must complete its
 * requests through every one of them). Returns the call's result. */
static int complete(MPI_Request *r, int style)
{
	int flag = 0, idx, out, rc;
	MPI_Status st[1]; /* not MPI_STATUSES_IGNORE: gcc 12 takes MPICH's for an array */

	switch (style % 6) {
	case 0:
		return MPI_Wait(r, MPI_STATUS_IGNORE);
	case 1:
		do
			rc = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
		while (rc == MPI_SUCCESS && !flag);
		return rc;
	case 2:
		return MPI_Waitall(1, r, st);
	case 3:
		return MPI_Waitany(1, r, &idx, MPI_STATUS_IGNORE);
	case 4:
		do
			rc = MPI_Testall(1, r, &flag, st);
		while (rc == MPI_SUCCESS && !flag);
		return rc;
	default:
		return MPI_Waitsome(1, r, &out, &idx, st);
	}
}

static const char *const styles[] = {"wait", "test", "waitall", "waitany", "testall", "waitsome"};

/* A reduction case through MPI_Iallreduce, MPI_Ireduce (root rt) and
 * MPI_Ireduce_scatter_block, each against the blocking PMPI call; the interposer takes them
 * where it takes the blocking ones but across nodes and for the LOC ops. */
static void check_nbc_red(struct ctx *x, const struct red *r, int n, int rt, const char *label)
{
	size_t bytes = (size_t)n * (size_t)r->t->extent;
	int shm = red_via_shm(x, r, (size_t)n) && !x->spans && r->o->cls != OC_LOC;
	int style = (int)(x->seed % 6), rc;
	MPI_Request q;
	char what[200];

	fill_red(x, r->t, r->o->cls, x->send, (size_t)n * (size_t)x->size);
	memset(x->ref, SENTINEL, bytes * (size_t)x->size + 8);
	memset(x->got, SENTINEL, bytes * (size_t)x->size + 8);
	PMPI_Allreduce(x->send, x->ref, n, r->t->dt, r->o->op, x->comm);
	rc = MPI_Iallreduce(x->send, x->got, n, r->t->dt, r->o->op, x->comm, &q);
	if (rc == MPI_SUCCESS)
		rc = complete(&q, style);
	expect(x, C_IALLREDUCE, shm);
	snprintf(what, sizeof(what), "MPI_Iallreduce %s %s n=%d (%s)%s", r->t->name, r->o->name, n,
	         styles[style], label);
	fail_rc(x, what, rc);
	compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 8);

	/* In place. */
	memset(x->got, SENTINEL, bytes + 8);
	memcpy(x->got, x->send, bytes);
	rc = MPI_Iallreduce(MPI_IN_PLACE, x->got, n, r->t->dt, r->o->op, x->comm, &q);
	if (rc == MPI_SUCCESS)
		rc = complete(&q, style + 1);
	expect(x, C_IALLREDUCE, shm);
	snprintf(what, sizeof(what), "MPI_Iallreduce %s %s n=%d in place (%s)%s", r->t->name,
	         r->o->name, n, styles[(style + 1) % 6], label);
	fail_rc(x, what, rc);
	compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 8);

	memset(x->ref, SENTINEL, bytes + 8);
	memset(x->got, SENTINEL, bytes + 8);
	PMPI_Reduce(x->send, x->ref, n, r->t->dt, r->o->op, rt, x->comm);
	rc = MPI_Ireduce(x->send, x->got, n, r->t->dt, r->o->op, rt, x->comm, &q);
	if (rc == MPI_SUCCESS)
		rc = complete(&q, style + 2);
	expect(x, C_IREDUCE, shm);
	snprintf(what, sizeof(what), "MPI_Ireduce %s %s n=%d root=%d (%s)%s", r->t->name,
	         r->o->name, n, rt, styles[(style + 2) % 6], label);
	fail_rc(x, what, rc);
	if (x->rank == rt)
		compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 8);

	memset(x->ref, SENTINEL, bytes + 8);
	memset(x->got, SENTINEL, bytes + 8);
	PMPI_Reduce_scatter_block(x->send, x->ref, n, r->t->dt, r->o->op, x->comm);
	rc = MPI_Ireduce_scatter_block(x->send, x->got, n, r->t->dt, r->o->op, x->comm, &q);
	if (rc == MPI_SUCCESS)
		rc = complete(&q, style + 3);
	expect(x, C_IREDUCE_SCATTER_BLOCK, shm);
	snprintf(what, sizeof(what), "MPI_Ireduce_scatter_block %s %s n=%d (%s)%s", r->t->name,
	         r->o->name, n, styles[(style + 3) % 6], label);
	fail_rc(x, what, rc);
	compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 8);

	/* In place: the input is recvbuf, the result lands at its start. */
	memset(x->got, SENTINEL, bytes * (size_t)x->size + 8);
	memcpy(x->got, x->send, bytes * (size_t)x->size);
	rc = MPI_Ireduce_scatter_block(MPI_IN_PLACE, x->got, n, r->t->dt, r->o->op, x->comm, &q);
	if (rc == MPI_SUCCESS)
		rc = complete(&q, style + 4);
	expect(x, C_IREDUCE_SCATTER_BLOCK, shm);
	snprintf(what, sizeof(what), "MPI_Ireduce_scatter_block %s %s n=%d in place (%s)%s",
	         r->t->name, r->o->name, n, styles[(style + 4) % 6], label);
	fail_rc(x, what, rc);
	compare_red(x, what, r->t, x->got, x->ref, (size_t)n, 0);
}

/* A move type through MPI_Ibcast, MPI_Iallgather, MPI_Igather, MPI_Iscatter and
 * MPI_Ialltoall (root rt), each against the blocking PMPI call: types that do not hold
 * their data in order are packed at the start and unpacked at completion. */
static void check_nbc_move(struct ctx *x, const struct type *t, int n, int rt, const char *label)
{
	size_t bytes = (size_t)n * (size_t)t->extent, all = bytes * (size_t)x->size;
	int shm = move_via_shm(t) && !x->spans, style = (int)(x->seed % 6), me = x->rank == rt, rc;
	MPI_Request q;
	char what[200];

	if (me)
		fill_move(x, t, x->ref, (size_t)n, 1);
	else
		memset(x->ref, SENTINEL, bytes);
	memset(x->ref + bytes, SENTINEL, 8);
	memcpy(x->got, x->ref, bytes + 8);
	PMPI_Bcast(x->ref, n, t->dt, rt, x->comm);
	rc = MPI_Ibcast(x->got, n, t->dt, rt, x->comm, &q);
	if (rc == MPI_SUCCESS)
		rc = complete(&q, style);
	expect(x, C_IBCAST, shm);
	snprintf(what, sizeof(what), "MPI_Ibcast %s n=%d root=%d (%s)%s", t->name, n, rt,
	         styles[style], label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, bytes + 8);

	fill_move(x, t, x->send, (size_t)n * (size_t)x->size, 2);
	memset(x->ref, SENTINEL, all + 8);
	memset(x->got, SENTINEL, all + 8);
	PMPI_Allgather(x->send, n, t->dt, x->ref, n, t->dt, x->comm);
	rc = MPI_Iallgather(x->send, n, t->dt, x->got, n, t->dt, x->comm, &q);
	if (rc == MPI_SUCCESS)
		rc = complete(&q, style + 1);
	expect(x, C_IALLGATHER, shm);
	snprintf(what, sizeof(what), "MPI_Iallgather %s n=%d (%s)%s", t->name, n,
	         styles[(style + 1) % 6], label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, all + 8);

	memset(x->got, SENTINEL, all + 8);
	memcpy(x->got + (size_t)x->rank * bytes, x->send, bytes);
	rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x->got, n, t->dt, x->comm, &q);
	if (rc == MPI_SUCCESS)
		rc = complete(&q, style + 2);
	expect(x, C_IALLGATHER, shm);
	snprintf(what, sizeof(what), "MPI_Iallgather %s n=%d in place (%s)%s", t->name, n,
	         styles[(style + 2) % 6], label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, all + 8);

	memset(x->ref, SENTINEL, all + 8);
	memset(x->got, SENTINEL, all + 8);
	PMPI_Gather(x->send, n, t->dt, x->ref, n, t->dt, rt, x->comm);
	rc = MPI_Igather(x->send, n, t->dt, x->got, n, t->dt, rt, x->comm, &q);
	if (rc == MPI_SUCCESS)
		rc = complete(&q, style + 3);
	expect(x, C_IGATHER, shm);
	snprintf(what, sizeof(what), "MPI_Igather %s n=%d root=%d (%s)%s", t->name, n, rt,
	         styles[(style + 3) % 6], label);
	fail_rc(x, what, rc);
	if (me)
		compare(x, what, x->got, x->ref, all + 8);

	memset(x->ref, SENTINEL, bytes + 8);
	memset(x->got, SENTINEL, bytes + 8);
	PMPI_Scatter(x->send, n, t->dt, x->ref, n, t->dt, rt, x->comm);
	rc = MPI_Iscatter(x->send, n, t->dt, x->got, n, t->dt, rt, x->comm, &q);
	if (rc == MPI_SUCCESS)
		rc = complete(&q, style + 4);
	expect(x, C_ISCATTER, shm);
	snprintf(what, sizeof(what), "MPI_Iscatter %s n=%d root=%d (%s)%s", t->name, n, rt,
	         styles[(style + 4) % 6], label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, bytes + 8);

	memset(x->ref, SENTINEL, all + 8);
	memset(x->got, SENTINEL, all + 8);
	PMPI_Alltoall(x->send, n, t->dt, x->ref, n, t->dt, x->comm);
	rc = MPI_Ialltoall(x->send, n, t->dt, x->got, n, t->dt, x->comm, &q);
	if (rc == MPI_SUCCESS)
		rc = complete(&q, style + 5);
	expect(x, C_IALLTOALL, shm);
	snprintf(what, sizeof(what), "MPI_Ialltoall %s n=%d (%s)%s", t->name, n,
	         styles[(style + 5) % 6], label);
	fail_rc(x, what, rc);
	compare(x, what, x->got, x->ref, all + 8);
}

/* Several calls outstanding at once, beside the MPI's own point-to-point requests, in
 * one MPI_Waitall and then in an MPI_Waitany loop: an Iallreduce of ints, an Ibcast of
 * doubles, an Ibarrier, and a native send and receive around a ring. */
static void check_nbc_many(struct ctx *x, int n, const char *label)
{
	size_t bytes = (size_t)n * sizeof(int);
	int next = (x->rank + 1) % x->size, prev = (x->rank + x->size - 1) % x->size;
	int shm = !x->spans, rc, round, left, idx, ring_in = -1, ring_out = x->rank * 7 + n;
	uint8_t *bref = x->ref + bytes + 64, *bgot = x->got + bytes + 64;
	MPI_Request q[5];
	MPI_Status sts[5];
	char what[200];

	for (round = 0; round < 2; round++) {
		for (idx = 0; idx < n; idx++)
			((int *)(void *)x->send)[idx] = (x->rank + 1) * 31 + idx * (round + 3);
		memset(x->ref, SENTINEL, bytes);
		memset(x->got, SENTINEL, bytes);
		PMPI_Allreduce(x->send, x->ref, n, MPI_INT, MPI_SUM, x->comm);
		if (x->rank == 0)
			fill_move(x, &move_types[0], bref, (size_t)n, 3);
		else
			memset(bref, SENTINEL, (size_t)n);
		memcpy(bgot, bref, (size_t)n);
		PMPI_Bcast(bref, n, MPI_BYTE, 0, x->comm);
		ring_in = -1;
		rc = MPI_Irecv(&ring_in, 1, MPI_INT, prev, 77, x->comm, &q[0]);
		if (rc == MPI_SUCCESS)
			rc = MPI_Iallreduce(x->send, x->got, n, MPI_INT, MPI_SUM, x->comm, &q[1]);
		if (rc == MPI_SUCCESS)
			rc = MPI_Ibcast(bgot, n, MPI_BYTE, 0, x->comm, &q[2]);
		if (rc == MPI_SUCCESS)
			rc = MPI_Ibarrier(x->comm, &q[3]);
		if (rc == MPI_SUCCESS)
			rc = MPI_Isend(&ring_out, 1, MPI_INT, next, 77, x->comm, &q[4]);
		expect(x, C_IALLREDUCE, shm);
		expect(x, C_IBCAST, shm);
		expect(x, C_IBARRIER, shm);
		if (rc == MPI_SUCCESS && round == 0)
			rc = MPI_Waitall(5, q, sts);
		for (left = 5; rc == MPI_SUCCESS && round == 1 && left > 0; left--)
			rc = MPI_Waitany(5, q, &idx, MPI_STATUS_IGNORE);
		snprintf(what, sizeof(what),
		         "MPI_Iallreduce, Ibcast, Ibarrier, Isend, Irecv n=%d (%s)%s", n,
		         round ? "waitany" : "waitall", label);
		fail_rc(x, what, rc);
		compare(x, what, x->got, x->ref, bytes);
		compare(x, what, bgot, bref, (size_t)n);
		x->checks++;
		if (ring_in != prev * 7 + n && x->fails++ < MAX_REPORTS)
			fprintf(
			    stderr,
			    "mpi_check: rank %d (%d in %s): %s: the ring's message is %d, not %d\n",
			    x->world_rank, x->rank, x->comm_name, what, ring_in, prev * 7 + n);
	}
}

static int interposed(void);

/* MPI_Comm_free while non-blocking calls on the communicator are outstanding: MPI keeps it
 * until they complete, so their waits return their results (a vector type's, unpacked at
 * completion, too) and the interposer frees its state only after the last. x's communicator
 * is freed here. Open MPI 4.1's own non-blocking collectives (libnbc) may crash when their
 * communicator is freed under them (a segfault in mca_pml_ob1_isend from NBC_Progress in the
 * wait, at P=4, with the interposer off as well): where the calls go to Open MPI, the waits
 * come first. */
static void check_nbc_freed(struct ctx *x, MPI_Comm *comm)
{
#ifdef OPEN_MPI
	int wait_first = !interposed() || x->spans || x->alone;
#else
	int wait_first = 0;
#endif
	const struct type *vec = move_type("vector(2,1,2,int)");
	size_t n = 100, bytes = n * sizeof(int), vbytes = 5 * (size_t)vec->extent * (size_t)x->size;
	uint8_t *gref = x->ref2, *ggot = x->got2;
	MPI_Request q[2];
	MPI_Status sts[2];
	int i, rc;

	for (i = 0; i < (int)n; i++)
		((int *)(void *)x->send)[i] = (x->rank + 1) * 13 + i;
	memset(x->got, SENTINEL, bytes);
	PMPI_Allreduce(x->send, x->ref, (int)n, MPI_INT, MPI_SUM, x->comm);
	fill_move(x, vec, x->send2, 5, 9);
	memset(gref, SENTINEL, vbytes + 8);
	memset(ggot, SENTINEL, vbytes + 8);
	PMPI_Allgather(x->send2, 5, vec->dt, gref, 5, vec->dt, x->comm);
	rc = MPI_Iallreduce(x->send, x->got, (int)n, MPI_INT, MPI_SUM, x->comm, &q[0]);
	if (rc == MPI_SUCCESS)
		rc = MPI_Iallgather(x->send2, 5, vec->dt, ggot, 5, vec->dt, x->comm, &q[1]);
	expect(x, C_IALLREDUCE, !x->spans);
	expect(x, C_IALLGATHER, !x->spans);
	if (!wait_first)
		MPI_Comm_free(comm);
	if (rc == MPI_SUCCESS)
		rc = MPI_Waitall(2, q, sts);
	if (wait_first)
		MPI_Comm_free(comm);
	fail_rc(x, "MPI_Iallreduce, Iallgather, the communicator freed before the wait", rc);
	compare(x, "MPI_Iallreduce, the communicator freed before the wait", x->got, x->ref, bytes);
	compare(x, "MPI_Iallgather vector(2,1,2,int), the communicator freed before the wait", ggot,
	        gref, vbytes + 8);
}

/* The non-blocking v-collectives and prefix reductions */

/* Whether MPI_X calls reach libshmcoll-mpi.so at all: preloaded and not switched off. Only
 * then may a check scrub the count arrays it passed once the call started (see
 * check_nbc_vcolls): MPI lets an implementation read them until completion. */
static int interposed(void)
{
	const char *pre = getenv("LD_PRELOAD"), *off = getenv("SHMCOLL_MPI");

	return pre && strstr(pre, "libshmcoll-mpi") && !(off && !strcmp(off, "0"));
}

/* k arrays of the communicator's size zeroed, where the interposer takes the calls that
 * got them (take: expect()'s shm, and the interposer preloaded). */
static void scrub(const struct ctx *x, int take, int (*a)[V_MAX_RANKS], int k)
{
	int i;

	for (i = 0; take && !x->alone && interposed() && i < k; i++)
		memset(a[i], 0, (size_t)x->size * sizeof(int));
}

/* Completes the k requests that started (rcs[i] MPI_SUCCESS; the others are left alone)
 * in an order rotated by style, so that a later one may complete first, each in a style of
 * complete()'s; rcs[i] becomes request i's result. */
static void complete_all(MPI_Request *q, int *rcs, int k, int style)
{
	int i, j;

	for (i = 0; i < k; i++) {
		j = (i + style) % k;
		if (rcs[j] == MPI_SUCCESS)
			rcs[j] = complete(&q[j], style + i);
	}
}

/* The rounds of a check that runs its calls out of place (round 0) and in place (1): both,
 * or in --quick mode one, in turn by case and size (the oversubscribed runs stay short). */
static int round_first(const struct ctx *x, int n)
{
	return quick ? (int)((x->seed + (unsigned)n) % 2) : 0;
}

static int round_end(const struct ctx *x, int n)
{
	return quick ? round_first(x, n) + 1 : 2;
}

/* Whether the k-th part (of parts) of a check runs this time: every one, or in --quick
 * mode one in turn by case and size, independently of round_first. */
static int quick_turn(const struct ctx *x, int n, unsigned k, unsigned parts)
{
	return !quick || (x->seed + (unsigned)n) / 2 % parts == k;
}

/* MPI_Iscan, MPI_Iexscan and MPI_Ireduce_scatter (check_reduce_scatter's counts) against
 * PMPI's blocking calls, the three outstanding at once, out of place or in place, completed
 * in a rotated order and style; the counts zeroed once the call started where the interposer
 * takes it. It takes them where it takes the blocking ones but across nodes, for the LOC
 * ops, and, as ever, MPI_Iexscan with a logical op. */
static void check_nbc_scan(struct ctx *x, const struct red *r, int n, const char *label)
{
	int counts[V_MAX_RANKS], cc[1][V_MAX_RANKS], i, rcs[3], most = 0, round;
	const char *how;
	int style = (int)(x->seed % 6), loc = r->o->cls == OC_LOC;
	int shm = red_via_shm(x, r, (size_t)n) && !x->spans && !loc;
	int shm_ex = shm && r->o->cls != OC_LOGIC, shm_rs;
	size_t ext = (size_t)r->t->extent, bytes = (size_t)n * ext, total = 0, mine;
	MPI_Request q[3];
	char what[3][200];

	if (x->size > V_MAX_RANKS)
		return;
	for (i = 0; i < x->size; i++) {
		counts[i] = i % 3 == 1 ? n / 2 : i % 3 == 2 ? 0 : n;
		total += (size_t)counts[i];
		most = counts[i] > most ? counts[i] : most;
	}
	shm_rs = red_via_shm(x, r, (size_t)most) && !x->spans && !loc;
	mine = (size_t)counts[x->rank] * ext;
	/* total >= n: counts[0] is n */
	fill_red(x, r->t, r->o->cls, x->send, total);
	memset(x->ref, SENTINEL, bytes + 8);
	memset(x->tmp, SENTINEL, bytes + 8);
	memset(x->ref2, SENTINEL, mine + 8);
	PMPI_Scan(x->send, x->ref, n, r->t->dt, r->o->op, x->comm);
	PMPI_Exscan(x->send, x->tmp, n, r->t->dt, r->o->op, x->comm);
	PMPI_Reduce_scatter(x->send, x->ref2, counts, r->t->dt, r->o->op, x->comm);
	/* One round, out of place or in place in turn by case and size: every type and op
	 * gets both over the sizes, at two thirds of the calls. */
	round = (int)((x->seed + (unsigned)n) % 2);
	how = round ? " in place" : "";
	memcpy(cc[0], counts, sizeof(counts));
	memset(x->got, SENTINEL, bytes + 8);
	memset(x->aux, SENTINEL, bytes + 8);
	memset(x->got2, SENTINEL, total * ext + 8);
	if (round) {
		memcpy(x->got, x->send, bytes);
		memcpy(x->aux, x->send, bytes);
		memcpy(x->got2, x->send, total * ext);
	}
	rcs[0] = MPI_Iscan(round ? MPI_IN_PLACE : x->send, x->got, n, r->t->dt, r->o->op, x->comm,
	                   &q[0]);
	rcs[1] = MPI_Iexscan(round ? MPI_IN_PLACE : x->send, x->aux, n, r->t->dt, r->o->op, x->comm,
	                     &q[1]);
	rcs[2] = MPI_Ireduce_scatter(round ? MPI_IN_PLACE : x->send, x->got2, cc[0], r->t->dt,
	                             r->o->op, x->comm, &q[2]);
	scrub(x, shm_rs, cc, 1);
	complete_all(q, rcs, 3, style + round);
	expect(x, C_ISCAN, shm);
	expect(x, C_IEXSCAN, shm_ex);
	expect(x, C_IREDUCE_SCATTER, shm_rs);
	snprintf(what[0], sizeof(what[0]), "MPI_Iscan %s %s n=%d%s (3 outstanding)%s", r->t->name,
	         r->o->name, n, how, label);
	snprintf(what[1], sizeof(what[1]), "MPI_Iexscan %s %s n=%d%s (3 outstanding)%s", r->t->name,
	         r->o->name, n, how, label);
	snprintf(what[2], sizeof(what[2]), "MPI_Ireduce_scatter %s %s n=%d%s (3 outstanding)%s",
	         r->t->name, r->o->name, n, how, label);
	for (i = 0; i < 3; i++)
		fail_rc(x, what[i], rcs[i]);
	compare_red(x, what[0], r->t, x->got, x->ref, (size_t)n, 8);
	/* Exscan's rank 0 result is undefined: only the bytes after it. */
	if (x->rank > 0)
		compare_red(x, what[1], r->t, x->aux, x->tmp, (size_t)n, 8);
	else if (!round)
		compare(x, what[1], x->aux + bytes, x->tmp + bytes, 8);
	/* In place, MPI leaves recvbuf past the result unspecified. */
	compare_red(x, what[2], r->t, x->got2, x->ref2, (size_t)counts[x->rank], round ? 0 : 8);
}

/* The arrays the non-blocking calls get: copies of from's k, which scrub() may zero. */
static void v_args(int (*a)[V_MAX_RANKS], const int *const *from, int k)
{
	int i;

	for (i = 0; i < k; i++)
		memcpy(a[i], from[i], sizeof(a[i]));
}

/* Whether to call MPI_Ialltoallv in place, where the interposer takes it (shm) or not.
 * Open MPI 4.1's own (libnbc) leaves something behind that hangs the non-blocking calls
 * after it: at P=2, one of a byte on rank 0 and of nothing on rank 1, then an MPI_Igatherv
 * and MPI_Iscatterv, hang with or without the interposer. So under Open MPI it is checked
 * only where the interposer runs it. */
static int ialltoallv_in_place(const struct ctx *x, int shm)
{
#ifdef MPICH
	(void)x;
	(void)shm;
	return 1;
#else
	return shm && !x->alone && interposed();
#endif
}

/* The v-collectives' non-blocking forms against PMPI's blocking ones, on check_vcolls's
 * layouts (counts that differ by rank, some zero; blocks in reverse rank order with gaps),
 * two calls outstanding at a time and completed in a rotated order and style. Where the
 * interposer takes them, the count and displacement arrays are zeroed once the calls
 * started: what it reads after the start (the unpacking at completion) must be its own
 * copies. MPI_Iallgatherv with MPI_Ialltoallv, then both in place. */
static void check_nbc_vall(struct ctx *x, const struct type *t, int n, const char *label)
{
	int gc[V_MAX_RANKS], gd[V_MAX_RANKS], tc[V_MAX_RANKS], td[V_MAX_RANKS];
	int uc[V_MAX_RANKS], ud[V_MAX_RANKS], a[6][V_MAX_RANKS];
	int shm = !x->spans, style = (int)(x->seed % 6), rcs[2], round;
	size_t ext = (size_t)t->extent, gspan, tspan, uspan, mine;
	MPI_Request q[2];
	char what[2][200];

	gspan = v_layout(x->size, n, 0, gc, gd);
	mine = (size_t)gc[x->rank] * ext;
	fill_move(x, t, x->send, (size_t)gc[x->rank], 31);
	memset(x->ref, SENTINEL, gspan * ext + 8);
	PMPI_Allgatherv(x->send, gc[x->rank], t->dt, x->ref, gc, gd, t->dt, x->comm);
	a2av_layout(x, n, tc, td, uc, ud, &tspan, &uspan);
	for (round = round_first(x, n); round < round_end(x, n); round++) {
		const char *how = round ? " in place" : "";
		int k = round && !ialltoallv_in_place(x, shm) ? 1 : 2;

		memset(x->got, SENTINEL, gspan * ext + 8);
		if (round) {
			memcpy(x->got + (size_t)gd[x->rank] * ext, x->send, mine);
			/* what this rank sends, laid out as what it receives */
			fill_move(x, t, x->got2, uspan, 33);
			memset(x->got2 + uspan * ext, SENTINEL, 8);
			memcpy(x->ref2, x->got2, uspan * ext + 8);
			PMPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, x->ref2, uc, ud,
			               t->dt, x->comm);
		} else {
			fill_move(x, t, x->send2, tspan, 32);
			memset(x->ref2, SENTINEL, uspan * ext + 8);
			memset(x->got2, SENTINEL, uspan * ext + 8);
			PMPI_Alltoallv(x->send2, tc, td, t->dt, x->ref2, uc, ud, t->dt, x->comm);
		}
		v_args(a, (const int *const[]){gc, gd, tc, td, uc, ud}, 6);
		if (round) {
			rcs[0] = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x->got, a[0],
			                         a[1], t->dt, x->comm, &q[0]);
			if (k == 2)
				rcs[1] = MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL,
				                        x->got2, a[4], a[5], t->dt, x->comm, &q[1]);
		} else {
			rcs[0] = MPI_Iallgatherv(x->send, gc[x->rank], t->dt, x->got, a[0], a[1],
			                         t->dt, x->comm, &q[0]);
			rcs[1] = MPI_Ialltoallv(x->send2, a[2], a[3], t->dt, x->got2, a[4], a[5],
			                        t->dt, x->comm, &q[1]);
		}
		scrub(x, shm, a, 6);
		complete_all(q, rcs, k, style + round);
		snprintf(what[0], sizeof(what[0]), "MPI_Iallgatherv %s n=%d%s (%d outstanding)%s",
		         t->name, n, how, k, label);
		snprintf(what[1], sizeof(what[1]), "MPI_Ialltoallv %s n=%d%s (2 outstanding)%s",
		         t->name, n, how, label);
		expect(x, C_IALLGATHERV, shm);
		fail_rc(x, what[0], rcs[0]);
		compare(x, what[0], x->got, x->ref, gspan * ext + 8);
		if (k == 2) {
			expect(x, C_IALLTOALLV, shm);
			fail_rc(x, what[1], rcs[1]);
			compare(x, what[1], x->got2, x->ref2, uspan * ext + 8);
		}
	}
}

/* MPI_Igatherv with MPI_Iscatterv (root rt), then both in place at the root. */
static void check_nbc_vrooted(struct ctx *x, const struct type *t, int n, int rt, const char *label)
{
	int gc[V_MAX_RANKS], gd[V_MAX_RANKS], sc[V_MAX_RANKS], sd[V_MAX_RANKS], a[4][V_MAX_RANKS];
	int me = x->rank == rt, shm = !x->spans, style = (int)(x->seed % 6), rcs[2], round;
	size_t ext = (size_t)t->extent, gspan, sspan, mine;
	MPI_Request q[2];
	char what[2][200];

	gspan = v_layout(x->size, n, 1, gc, gd);
	mine = (size_t)gc[x->rank] * ext;
	fill_move(x, t, x->send, (size_t)gc[x->rank], 34);
	memset(x->ref, SENTINEL, gspan * ext + 8);
	PMPI_Gatherv(x->send, gc[x->rank], t->dt, me ? x->ref : NULL, gc, gd, t->dt, rt, x->comm);
	sspan = v_layout(x->size, n, 2, sc, sd);
	fill_move(x, t, x->send2, sspan, 35);
	memcpy(x->aux, x->send2, sspan * ext);
	memset(x->ref2, SENTINEL, (size_t)sc[x->rank] * ext + 8);
	PMPI_Scatterv(me ? x->send2 : NULL, sc, sd, t->dt, x->ref2, sc[x->rank], t->dt, rt,
	              x->comm);
	for (round = round_first(x, n); round < round_end(x, n); round++) {
		const char *how = round ? " in place" : "";

		memset(x->got, SENTINEL, gspan * ext + 8);
		memset(x->got2, SENTINEL, (size_t)sc[x->rank] * ext + 8);
		v_args(a, (const int *const[]){gc, gd, sc, sd}, 4);
		if (round && me) {
			memcpy(x->got + (size_t)gd[rt] * ext, x->send, mine);
			rcs[0] = MPI_Igatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x->got, a[0],
			                      a[1], t->dt, rt, x->comm, &q[0]);
			rcs[1] = MPI_Iscatterv(x->send2, a[2], a[3], t->dt, MPI_IN_PLACE, 0,
			                       MPI_DATATYPE_NULL, rt, x->comm, &q[1]);
		} else if (round) {
			rcs[0] = MPI_Igatherv(x->send, gc[x->rank], t->dt, NULL, NULL, NULL,
			                      MPI_DATATYPE_NULL, rt, x->comm, &q[0]);
			rcs[1] = MPI_Iscatterv(NULL, NULL, NULL, MPI_DATATYPE_NULL, x->got2,
			                       sc[x->rank], t->dt, rt, x->comm, &q[1]);
		} else {
			rcs[0] = MPI_Igatherv(x->send, gc[x->rank], t->dt, me ? x->got : NULL, a[0],
			                      a[1], t->dt, rt, x->comm, &q[0]);
			rcs[1] = MPI_Iscatterv(me ? x->send2 : NULL, a[2], a[3], t->dt, x->got2,
			                       sc[x->rank], t->dt, rt, x->comm, &q[1]);
		}
		scrub(x, shm, a, 4);
		complete_all(q, rcs, 2, style + 2 + round);
		expect(x, C_IGATHERV, shm);
		expect(x, C_ISCATTERV, shm);
		snprintf(what[0], sizeof(what[0]),
		         "MPI_Igatherv %s n=%d root=%d%s (2 outstanding)%s", t->name, n, rt, how,
		         label);
		snprintf(what[1], sizeof(what[1]),
		         "MPI_Iscatterv %s n=%d root=%d%s (2 outstanding)%s", t->name, n, rt, how,
		         label);
		fail_rc(x, what[0], rcs[0]);
		fail_rc(x, what[1], rcs[1]);
		compare(x, what[0], x->got, x->ref, gspan * ext + 8);
		/* In place, the root's sendbuf stays as it was. */
		if (round && me)
			compare(x, what[1], x->send2, x->aux, sspan * ext);
		else
			compare(x, what[1], x->got2, x->ref2, (size_t)sc[x->rank] * ext + 8);
	}
}

/* Both, or in --quick mode one or the other in turn. */
static void check_nbc_vcolls(struct ctx *x, const struct type *t, int n, int rt, const char *label)
{
	if (x->size > V_MAX_RANKS)
		return;
	if (quick_turn(x, n, 0, 2))
		check_nbc_vall(x, t, n, label);
	if (quick_turn(x, n, 1, 2))
		check_nbc_vrooted(x, t, n, rt, label);
}

/* The non-blocking v-collectives with different datatypes of one signature on different
 * ranks (check_mixed's), each pair outstanding at once; counts are in vectors, 2 ints each.
 * Vectors sent and received as ints (MPI_Iallgatherv), with ints sent and received as
 * vectors (MPI_Ialltoallv). */
static void check_nbc_vmixed_all(struct ctx *x, int n, const char *label)
{
	const struct type *vec = move_type("vector(2,1,2,int)");
	int gc[V_MAX_RANKS], gd[V_MAX_RANKS], tc[V_MAX_RANKS], td[V_MAX_RANKS];
	int uc[V_MAX_RANKS], ud[V_MAX_RANKS], ic[V_MAX_RANKS], id[V_MAX_RANKS];
	int jc[V_MAX_RANKS], jd[V_MAX_RANKS], i, rcs[2], shm = !x->spans;
	int style = (int)(x->seed % 6);
	size_t ve = (size_t)vec->extent, gspan, tspan, uspan, gbytes, ubytes;
	MPI_Request q[2];
	char what[2][200];

	/* Iallgatherv: gc vectors from each, received as 2 gc ints at 2 gd; Ialltoallv: 2 tc
	 * ints at 2 td sent, uc vectors at ud received. */
	gspan = v_layout(x->size, n, 0, gc, gd);
	a2av_layout(x, n, tc, td, uc, ud, &tspan, &uspan);
	for (i = 0; i < x->size; i++) {
		ic[i] = 2 * gc[i];
		id[i] = 2 * gd[i];
		jc[i] = 2 * tc[i];
		jd[i] = 2 * td[i];
	}
	gbytes = 2 * gspan * sizeof(int);
	ubytes = uspan * ve;
	fill_move(x, vec, x->send, (size_t)gc[x->rank], 36);
	fill_move(x, move_type("int"), x->send2, 2 * tspan, 37);
	memset(x->ref, SENTINEL, gbytes + 8);
	memset(x->got, SENTINEL, gbytes + 8);
	memset(x->ref2, SENTINEL, ubytes + 8);
	memset(x->got2, SENTINEL, ubytes + 8);
	PMPI_Allgatherv(x->send, gc[x->rank], vec->dt, x->ref, ic, id, MPI_INT, x->comm);
	PMPI_Alltoallv(x->send2, jc, jd, MPI_INT, x->ref2, uc, ud, vec->dt, x->comm);
	rcs[0] =
	    MPI_Iallgatherv(x->send, gc[x->rank], vec->dt, x->got, ic, id, MPI_INT, x->comm, &q[0]);
	rcs[1] =
	    MPI_Ialltoallv(x->send2, jc, jd, MPI_INT, x->got2, uc, ud, vec->dt, x->comm, &q[1]);
	complete_all(q, rcs, 2, style);
	expect(x, C_IALLGATHERV, shm);
	expect(x, C_IALLTOALLV, shm);
	snprintf(what[0], sizeof(what[0]), "MPI_Iallgatherv %s to int, n=%d%s", vec->name, n,
	         label);
	snprintf(what[1], sizeof(what[1]), "MPI_Ialltoallv int to %s, n=%d%s", vec->name, n, label);
	fail_rc(x, what[0], rcs[0]);
	fail_rc(x, what[1], rcs[1]);
	compare(x, what[0], x->got, x->ref, gbytes + 8);
	compare(x, what[1], x->got2, x->ref2, ubytes + 8);
}

/* Ints gathered into vectors (MPI_Igatherv), with the root's vectors scattered as ints, its
 * own block received as contiguous(2,int) (MPI_Iscatterv); root rt. */
static void check_nbc_vmixed_rooted(struct ctx *x, int n, int rt, const char *label)
{
	const struct type *vec = move_type("vector(2,1,2,int)"),
	                  *con = move_type("contiguous(2,int)");
	int gc[V_MAX_RANKS], gd[V_MAX_RANKS], tc[V_MAX_RANKS], td[V_MAX_RANKS], rcs[2];
	int me = x->rank == rt, shm = !x->spans, style = (int)(x->seed % 6);
	size_t ve = (size_t)vec->extent, gspan, tspan, gbytes, sbytes;
	MPI_Request q[2];
	char what[2][200];

	/* Igatherv: 2 gc[rank] ints from each, gathered as gc vectors at gd; Iscatterv: tc
	 * (as a scatterv's layout) vectors at td from the root, received as ints (the
	 * root's own as contiguous(2,int)). */
	gspan = v_layout(x->size, n, 1, gc, gd);
	tspan = v_layout(x->size, n, 2, tc, td);
	gbytes = gspan * ve;
	sbytes = 2 * (size_t)tc[x->rank] * sizeof(int);
	fill_move(x, move_type("int"), x->send, 2 * (size_t)gc[x->rank], 38);
	fill_move(x, vec, x->send2, tspan, 39);
	memset(x->ref, SENTINEL, gbytes + 8);
	memset(x->got, SENTINEL, gbytes + 8);
	memset(x->ref2, SENTINEL, sbytes + 8);
	memset(x->got2, SENTINEL, sbytes + 8);
	PMPI_Gatherv(x->send, 2 * gc[x->rank], MPI_INT, me ? x->ref : NULL, gc, gd, vec->dt, rt,
	             x->comm);
	PMPI_Scatterv(me ? x->send2 : NULL, tc, td, vec->dt, x->ref2,
	              me ? tc[x->rank] : 2 * tc[x->rank], me ? con->dt : MPI_INT, rt, x->comm);
	rcs[0] = MPI_Igatherv(x->send, 2 * gc[x->rank], MPI_INT, me ? x->got : NULL, gc, gd,
	                      vec->dt, rt, x->comm, &q[0]);
	rcs[1] = MPI_Iscatterv(me ? x->send2 : NULL, tc, td, vec->dt, x->got2,
	                       me ? tc[x->rank] : 2 * tc[x->rank], me ? con->dt : MPI_INT, rt,
	                       x->comm, &q[1]);
	complete_all(q, rcs, 2, style + 1);
	expect(x, C_IGATHERV, shm);
	expect(x, C_ISCATTERV, shm);
	snprintf(what[0], sizeof(what[0]), "MPI_Igatherv int into %s, n=%d root=%d%s", vec->name, n,
	         rt, label);
	snprintf(what[1], sizeof(what[1]), "MPI_Iscatterv %s to int, n=%d root=%d%s", vec->name, n,
	         rt, label);
	fail_rc(x, what[0], rcs[0]);
	fail_rc(x, what[1], rcs[1]);
	compare(x, what[0], x->got, x->ref, gbytes + 8);
	compare(x, what[1], x->got2, x->ref2, sbytes + 8);
}

/* Both, or in --quick mode one or the other in turn. */
static void check_nbc_vmixed(struct ctx *x, int n, int rt, const char *label)
{
	if (x->size > V_MAX_RANKS)
		return;
	if (quick_turn(x, n, 0, 2))
		check_nbc_vmixed_all(x, n, label);
	if (quick_turn(x, n, 1, 2))
		check_nbc_vmixed_rooted(x, n, rt, label);
}

/* Every intercepted collective over the matrix of the level. */
static void run_matrix(struct ctx *x, enum level level, const char *label)
{
	struct red reds[256];
	const int *sizes = level == TINY ? sizes_quick : sizes_full;
	size_t nsizes = level == TINY ? ARRAY_SIZE(sizes_quick) : ARRAY_SIZE(sizes_full);
	size_t nred = red_cases(reds, ARRAY_SIZE(reds), level), i, s;
	int rt[3], nroots = roots(x->size, rt), k;

	check_barrier(x);
	for (s = 0; s < nsizes; s++) {
		int n = sizes[s];

		for (i = 0; i < nred; i++) {
			/* One pair type stands for all where the interposer
			 * passes the LOC ops on (past their size limit, or across
			 * nodes: the others would check the MPI against itself),
			 * and past 1000 pairs (one fold serves every type, and
			 * MPICH reduces pairs with holes slowly: at 70000, some
			 * 20 ms a call, and the interposer takes those). */
			if (reds[i].o->cls == OC_LOC &&
			    reds[i].t != &pair_by_dt(MPI_DOUBLE_INT)->t &&
			    (n > 1000 || !red_via_shm(x, &reds[i], (size_t)n)))
				continue;
			x->seed++;
			check_allreduce(x, &reds[i], n, label);
			check_reduce_scatter_block(x, &reds[i], n, label);
			check_reduce_scatter(x, &reds[i], n, label);
			check_scan(x, &reds[i], n, 0, label);
			check_scan(x, &reds[i], n, 1, label);
			for (k = 0; k < nroots; k++)
				check_reduce(x, &reds[i], n, rt[k], label);
			check_nbc_red(x, &reds[i], n, rt[x->seed % (unsigned)nroots], label);
			/* --quick: the first case and a quarter of the others (the
			 * blocking twins' checks cover the arithmetic; these are
			 * about the requests). */
			if (i == 0 || quick_turn(x, n, 0, 4))
				check_nbc_scan(x, &reds[i], n, label);
		}
		for (i = 0; i < ARRAY_SIZE(move_types); i++) {
			const struct type *t = &move_types[i];

			if ((level == SMALL &&
			     !listed(t->name, small_moves, ARRAY_SIZE(small_moves))) ||
			    (level == TINY && !listed(t->name, tiny_moves, ARRAY_SIZE(tiny_moves))))
				continue;
			/* Types with holes: a few elements, since the reference
			 * itself fails with many: MPICH 4.0.2 truncates such
			 * messages (its binomial scatter of 70000 MPI_SHORT_INT,
			 * its in-place alltoall of 1000 MPI_DOUBLE_INT). */
			if (has_holes(t) && n > 7)
				continue;
			x->seed++;
			check_allgather(x, t, n, label);
			check_alltoall(x, t, n, label);
			for (k = 0; k < nroots; k++) {
				check_bcast(x, t, n, rt[k], label);
				check_gather(x, t, n, rt[k], label);
				check_scatter(x, t, n, rt[k], label);
				check_vcolls(x, t, n, rt[k], label);
			}
			check_nbc_move(x, t, n, rt[x->seed % (unsigned)nroots], label);
			check_nbc_vcolls(x, t, n, rt[x->seed % (unsigned)nroots], label);
		}
		x->seed++;
		check_mixed(x, n, label);
		check_voverlap(x, n, label);
		check_nbc_many(x, n, label);
		check_nbc_vmixed(x, n, rt[x->seed % (unsigned)nroots], label);
	}
	if (level != TINY)
		check_loc_limit(x, label);
	check_barrier(x);
}

static atomic_int self_tags;

static int ctx_init(struct ctx *x, MPI_Comm comm, const char *name)
{
	memset(x, 0, sizeof(*x));
	x->comm = comm;
	x->comm_name = name;
	x->self_tag = atomic_fetch_add(&self_tags, 1);
	MPI_Comm_rank(MPI_COMM_WORLD, &x->world_rank);
	MPI_Comm_rank(comm, &x->rank);
	MPI_Comm_size(comm, &x->size);
	x->alone = every_rank_alone(x->size);
	x->spans = spans_nodes(x->size);
	x->cap = (size_t)MAX_ELEMS * MAX_EXTENT * (size_t)x->size + 64;
	x->send = malloc(x->cap);
	x->ref = malloc(x->cap);
	x->got = malloc(x->cap);
	x->aux = malloc(x->cap);
	x->tmp = malloc(x->cap);
	x->send2 = malloc(x->cap);
	x->ref2 = malloc(x->cap);
	x->got2 = malloc(x->cap);
	x->seed = 1;
	return x->send && x->ref && x->got && x->aux && x->tmp && x->send2 && x->ref2 && x->got2
	           ? 0
	           : -1;
}

static void ctx_fini(struct ctx *x, struct ctx *total)
{
	int c;

	free(x->send);
	free(x->ref);
	free(x->got);
	free(x->aux);
	free(x->tmp);
	free(x->send2);
	free(x->ref2);
	free(x->got2);
	total->checks += x->checks;
	total->fails += x->fails;
	for (c = 0; c < C_COUNT; c++) {
		total->want[c][0] += x->want[c][0];
		total->want[c][1] += x->want[c][1];
	}
}

/* Each thread checks on its own communicator, at the same time as the other. */
struct thread_arg {
	struct ctx x;
	MPI_Comm comm;
	char name[32];
	int rc;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;

	a->rc = ctx_init(&a->x, a->comm, a->name);
	if (!a->rc)
		run_matrix(&a->x, quick ? TINY : SMALL, " (thread)");
	return NULL;
}

/* A user-defined sum over MPI_INT or contiguous(2, MPI_INT). */
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
	int n = *dt == t_contig2 ? 2 * *len : *len, i;
	const int *a = in;
	int *b = inout;

	for (i = 0; i < n; i++)
		b[i] += a[i];
}

static void make_types(void)
{
	MPI_Datatype v;

	MPI_Type_contiguous(2, MPI_INT, &t_contig2);
	MPI_Type_commit(&t_contig2);
	/* Two ints with a gap of one: extent 3 ints once resized. */
	MPI_Type_vector(2, 1, 2, MPI_INT, &v);
	MPI_Type_create_resized(v, 0, 3 * (MPI_Aint)sizeof(int), &t_vector);
	MPI_Type_free(&v);
	MPI_Type_commit(&t_vector);
	MPI_Op_create(user_sum, 1, &op_user);
	t_contig2_int.dt = t_contig2;
	move_types[ARRAY_SIZE(move_types) - 2].dt = t_contig2;
	move_types[ARRAY_SIZE(move_types) - 1].dt = t_vector;
	op_usersum.op = op_user;
}

static void free_types(void)
{
	MPI_Type_free(&t_contig2);
	MPI_Type_free(&t_vector);
	MPI_Op_free(&op_user);
}

int main(int argc, char **argv)
{
	struct ctx total = {0}, x;
	int loops = 20, threads = 0, provided, wrank, wsize, i, rc = 0;
	unsigned long sum[2], mine[2];
	MPI_Comm c;
	char name[32];

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			quick = 1;
		} else if (strcmp(argv[i], "--threads") == 0) {
			threads = 1;
		} else if (strcmp(argv[i], "--loops") == 0 && i + 1 < argc) {
			loops = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: mpi_check [--quick] [--loops N] [--threads]\n");
			return 2;
		}
	}
	if (threads) {
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	} else {
		MPI_Init(&argc, &argv);
		provided = MPI_THREAD_SINGLE;
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
	MPI_Comm_size(MPI_COMM_WORLD, &wsize);
	make_types();

	/* MPI_COMM_WORLD, the full matrix. */
	if (ctx_init(&x, MPI_COMM_WORLD, "MPI_COMM_WORLD")) {
		fprintf(stderr, "mpi_check: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	run_matrix(&x, quick ? SMALL : FULL, "");
	ctx_fini(&x, &total);

	/* MPI_COMM_SELF: a communicator of one. */
	ctx_init(&x, MPI_COMM_SELF, "MPI_COMM_SELF");
	run_matrix(&x, quick ? TINY : SMALL, "");
	ctx_fini(&x, &total);

	/* A dup of MPI_COMM_WORLD: its own state, not the world's. */
	MPI_Comm_dup(MPI_COMM_WORLD, &c);
	ctx_init(&x, c, "dup(MPI_COMM_WORLD)");
	run_matrix(&x, quick ? TINY : SMALL, "");
	ctx_fini(&x, &total);
	MPI_Comm_free(&c);

	/* A dup freed while calls on it are outstanding. */
	MPI_Comm_dup(MPI_COMM_WORLD, &c);
	ctx_init(&x, c, "dup(MPI_COMM_WORLD), freed early");
	check_nbc_freed(&x, &c);
	ctx_fini(&x, &total);

	/* Odd and even ranks, split, used and freed again and again: each
	 * free must release the communicator's state, each split start anew. */
	for (i = 0; i < loops; i++) {
		MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wsize - wrank, &c);
		snprintf(name, sizeof(name), "split #%d", i);
		ctx_init(&x, c, name);
		if (i == 0)
			run_matrix(&x, quick ? TINY : SMALL, "");
		else
			check_barrier(&x);
		/* A few calls on every later one. */
		x.seed += (unsigned)i;
		check_allreduce(&x, &(struct red){&types[4], &ops[0]}, 7, "");
		check_bcast(&x, &move_types[3], 1000, x.size - 1, "");
		check_gather(&x, &move_types[4], 7, x.size / 2, "");
		check_alltoall(&x, &move_types[0], 7, "");
		ctx_fini(&x, &total);
		MPI_Comm_free(&c);
	}

	/* Two threads at once, each on its own dup. */
	if (threads && provided < MPI_THREAD_MULTIPLE) {
		if (wrank == 0)
			printf("mpi_check: --threads: the MPI provides thread level %d only: "
			       "skipped\n",
			       provided);
	} else if (threads) {
		struct thread_arg ta[2];
		pthread_t tid[2];

		for (i = 0; i < 2; i++) {
			MPI_Comm_dup(MPI_COMM_WORLD, &ta[i].comm);
			snprintf(ta[i].name, sizeof(ta[i].name), "thread %d's dup", i);
		}
		for (i = 0; i < 2; i++)
			pthread_create(&tid[i], NULL, thread_main, &ta[i]);
		for (i = 0; i < 2; i++) {
			pthread_join(tid[i], NULL);
			ctx_fini(&ta[i].x, &total);
			MPI_Comm_free(&ta[i].comm);
		}
	}
	free_types();

	mine[0] = total.checks;
	mine[1] = total.fails;
	PMPI_Allreduce(mine, sum, 2, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
	PMPI_Allreduce(MPI_IN_PLACE, total.want, 2 * C_COUNT, MPI_UNSIGNED_LONG, MPI_SUM,
	               MPI_COMM_WORLD);
	if (wrank == 0) {
		printf("mpi_check: P=%d: %lu checks, %lu failed\n", wsize, sum[0], sum[1]);
		for (i = 0; i < C_COUNT; i++)
			printf("mpi_check: expect %s %lu via shmcoll, %lu fallback\n",
			       coll_names[i], total.want[i][0], total.want[i][1]);
	}
	rc = sum[1] ? 1 : 0;
	MPI_Finalize();
	return rc;
}
