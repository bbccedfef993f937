/* datatype.c - what shmcoll can run of an MPI call's datatypes and ops:
 * the reductions' type and op tables, a side's signature bytes and packing,
 * the logical ops' 0-or-1 inputs, and the v-collectives' sides. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "mpi/shmcoll_mpi.h"

enum kind { K_NONE, K_SINT, K_UINT, K_FLOAT };

/* Reduction types, mapped by kind and size (MPI_LONG is 4 or 8 bytes). The
 * handles are address constants in Open MPI and integers in MPICH: both
 * may initialise a static table. */
static const struct {
	MPI_Datatype dt;
	enum kind kind;
} red_types[] = {
    {MPI_INT, K_SINT},
    {MPI_DOUBLE, K_FLOAT},
    {MPI_FLOAT, K_FLOAT},
    {MPI_LONG, K_SINT},
    {MPI_UNSIGNED, K_UINT},
    {MPI_UNSIGNED_LONG, K_UINT},
    {MPI_LONG_LONG, K_SINT},
    {MPI_UNSIGNED_LONG_LONG, K_UINT},
    {MPI_SIGNED_CHAR, K_SINT},
    {MPI_UNSIGNED_CHAR, K_UINT},
    {MPI_INT8_T, K_SINT},
    {MPI_UINT8_T, K_UINT},
    {MPI_INT32_T, K_SINT},
    {MPI_UINT32_T, K_UINT},
    {MPI_INT64_T, K_SINT},
    {MPI_UINT64_T, K_UINT},
    /* Not MPI_OFFSET: Open MPI 4.1 reduces it as unsigned (MIN of -2 and
     * 4 is 4), and the results must be the MPI's own. */
    {MPI_AINT, K_SINT},
    {MPI_COUNT, K_SINT},
};

/* The logical ops run on inputs made 0 or 1 first (logical_in): then
 * LAND is their MIN, LOR their MAX and LXOR their BXOR, and each result is
 * 0 or 1 in the type's width, as MPI's (C's &&, || and !=). */
enum { OP_ARITH, OP_BITS, OP_LOGIC };
static const struct {
	MPI_Op op;
	shmcoll_op sop;
	int cls;
} red_ops[] = {
    {MPI_SUM, SHMCOLL_SUM, OP_ARITH},  {MPI_MAX, SHMCOLL_MAX, OP_ARITH},
    {MPI_MIN, SHMCOLL_MIN, OP_ARITH},  {MPI_PROD, SHMCOLL_PROD, OP_ARITH},
    {MPI_BAND, SHMCOLL_BAND, OP_BITS}, {MPI_BOR, SHMCOLL_BOR, OP_BITS},
    {MPI_BXOR, SHMCOLL_BXOR, OP_BITS}, {MPI_LAND, SHMCOLL_MIN, OP_LOGIC},
    {MPI_LOR, SHMCOLL_MAX, OP_LOGIC},  {MPI_LXOR, SHMCOLL_BXOR, OP_LOGIC},
};

/* shmcoll's dtype for a reduction type of each kind and size. */
static const struct {
	enum kind kind;
	int size;
	shmcoll_dtype sdt;
} red_map[] = {
    {K_SINT, 1, SHMCOLL_INT8},     {K_SINT, 4, SHMCOLL_INT32},    {K_SINT, 8, SHMCOLL_INT64},
    {K_UINT, 1, SHMCOLL_UINT8},    {K_UINT, 4, SHMCOLL_UINT32},   {K_UINT, 8, SHMCOLL_UINT64},
    {K_FLOAT, 4, SHMCOLL_FLOAT32}, {K_FLOAT, 8, SHMCOLL_FLOAT64},
};

/* 0 and shmcoll's dtype and op for a reduction shmcoll can run, else -1. A
 * bitwise or logical op on a float is an MPI error: PMPI reports it, as a
 * logical op on MPI_AINT or MPI_COUNT (not C integers) may be. */
int red_args(MPI_Datatype dt, MPI_Op op, shmcoll_dtype *sdt, shmcoll_op *sop)
{
	enum kind kind = K_NONE;
	size_t i, o;
	int size;

	for (i = 0; i < ARRAY_SIZE(red_types) && kind == K_NONE; i++)
		if (red_types[i].dt == dt)
			kind = red_types[i].kind;
	if (kind == K_NONE || PMPI_Type_size(dt, &size) != MPI_SUCCESS)
		return -1;
	for (o = 0; o < ARRAY_SIZE(red_ops); o++)
		if (red_ops[o].op == op)
			break;
	if (o == ARRAY_SIZE(red_ops) || (red_ops[o].cls != OP_ARITH && kind == K_FLOAT) ||
	    (red_ops[o].cls == OP_LOGIC && (dt == MPI_AINT || dt == MPI_COUNT)))
		return -1;
	for (i = 0; i < ARRAY_SIZE(red_map); i++) {
		if (red_map[i].kind == kind && red_map[i].size == size) {
			*sdt = red_map[i].sdt;
			*sop = red_ops[o].sop;
			return 0;
		}
	}
	return -1;
}

/* Whether dt's data is its size in bytes at offset 0 of each element, in
 * signature order: a named type without holes, or a dup, contiguous run or
 * resizing (to its own size) of such a type. Any other constructor may put
 * data in another order than memory's (an indexed type with its blocks
 * backwards), so it is packed even where it has no holes. */
static int contig_type(MPI_Datatype dt, int depth)
{
	int ni, na, nd, comb, ints[1], rc;
	MPI_Aint lb, ext, tlb, text, addrs[2];
	MPI_Datatype old[1];
	MPI_Count size;

	if (depth > 16 || PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS ||
	    PMPI_Type_size_x(dt, &size) != MPI_SUCCESS ||
	    PMPI_Type_get_extent(dt, &lb, &ext) != MPI_SUCCESS ||
	    PMPI_Type_get_true_extent(dt, &tlb, &text) != MPI_SUCCESS)
		return 0;
	if (size <= 0 || lb != 0 || tlb != 0 || ext != size || text != size)
		return 0;
	if (comb == MPI_COMBINER_NAMED)
		return 1;
	if ((comb != MPI_COMBINER_DUP && comb != MPI_COMBINER_CONTIGUOUS &&
	     comb != MPI_COMBINER_RESIZED) ||
	    ni > 1 || na > 2 || nd != 1)
		return 0;
	if (PMPI_Type_get_contents(dt, ni, na, nd, ints, addrs, old) != MPI_SUCCESS)
		return 0;
	rc = contig_type(old[0], depth + 1);
	/* The handles of derived types get_contents gives are the caller's. */
	if (PMPI_Type_get_envelope(old[0], &ni, &na, &nd, &comb) == MPI_SUCCESS &&
	    comb != MPI_COMBINER_NAMED)
		PMPI_Type_free(&old[0]);
	return rc;
}

/* Fills s for count elements of dt: 0, or -1 (an invalid count or type: the
 * call goes to PMPI, which reports it). */
int side_of(MPI_Datatype dt, int count, struct side *s)
{
	/* A few named types each thread saw last: a named type lives as long
	 * as MPI and never changes, so its handle keeps meaning the same
	 * layout, and the queries (a quarter of the interposer's cost on a
	 * small call) run once per type. Derived types are not cached: a
	 * freed one's handle may come back naming another. */
	static _Thread_local struct {
		MPI_Datatype dt;
		struct side s; /* size 0: empty */
	} seen[4];
	static _Thread_local unsigned next;
	int ni, na, nd, comb;
	MPI_Aint lb;
	unsigned i;

	if (count < 0 || dt == MPI_DATATYPE_NULL)
		return -1;
	for (i = 0; i < ARRAY_SIZE(seen); i++)
		if (seen[i].s.size && seen[i].dt == dt) {
			*s = seen[i].s;
			s->bytes = (long long)count * s->size;
			return 0;
		}
	if (PMPI_Type_size_x(dt, &s->size) != MPI_SUCCESS || s->size < 0 ||
	    PMPI_Type_get_extent(dt, &lb, &s->extent) != MPI_SUCCESS)
		return -1;
	if (s->size && (long long)count > LLONG_MAX / s->size)
		return -1;
	s->bytes = (long long)count * s->size;
	s->contig = contig_type(dt, 0);
	if (s->size && PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) == MPI_SUCCESS &&
	    comb == MPI_COMBINER_NAMED) {
		i = next++ % ARRAY_SIZE(seen);
		seen[i].dt = dt;
		seen[i].s = *s;
	}
	return 0;
}

/* Packs (or, with unpack, unpacks) count elements of dt at buf to or from
 * their packed form at packed, in pieces of at most INT_MAX bytes (PMPI's
 * sizes are ints). 0, or the MPI error; a packed form of another length
 * than the signature's bytes (a representation that is not the native
 * one) is MPI_ERR_TYPE. */
int pack_side(int unpack, void *buf, int count, MPI_Datatype dt, const struct side *s, void *packed,
              MPI_Comm comm)
{
	long long per = s->size ? INT_MAX / s->size : 0, at = 0, k;
	int pos, rc;

	if (!s->bytes)
		return MPI_SUCCESS;
	if (per < 1)
		return MPI_ERR_TYPE; /* one element of more than INT_MAX bytes */
	for (; at < count; at += k) {
		k = count - at < per ? count - at : per;
		pos = 0;
		if (unpack)
			rc = PMPI_Unpack((char *)packed + at * s->size, (int)(k * s->size), &pos,
			                 (char *)buf + at * s->extent, (int)k, dt, comm);
		else
			rc = PMPI_Pack((char *)buf + at * s->extent, (int)k, dt,
			               (char *)packed + at * s->size, (int)(k * s->size), &pos,
			               comm);
		if (rc != MPI_SUCCESS)
			return rc;
		if (pos != k * s->size)
			return MPI_ERR_TYPE;
	}
	return MPI_SUCCESS;
}

/* The same for n blocks of count elements each, block i at buf + i * count *
 * extent and at packed + i * count * size (a gather's or alltoall's
 * buffer). */
int pack_blocks(int unpack, void *buf, int count, MPI_Datatype dt, const struct side *s, int n,
                void *packed, MPI_Comm comm)
{
	int i, rc = MPI_SUCCESS;

	for (i = 0; i < n && rc == MPI_SUCCESS; i++)
		rc = pack_side(unpack, (char *)buf + (MPI_Aint)i * count * s->extent, count, dt, s,
		               (char *)packed + (long long)i * s->bytes, comm);
	return rc;
}

/* Whether op is one of the logical ops (red_ops). */
int is_logical(MPI_Op op)
{
	return op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR;
}

/* The input of a logical op, each of its n elements (of shmcoll type sdt,
 * an integer of 1, 4 or 8 bytes) made 0 or 1, in scratch buffer 3; NULL
 * with the call failed. The call then runs out of place from there,
 * whatever MPI_IN_PLACE said: the result lands where the in-place form
 * wants it. An MPI applies the op only where two values meet: a result of
 * one contribution is that input unchanged (5 stays 5). So a communicator
 * of one rank takes its input as it is (in is returned), and a scan's rank
 * 0 keeps its own (MPI_Scan); MPI_Exscan, where rank 1 gets rank 0's input
 * unchanged, goes to PMPI with a logical op. */
/* n elements of shmcoll type sdt (an integer of 1, 4 or 8 bytes) at src, each made 0 or 1,
 * into dst. */
void to_logical(void *dst, const void *src, size_t n, shmcoll_dtype sdt)
{
	size_t es = shmcoll_dtype_size(sdt), i;
	const uint8_t *p = src;
	uint8_t *out = dst;

	for (i = 0; i < n; i++) {
		if (es == 1) {
			out[i] = p[i] != 0;
		} else if (es == 4) {
			uint32_t v;

			memcpy(&v, p + i * 4, 4);
			v = v != 0;
			memcpy(out + i * 4, &v, 4);
		} else {
			uint64_t v;

			memcpy(&v, p + i * 8, 8);
			v = v != 0;
			memcpy(out + i * 8, &v, 8);
		}
	}
}

const void *logical_in(struct cstate *st, enum coll c, const void *in, size_t n, shmcoll_dtype sdt)
{
	uint8_t *out;

	if (st->size == 1)
		return in;
	if (!(out = scratch(st, 3, n * shmcoll_dtype_size(sdt) + 1))) {
		fail(st, c, "a buffer for the logical op's input", -ENOMEM);
		return NULL;
	}
	to_logical(out, in, n, sdt);
	return out;
}

/* Whether two non-empty blocks of a side moved in order overlap. One pass settles blocks in
 * rank order; any other layout is checked pair by pair (rare, and P is a node's ranks). */
static int vside_overlaps(const struct vside *v, int P)
{
	size_t end = 0;
	int i, j, ordered = 1;

	for (i = 0; i < P && ordered; i++) {
		if (!v->bc[i])
			continue;
		ordered = v->bd[i] >= end;
		end = v->bd[i] + v->bc[i];
	}
	if (ordered)
		return 0;
	for (i = 0; i < P; i++)
		for (j = i + 1; j < P; j++)
			if (v->bc[i] && v->bc[j] && v->bd[i] < v->bd[j] + v->bc[j] &&
			    v->bd[j] < v->bd[i] + v->bc[i])
				return 1;
	return 0;
}

/* Fills v for P ranks' blocks: 0, or -1 (a negative count or an invalid
 * type: an erroneous call, PMPI reports it). bc and bd are vz + 2 * which
 * * P and the P after. Displacements may be negative (they only name
 * addresses, and the root's or a rank's own need not look like the
 * others'): a side moved in order counts its byte displacements from the
 * lowest. Receive blocks that overlap (which = 1) make an erroneous call
 * that both MPIs run all the same (MPICH's allgatherv4 has several ranks'
 * blocks at displacement 0); shmcoll refuses it, and only the root of a
 * gatherv knows its layout, so such a side is received packed, as a
 * derived type's is, and unpacked block by block in rank order: the last
 * rank's bytes win where blocks overlap. */
int vside_of(size_t *vz, int P, int which, MPI_Datatype dt, const int *counts, const int *displs,
             struct vside *v)
{
	int i, low = 0;

	if (!counts || !displs || side_of(dt, 1, &v->t) < 0)
		return -1;
	v->counts = counts;
	v->displs = displs;
	v->bc = vz + 2 * (size_t)which * (size_t)P;
	v->bd = v->bc + P;
	v->total = 0;
	for (i = 0; i < P; i++) {
		if (counts[i] < 0)
			return -1;
		if (displs[i] < low)
			low = displs[i];
	}
	v->base = v->t.contig ? (MPI_Aint)low * v->t.extent : 0;
	for (i = 0; i < P; i++) {
		v->bc[i] = (size_t)counts[i] * (size_t)v->t.size;
		v->bd[i] =
		    v->t.contig ? (size_t)((MPI_Aint)(displs[i] - low) * v->t.extent) : v->total;
		v->total += v->bc[i];
	}
	if (which == 1 && v->t.contig && vside_overlaps(v, P)) {
		v->t.contig = 0;
		v->base = 0;
		for (i = 0, v->total = 0; i < P; i++) {
			v->bd[i] = v->total;
			v->total += v->bc[i];
		}
	}
	return 0;
}

/* Packs (or unpacks) block only of v (-1: every block) between buf and
 * packed. */
int vpack(int unpack, void *buf, MPI_Datatype dt, const struct vside *v, int P, int only,
          void *packed, MPI_Comm comm)
{
	struct side s = v->t;
	int i, rc = MPI_SUCCESS;

	for (i = 0; i < P && rc == MPI_SUCCESS; i++) {
		if (only >= 0 && i != only)
			continue;
		s.bytes = (long long)v->bc[i];
		rc = pack_side(unpack, (char *)buf + (MPI_Aint)v->displs[i] * v->t.extent,
		               v->counts[i], dt, &s, (char *)packed + v->bd[i], comm);
	}
	return rc;
}
