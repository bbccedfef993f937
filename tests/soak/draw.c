/* draw.c - the soak's call sequence: a pure function of the seed, so every
 * rank draws the same collective, dtype, op, count, root and buffer form. */
#include "tests/soak/soak.h"

#include <stdio.h>

/* Weights: every collective twice, the barrier (no data) once. */
static const th_coll coll_wheel[] = {
    TH_ALLREDUCE, TH_ALLREDUCE, TH_REDUCE,         TH_REDUCE,         TH_BCAST,   TH_BCAST,
    TH_ALLGATHER, TH_ALLGATHER, TH_REDUCE_SCATTER, TH_REDUCE_SCATTER, TH_GATHER,  TH_GATHER,
    TH_SCATTER,   TH_SCATTER,   TH_ALLTOALL,       TH_ALLTOALL,       TH_BARRIER,
};

/* A region in [2^lo_bits, 2^hi_bits) bytes: 2^b + [0, 2^b) with b uniform
 * in [lo_bits, hi_bits), so sizes spread evenly over the octaves. */
static size_t draw_bytes(struct soak_rng *rng, unsigned lo_bits, unsigned hi_bits)
{
	unsigned b = lo_bits + (unsigned)(soak_next(rng) % (hi_bits - lo_bits));
	size_t base = (size_t)1 << b;

	return base + (size_t)(soak_next(rng) % base);
}

static unsigned log2_floor(size_t v)
{
	unsigned b = 0;

	while (v >> (b + 1))
		b++;
	return b;
}

/* The count: 0 (8 %), 1..8 elements (25 %), or a region of 8 B..4 KiB
 * (27 %), 4..128 KiB (20 %), 128 KiB..1 MiB (12 %) or 1 MiB..max_bytes
 * (8 %: the pipelined protocols, many staging chunks); half of the counts
 * drawn by size are made odd. Everything is clamped to max_bytes. */
static size_t draw_count(struct soak_rng *rng, size_t unit, size_t max_bytes)
{
	static const unsigned bits[] = {3, 12, 17, 20};
	unsigned u = (unsigned)(soak_next(rng) % 100), cls, lo, hi, top;
	size_t cap = unit ? max_bytes / unit : 0, n, bytes;

	if (u < 8 || cap == 0)
		return 0;
	if (u < 33) {
		n = 1 + (size_t)(soak_next(rng) % 8);
		return n < cap ? n : cap;
	}
	cls = u < 60 ? 0 : u < 80 ? 1 : u < 92 ? 2 : 3;
	top = log2_floor(max_bytes) + 1; /* 2^top > max_bytes */
	lo = bits[cls];
	hi = cls < 3 ? bits[cls + 1] : top;
	if (hi > top)
		hi = top;
	if (lo >= hi)
		lo = hi - 1;
	bytes = draw_bytes(rng, lo, hi);
	if (bytes > max_bytes) /* only the top octave: fold it back into range */
		bytes = ((size_t)1 << lo) + bytes % (max_bytes - ((size_t)1 << lo) + 1);
	n = bytes / unit;
	if (soak_next(rng) & 1)
		n |= 1;
	if (n == 0)
		n = 1;
	return n < cap ? n : cap;
}

void soak_draw(struct soak_rng *rng, const struct soak_limits *lim, uint64_t seed,
               struct soak_call *c)
{
	size_t nwheel = sizeof(coll_wheel) / sizeof(coll_wheel[0]);
	unsigned nops, u;

	c->salt = th_mix(seed ^ th_mix(c->index * 0x2545f4914f6cdd1dull + 0x736f616bull));
	c->coll = coll_wheel[soak_next(rng) % nwheel];
	c->dtype = (shmcoll_dtype)(soak_next(rng) % SHMCOLL_DTYPE_COUNT);
	c->op = SHMCOLL_SUM;
	if (th_coll_reduces(c->coll)) {
		/* The valid ops are a prefix: SUM..AVG for floats, all for integers. */
		nops = th_dtype_is_float(c->dtype) ? SHMCOLL_AVG + 1 : SHMCOLL_OP_COUNT;
		c->op = (shmcoll_op)(soak_next(rng) % nops);
	}
	c->root = th_coll_rooted(c->coll) ? (int)(soak_next(rng) % (uint64_t)lim->size) : 0;
	c->count =
	    draw_count(rng, th_coll_region_elems(c->coll, 1, lim->size) * th_dtype_size(c->dtype),
	               lim->max_bytes);

	c->flags = 0;
	switch (c->coll) {
	case TH_BCAST:
		c->flags = SOAK_IN_PLACE; /* one buffer */
		break;
	case TH_REDUCE:
	case TH_GATHER:
	case TH_SCATTER:
		if (soak_next(rng) % 3 == 0)
			c->flags |= SOAK_IN_PLACE;
		if (soak_next(rng) & 1)
			c->flags |= SOAK_NULL;
		break;
	case TH_BARRIER:
		break;
	default:
		if (soak_next(rng) & 1)
			c->flags |= SOAK_IN_PLACE;
		break;
	}

	/* Buffers: malloc 40 %, symmetric 25 %, symmetric on even ranks 15 %,
	 * symmetric send or receive buffer 10 % each (in place: one buffer). */
	u = (unsigned)(soak_next(rng) % 20);
	c->sym = u < 8    ? TH_SYM_NONE
	         : u < 13 ? TH_SYM_BOTH
	         : u < 16 ? TH_SYM_EVEN
	         : u < 18 ? TH_SYM_SEND
	                  : TH_SYM_RECV;
	if ((c->flags & SOAK_IN_PLACE) && (c->sym == TH_SYM_SEND || c->sym == TH_SYM_RECV))
		c->sym = TH_SYM_BOTH;
	c->misalign = soak_next(rng) % 4 == 0 ? (size_t)(soak_next(rng) % SOAK_GUARD) : 0;
	c->skew = soak_next(rng) % 4 == 0 ? 1 + (size_t)(soak_next(rng) % (SOAK_GUARD - 1)) : 0;
}

int soak_draw_realloc(struct soak_rng *rng)
{
	return soak_next(rng) % SOAK_REALLOC_ODDS == 0;
}

uint64_t soak_result_bytes(const struct soak_call *c, int size)
{
	uint64_t n = (uint64_t)c->count * th_dtype_size(c->dtype), P = (uint64_t)size;

	switch (c->coll) {
	case TH_REDUCE:
		return n;
	case TH_GATHER:
		return P * n;
	case TH_ALLGATHER:
	case TH_ALLTOALL:
		return P * P * n;
	case TH_BARRIER:
		return 0;
	default: /* allreduce, bcast, reduce_scatter, scatter: n on every rank */
		return P * n;
	}
}

void soak_describe(const struct soak_call *c, char *buf, size_t len)
{
	char root[16] = "-", op[16] = "-";
	const char *form;

	if (th_coll_rooted(c->coll))
		snprintf(root, sizeof(root), "%d", c->root);
	if (th_coll_reduces(c->coll))
		snprintf(op, sizeof(op), "%s", th_op_name(c->op));
	switch (c->flags & (SOAK_IN_PLACE | SOAK_NULL)) {
	case SOAK_IN_PLACE | SOAK_NULL:
		form = "in-place,null-at-nonroot";
		break;
	case SOAK_IN_PLACE:
		form = "in-place";
		break;
	case SOAK_NULL:
		form = "out-of-place,null-at-nonroot";
		break;
	default:
		form = "out-of-place";
		break;
	}
	snprintf(buf, len,
	         "%s dtype=%s op=%s count=%zu root=%s flags=%s buffers=%s misalign=%zu+%zu*rank",
	         th_coll_name(c->coll), th_dtype_name(c->dtype), op, c->count, root, form,
	         th_sym_name(c->sym), c->misalign, c->skew);
}
