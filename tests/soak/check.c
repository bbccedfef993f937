/* check.c - one soak call on one rank: its inputs, the exact result it must
 * see (computed locally from every rank's inputs), the call itself in the
 * drawn buffer form, and every check this rank can make afterwards. */
#include "tests/soak/soak.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

#define BLOCK 1024 /* elements folded at a time when computing a reduction */

/* ---- inputs and expected results ---- */

/* Rank r's inputs for a call are a stream of random bytes, word w being
 * th_hash(salt, r, w): element i of a unit-byte type is bytes
 * [i * unit, (i + 1) * unit) (a unit never straddles two words). Data
 * movement and integer reductions take the bytes as they are (any bit
 * pattern, NaNs included, must travel unchanged; integers are any value, so
 * SUM and PROD wrap and AVG needs the exact sum); float reductions take 16
 * bits per element and map them to a value (gen_float). One hash per 8
 * bytes keeps the checking cheaper than the collectives at 8 ranks. */
static void stream_bytes(uint64_t salt, int r, size_t from, size_t len, unsigned char *dst)
{
	size_t w = from / 8, o = from % 8, take;
	uint64_t h;

	if (o) {
		h = th_hash(salt, r, w++);
		take = 8 - o < len ? 8 - o : len;
		memcpy(dst, (const unsigned char *)&h + o, take); /* little-endian */
		dst += take;
		len -= take;
	}
	for (; len >= 8; len -= 8, dst += 8) {
		h = th_hash(salt, r, w++);
		memcpy(dst, &h, 8);
	}
	if (len) {
		h = th_hash(salt, r, w);
		memcpy(dst, &h, len);
	}
}

/* m integer elements at p, sign- or zero-extended to 64 bits. */
static void load_ints(shmcoll_dtype dt, const unsigned char *p, size_t m, uint64_t *v)
{
	uint32_t u32;
	size_t i;

	switch (dt) {
	case SHMCOLL_INT8:
		for (i = 0; i < m; i++)
			v[i] = (uint64_t)(int64_t)(int8_t)p[i];
		break;
	case SHMCOLL_UINT8:
		for (i = 0; i < m; i++)
			v[i] = p[i];
		break;
	case SHMCOLL_INT32:
		for (i = 0; i < m; i++) {
			memcpy(&u32, p + 4 * i, 4);
			v[i] = (uint64_t)(int64_t)(int32_t)u32;
		}
		break;
	case SHMCOLL_UINT32:
		for (i = 0; i < m; i++) {
			memcpy(&u32, p + 4 * i, 4);
			v[i] = u32;
		}
		break;
	default:
		memcpy(v, p, m * 8);
		break;
	}
}

/* A float input from 16 random bits, as tests/harness.c chooses them: every
 * partial result is exact in float32 whatever the order of folding, so
 * "accumulate in at least float32, round once" has one answer. SUM/AVG:
 * multiples of 1/16 in [-16, 16) (8 ranks: at most 12 significant bits;
 * float16 and bfloat16 round once, at the end). PROD: +-{0.5, 1, 2}.
 * MIN/MAX: quarters in [-8, 7.75]. */
static double gen_float(shmcoll_op op, unsigned h)
{
	double m;

	switch (op) {
	case SHMCOLL_SUM:
	case SHMCOLL_AVG:
		return ((int)(h % 512) - 256) / 16.0;
	case SHMCOLL_PROD:
		m = (h >> 12) % 8 == 0 ? 2.0 : (h >> 12) % 8 == 1 ? 0.5 : 1.0;
		return (h & 1) ? -m : m;
	default:
		return ((int)(h % 64) - 32) * 0.25;
	}
}

/* Elements [base, base + n) of rank r's float inputs, as doubles. */
static void gen_floats(const struct soak_call *c, int r, size_t base, size_t n, double *out)
{
	uint16_t raw[BLOCK];
	size_t i, m;

	for (; n; n -= m, base += m, out += m) {
		m = n < BLOCK ? n : BLOCK;
		stream_bytes(c->salt, r, base * 2, m * 2, (unsigned char *)raw);
		for (i = 0; i < m; i++)
			out[i] = gen_float(c->op, raw[i]);
	}
}

static void store_float(shmcoll_dtype dt, unsigned char *dst, double d)
{
	float f = (float)d;
	uint16_t h;

	switch (dt) {
	case SHMCOLL_FLOAT16:
		h = th_f32_to_f16(f);
		memcpy(dst, &h, 2);
		break;
	case SHMCOLL_BFLOAT16:
		h = th_f32_to_bf16(f);
		memcpy(dst, &h, 2);
		break;
	case SHMCOLL_FLOAT32:
		memcpy(dst, &f, 4);
		break;
	default:
		memcpy(dst, &d, 8);
		break;
	}
}

/* Elements [base, base + n) of rank r's send data into dst. */
static void gen_input(const struct soak_call *c, int r, size_t base, size_t n, unsigned char *dst)
{
	size_t es = th_dtype_size(c->dtype), i, m;
	double v[BLOCK];

	if (!th_coll_reduces(c->coll) || !th_dtype_is_float(c->dtype)) {
		stream_bytes(c->salt, r, base * es, n * es, dst);
		return;
	}
	for (; n; n -= m, base += m) {
		m = n < BLOCK ? n : BLOCK;
		gen_floats(c, r, base, m, v);
		for (i = 0; i < m; i++, dst += es)
			store_float(c->dtype, dst, v[i]);
	}
}

/* out[i] = op over ranks 0..size-1 of element base + i, from the definition,
 * BLOCK elements at a time. */
static void fold_floats(const struct soak_call *c, int size, size_t base, size_t n,
                        unsigned char *out)
{
	size_t es = th_dtype_size(c->dtype), i, m;
	double acc[BLOCK], v[BLOCK];
	shmcoll_op op = c->op;
	int r;

	for (; n; n -= m, base += m) {
		m = n < BLOCK ? n : BLOCK;
		gen_floats(c, 0, base, m, acc);
		for (r = 1; r < size; r++) {
			gen_floats(c, r, base, m, v);
			for (i = 0; i < m; i++) {
				if (op == SHMCOLL_SUM || op == SHMCOLL_AVG)
					acc[i] += v[i];
				else if (op == SHMCOLL_PROD)
					acc[i] *= v[i];
				else if (op == SHMCOLL_MIN)
					acc[i] = v[i] < acc[i] ? v[i] : acc[i];
				else
					acc[i] = v[i] > acc[i] ? v[i] : acc[i];
			}
		}
		for (i = 0; i < m; i++, out += es) {
			if (op == SHMCOLL_AVG && c->dtype == SHMCOLL_FLOAT64)
				acc[i] /= size;
			else if (op == SHMCOLL_AVG) /* float32 division, then one rounding */
				acc[i] = (double)((float)acc[i] / (float)size);
			store_float(c->dtype, out, acc[i]);
		}
	}
}

/* acc[i] = acc[i] op v[i] for i < m (not AVG). */
static void fold_int(shmcoll_op op, int sgn, uint64_t *acc, const uint64_t *v, size_t m)
{
	size_t i;

	switch (op) {
	case SHMCOLL_SUM:
		for (i = 0; i < m; i++)
			acc[i] += v[i];
		break;
	case SHMCOLL_PROD:
		for (i = 0; i < m; i++)
			acc[i] *= v[i];
		break;
	case SHMCOLL_MIN:
		for (i = 0; i < m; i++)
			if (sgn ? (int64_t)v[i] < (int64_t)acc[i] : v[i] < acc[i])
				acc[i] = v[i];
		break;
	case SHMCOLL_MAX:
		for (i = 0; i < m; i++)
			if (sgn ? (int64_t)v[i] > (int64_t)acc[i] : v[i] > acc[i])
				acc[i] = v[i];
		break;
	case SHMCOLL_BAND:
		for (i = 0; i < m; i++)
			acc[i] &= v[i];
		break;
	case SHMCOLL_BOR:
		for (i = 0; i < m; i++)
			acc[i] |= v[i];
		break;
	default:
		for (i = 0; i < m; i++)
			acc[i] ^= v[i];
		break;
	}
}

static void fold_ints(const struct soak_call *c, int size, size_t base, size_t n,
                      unsigned char *out)
{
	shmcoll_dtype dt = c->dtype;
	size_t es = th_dtype_size(dt), i, m;
	int r, sgn = th_dtype_is_signed(dt);
	unsigned char raw[BLOCK * 8];
	uint64_t acc[BLOCK], v[BLOCK], q;
	i128 sacc[BLOCK]; /* AVG: the exact sum, which 128 bits hold */

	for (; n; n -= m, base += m) {
		m = n < BLOCK ? n : BLOCK;
		for (r = 0; r < size; r++) {
			stream_bytes(c->salt, r, base * es, m * es, raw);
			if (c->op == SHMCOLL_AVG) {
				load_ints(dt, raw, m, v);
				for (i = 0; i < m; i++)
					sacc[i] = (r ? sacc[i] : 0) +
					          (sgn ? (i128)(int64_t)v[i] : (i128)v[i]);
			} else if (r) {
				load_ints(dt, raw, m, v);
				fold_int(c->op, sgn, acc, v, m);
			} else {
				load_ints(dt, raw, m, acc);
			}
		}
		for (i = 0; i < m; i++, out += es) {
			if (c->op != SHMCOLL_AVG)
				q = acc[i];
			else if (sgn) /* C division truncates toward zero */
				q = (uint64_t)(int64_t)(sacc[i] / size);
			else
				q = (uint64_t)((u128)sacc[i] / (u128)size);
			memcpy(out, &q, es);
		}
	}
}

static void expect_reduce(const struct soak_call *c, int size, size_t base, size_t n,
                          unsigned char *out)
{
	if (th_dtype_is_float(c->dtype))
		fold_floats(c, size, base, n, out);
	else
		fold_ints(c, size, base, n, out);
}

/* ---- canaries ---- */

/* Canary bytes: byte off of an area is pat_byte(seed, off), which repeats
 * every 256 bytes, so areas are filled and compared a table at a time. */
static unsigned char pat_byte(uint64_t seed, size_t off)
{
	return (unsigned char)((unsigned)seed + off * (((unsigned)(seed >> 8) & 0xfe) | 1));
}

static void pat_table(uint64_t seed, unsigned char t[256])
{
	size_t i;

	for (i = 0; i < 256; i++)
		t[i] = pat_byte(seed, i);
}

static void pat_fill(unsigned char *p, size_t from, size_t to, uint64_t seed)
{
	unsigned char t[256];
	size_t take;

	pat_table(seed, t);
	for (; from < to; from += take) {
		take = 256 - from % 256;
		if (take > to - from)
			take = to - from;
		memcpy(p + from, t + from % 256, take);
	}
}

/* The first byte in [from, to) that differs from the pattern, or to. */
static size_t pat_find_bad(const unsigned char *p, size_t from, size_t to, uint64_t seed)
{
	unsigned char t[256];
	size_t take, i;

	pat_table(seed, t);
	for (; from < to; from += take) {
		take = 256 - from % 256;
		if (take > to - from)
			take = to - from;
		if (!memcmp(p + from, t + from % 256, take))
			continue;
		for (i = 0; i < take; i++)
			if (p[from + i] != t[(from + i) % 256])
				return from + i;
	}
	return to;
}

/* ---- reporting ---- */

static void report(struct soak_state *st, const struct soak_call *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void report(struct soak_state *st, const struct soak_call *c, const char *fmt, ...)
{
	char what[256], msg[400];
	va_list ap;

	if (st->reports++ >= SOAK_MAX_REPORTS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	soak_describe(c, what, sizeof(what));
	fprintf(stderr, "shmcoll-soak: MISMATCH rank %d/%d: call %llu %s: %s (seed 0x%016llx)\n",
	        st->rank, st->size, (unsigned long long)c->index, what, msg,
	        (unsigned long long)st->seed);
	if (st->reports == SOAK_MAX_REPORTS)
		fprintf(stderr, "shmcoll-soak: rank %d: further mismatches not printed\n",
		        st->rank);
}

/* n elements of got against want; reports the first bad one. 1 on a mismatch. */
static int cmp_elems(struct soak_state *st, const struct soak_call *c, const char *name,
                     const unsigned char *got, const unsigned char *want, size_t n, size_t base)
{
	size_t es = th_dtype_size(c->dtype), i, nbad = 0, first = 0;
	char g[64], w[64];

	if (n == 0 || !memcmp(got, want, n * es))
		return 0;
	for (i = 0; i < n; i++)
		if (memcmp(got + i * es, want + i * es, es) && !nbad++)
			first = i;
	th_format_elem(c->dtype, got + first * es, g, sizeof(g));
	th_format_elem(c->dtype, want + first * es, w, sizeof(w));
	report(st, c, "%s: first differing element %zu: got %s want %s (%zu of %zu differ)", name,
	       base + first, g, w, nbad, n);
	return 1;
}

/* Pattern bytes [from, to) of area p (buffer at offset off) unchanged? */
static int cmp_pattern(struct soak_state *st, const struct soak_call *c, const char *name,
                       const unsigned char *p, size_t off, size_t from, size_t to, uint64_t seed)
{
	size_t i = pat_find_bad(p, from, to, seed);

	if (i == to)
		return 0;
	report(st, c,
	       "%s: byte at offset %td from the buffer start changed: got 0x%02x want 0x%02x", name,
	       (ptrdiff_t)i - (ptrdiff_t)off, p[i], pat_byte(seed, i));
	return 1;
}

/* ---- buffers ---- */

static void *area_alloc(size_t cap)
{
	size_t bytes = (cap + SOAK_AREA_EXTRA + 63) / 64 * 64;

	return aligned_alloc(64, bytes);
}

int soak_state_init(struct soak_state *st, shmcoll_comm *comm, uint64_t seed, size_t cap)
{
	memset(st, 0, sizeof(*st));
	st->comm = comm;
	st->rank = shmcoll_comm_rank(comm);
	st->size = shmcoll_comm_size(comm);
	st->seed = seed;
	st->cap = cap;
	st->a = area_alloc(cap);
	st->b = area_alloc(cap);
	st->in = area_alloc(cap);
	st->ex = area_alloc(cap);
	if (!st->a || !st->b || !st->in || !st->ex) {
		soak_state_fini(st);
		return -ENOMEM;
	}
	return 0;
}

void soak_state_fini(struct soak_state *st)
{
	free(st->a);
	free(st->b);
	free(st->in);
	free(st->ex);
	st->a = st->b = st->in = st->ex = NULL;
}

static int sym_free_one(struct soak_state *st, unsigned char **p)
{
	int rc = 0;

	if (*p)
		rc = shmcoll_free(st->comm, *p);
	*p = NULL;
	return rc;
}

int soak_sym_free(struct soak_state *st)
{
	/* Collective: every rank frees the same buffers in the same order. */
	int rc = sym_free_one(st, &st->sa), e;

	e = sym_free_one(st, &st->sb);
	rc = rc ? rc : e;
	e = sym_free_one(st, &st->spacer);
	rc = rc ? rc : e;
	st->symcap = 0;
	return rc;
}

int soak_sym_realloc(struct soak_state *st, struct soak_rng *rng, size_t max_bytes)
{
	size_t top = max_bytes < SOAK_SYM_MAX ? max_bytes : SOAK_SYM_MAX;
	size_t cap = SOAK_SYM_MIN +
	             (size_t)(soak_next(rng) % (top > SOAK_SYM_MIN ? top - SOAK_SYM_MIN + 1 : 1));
	size_t spacer = soak_next(rng) & 1 ? 64 * (1 + (size_t)(soak_next(rng) % 1024)) : 0;
	int b_first = (int)(soak_next(rng) & 1), rc;
	char why[256];

	rc = soak_sym_free(st);
	if (rc) {
		fprintf(stderr, "shmcoll-soak: rank %d: shmcoll_free: %d (%s): %s\n", st->rank, rc,
		        shmcoll_strerror(rc), shmcoll_last_error(st->comm));
		return rc;
	}
	st->sym_reallocs++;
	/* shmcoll_malloc fails on every rank alike (the ranks agree on the heap
	 * in the call), so every rank halves and retries alike. */
	for (;;) {
		if (spacer)
			st->spacer = shmcoll_malloc(st->comm, spacer);
		if (b_first)
			st->sb = shmcoll_malloc(st->comm, cap + SOAK_AREA_EXTRA);
		st->sa = shmcoll_malloc(st->comm, cap + SOAK_AREA_EXTRA);
		if (!b_first)
			st->sb = shmcoll_malloc(st->comm, cap + SOAK_AREA_EXTRA);
		if (st->sa && st->sb && (st->spacer || !spacer)) {
			st->symcap = cap;
			return 0;
		}
		/* The frees clear the message; keep the failed call's. */
		snprintf(why, sizeof(why), "%s", shmcoll_last_error(st->comm));
		rc = soak_sym_free(st);
		if (rc)
			return rc;
		/* Drop the spacer before shrinking the buffers: a spacer
		 * nearly as big as a small rank's heap leaves no room even
		 * for the smallest pair. */
		if (spacer) {
			spacer = 0;
			continue;
		}
		if (cap / 2 < SOAK_SYM_MIN) {
			fprintf(stderr,
			        "shmcoll-soak: rank %d: shmcoll_malloc of %zu bytes failed: %s\n",
			        st->rank, cap + SOAK_AREA_EXTRA, why);
			return -ENOMEM;
		}
		cap /= 2;
		st->sym_shrinks++;
	}
}

/* ---- one call ---- */

static void expect(const struct soak_call *c, int me, int P, unsigned char *ex)
{
	size_t n = c->count, es = th_dtype_size(c->dtype);
	int r;

	switch (c->coll) {
	case TH_ALLREDUCE:
	case TH_REDUCE:
		expect_reduce(c, P, 0, n, ex);
		break;
	case TH_REDUCE_SCATTER:
		expect_reduce(c, P, (size_t)me * n, n, ex);
		break;
	case TH_BCAST:
		gen_input(c, c->root, 0, n, ex);
		break;
	case TH_ALLGATHER:
	case TH_GATHER:
		for (r = 0; r < P; r++)
			gen_input(c, r, 0, n, ex + (size_t)r * n * es);
		break;
	case TH_SCATTER:
		gen_input(c, c->root, (size_t)me * n, n, ex);
		break;
	case TH_ALLTOALL:
		for (r = 0; r < P; r++)
			gen_input(c, r, (size_t)me * n, n, ex + (size_t)r * n * es);
		break;
	default:
		break;
	}
}

static int call(struct soak_state *st, const struct soak_call *c, const void *s, void *r)
{
	return th_call(st->comm, c->coll, s, r, c->count, c->dtype, c->op, c->root);
}

/* The hidden self-test (see struct soak_corrupt): damage what this rank
 * received, once, where it will be checked. */
static void corrupt(struct soak_state *st, const struct soak_call *c, unsigned char *out, size_t n,
                    unsigned char *end)
{
	struct soak_corrupt *k = &st->corrupt;
	size_t es = th_dtype_size(c->dtype), i;
	char what[256];

	if (!k->armed || c->index < k->at || (k->rank >= 0 && k->rank != st->rank) || !out ||
	    n == 0)
		return;
	k->armed = 0;
	soak_describe(c, what, sizeof(what));
	if (k->guard) {
		end[th_hash(c->salt, st->rank, 1) % SOAK_GUARD] ^= 0x10;
		fprintf(stderr,
		        "shmcoll-soak: SHMCOLL_SOAK_CORRUPT: rank %d damages a canary byte "
		        "after the buffer it receives in, of call %llu %s\n",
		        st->rank, (unsigned long long)c->index, what);
		return;
	}
	i = th_hash(c->salt, st->rank, 2) % n;
	out[i * es] ^= 1;
	fprintf(stderr,
	        "shmcoll-soak: SHMCOLL_SOAK_CORRUPT: rank %d damages received element %zu "
	        "of call %llu %s\n",
	        st->rank, i, (unsigned long long)c->index, what);
}

/* Barrier: before barrier k every rank stores k into its counter; after
 * it, every counter must hold k (or k + 1: a peer already on its way to the
 * next barrier, which cannot complete without this rank). */
static int run_barrier(struct soak_state *st, const struct soak_call *c)
{
	uint32_t k = ++st->nbarrier, v;
	int rc, j, bad = 0;

	/* Relaxed on purpose: the barrier must order this store before the
	 * peers' loads after it. */
	atomic_store_explicit(&st->bar[st->rank * SOAK_BAR_STRIDE], k, memory_order_relaxed);
	rc = shmcoll_barrier(st->comm);
	if (rc)
		return rc;
	for (j = 0; j < st->size && st->bar_shared; j++) {
		v = atomic_load_explicit(&st->bar[j * SOAK_BAR_STRIDE], memory_order_relaxed);
		if ((int32_t)(v - k) < 0 || (int32_t)(v - k) > 1) {
			report(st, c,
			       "after barrier %u rank %d's arrival counter is %u (want %u or %u)",
			       k, j, v, k, k + 1);
			bad = 1;
			break;
		}
	}
	return bad;
}

int soak_run(struct soak_state *st, const struct soak_call *c)
{
	size_t es = th_dtype_size(c->dtype), n = c->count, mine, snb, rnb, nb, off;
	int me = st->rank, P = st->size, even = !(me & 1), sa, sb, rc, bad = 0;
	int isroot = !th_coll_rooted(c->coll) || me == c->root, inplace, null_send, null_recv;
	uint64_t pa = c->salt ^ 0x1234, pb = c->salt ^ 0x5678;
	unsigned char *A, *B, *buf, *out;
	th_shape sh;

	if (c->coll == TH_BARRIER)
		return run_barrier(st, c);
	th_shape_of(c->coll, c->count, me, P, c->root, &sh);
	snb = sh.sendn * es;
	rnb = sh.recvn * es;
	nb = snb > rnb ? snb : rnb;
	mine = (size_t)me * n * es;

	/* Which form this rank uses: bcast has one buffer; the in-place forms
	 * of gather and scatter are the root's; a non-root of an in-place
	 * reduce passes sendbuf == recvbuf too unless it passes NULL. */
	inplace = (c->flags & SOAK_IN_PLACE) && (isroot || c->coll == TH_BCAST ||
	                                         (c->coll == TH_REDUCE && !(c->flags & SOAK_NULL)));
	null_send = !inplace && (c->flags & SOAK_NULL) && !sh.has_input;
	null_recv = !inplace && (c->flags & SOAK_NULL) && !sh.has_output;

	/* Symmetric buffers when the drawn kind says so and they hold the
	 * region; symcap is the same on every rank, so all decide alike. */
	sa = c->sym == TH_SYM_BOTH || c->sym == TH_SYM_SEND || (c->sym == TH_SYM_EVEN && even);
	sb = c->sym == TH_SYM_BOTH || c->sym == TH_SYM_RECV || (c->sym == TH_SYM_EVEN && even);
	if (inplace)
		sa = sa || sb;
	if (th_coll_region_elems(c->coll, n, P) * es > st->symcap)
		sa = sb = 0;
	A = sa ? st->sa : st->a;
	B = sb ? st->sb : st->b;
	off = SOAK_GUARD + (c->misalign + c->skew * (size_t)me) % SOAK_GUARD;

	if (sh.has_input)
		gen_input(c, me, 0, c->coll == TH_BCAST ? n : sh.sendn, st->in);
	if (sh.has_output)
		expect(c, me, P, st->ex);

	if (inplace) {
		buf = A + off;
		pat_fill(A, 0, off + nb + SOAK_GUARD, pa);
		switch (c->coll) {
		case TH_ALLGATHER:
			memcpy(buf + mine, st->in, n * es);
			rc = call(st, c, buf + mine, buf);
			out = buf;
			break;
		case TH_GATHER:
			memcpy(buf + (size_t)c->root * n * es, st->in, n * es);
			rc = call(st, c, buf + (size_t)c->root * n * es, buf);
			out = buf;
			break;
		case TH_REDUCE_SCATTER:
			memcpy(buf, st->in, snb);
			rc = call(st, c, buf, buf + mine);
			out = buf + mine;
			break;
		case TH_SCATTER:
			memcpy(buf, st->in, snb);
			rc = call(st, c, buf, buf + (size_t)c->root * n * es);
			out = buf + (size_t)c->root * n * es;
			break;
		default: /* allreduce, reduce, bcast, alltoall */
			if (sh.has_input)
				memcpy(buf, st->in, (c->coll == TH_BCAST ? rnb : snb));
			rc = call(st, c, buf, buf);
			out = sh.has_output ? buf : NULL;
			break;
		}
		if (rc)
			return rc;
		corrupt(st, c, out, sh.recvn, buf + nb);

		bad |= cmp_pattern(st, c, "in-place buffer guard", A, off, 0, off, pa);
		bad |= cmp_pattern(st, c, "in-place buffer guard", A, off, off + nb,
		                   off + nb + SOAK_GUARD, pa);
		switch (c->coll) {
		case TH_REDUCE_SCATTER:
			bad |= cmp_elems(st, c, "recvbuf block (in place)", buf + mine, st->ex, n,
			                 (size_t)me * n);
			bad |= cmp_elems(st, c, "sendbuf before own block (in place)", buf, st->in,
			                 (size_t)me * n, 0);
			bad |= cmp_elems(st, c, "sendbuf after own block (in place)",
			                 buf + mine + n * es, st->in + mine + n * es,
			                 sh.sendn - (size_t)(me + 1) * n, (size_t)(me + 1) * n);
			break;
		case TH_SCATTER:
			/* The root's own slice is its result and already in place:
			 * the whole buffer must still be the send data. */
			bad |= cmp_elems(st, c, "root's sendbuf/recvbuf (in place)", buf, st->in,
			                 sh.sendn, 0);
			break;
		case TH_REDUCE:
			if (sh.has_output)
				bad |= cmp_elems(st, c, "recvbuf (in place)", buf, st->ex, n, 0);
			else
				bad |= cmp_elems(st, c, "non-root sendbuf==recvbuf", buf, st->in, n,
				                 0);
			break;
		default:
			bad |= cmp_elems(st, c, "recvbuf (in place)", buf, st->ex, sh.recvn, 0);
			break;
		}
		return bad;
	}

	if (sh.has_input) { /* canaries around the send data */
		pat_fill(A, 0, off, pa);
		memcpy(A + off, st->in, snb);
		pat_fill(A, off + snb, off + snb + SOAK_GUARD, pa);
	} else { /* and over a non-root's unused send buffer */
		pat_fill(A, 0, off + snb + SOAK_GUARD, pa);
	}
	pat_fill(B, 0, off + rnb + SOAK_GUARD, pb);
	rc = call(st, c, null_send ? NULL : A + off, null_recv ? NULL : B + off);
	if (rc)
		return rc;
	corrupt(st, c, sh.has_output && !null_recv ? B + off : NULL, sh.recvn, B + off + rnb);

	if (!null_send) {
		bad |= cmp_pattern(st, c, "sendbuf guard", A, off, 0, off, pa);
		bad |= cmp_pattern(st, c, "sendbuf guard", A, off, off + snb,
		                   off + snb + SOAK_GUARD, pa);
		if (sh.has_input)
			bad |= cmp_elems(st, c, "sendbuf (const)", A + off, st->in, sh.sendn, 0);
		else
			bad |= cmp_pattern(st, c, "non-root sendbuf", A, off, off, off + snb, pa);
	}
	if (!null_recv) {
		bad |= cmp_pattern(st, c, "recvbuf guard", B, off, 0, off, pb);
		bad |= cmp_pattern(st, c, "recvbuf guard", B, off, off + rnb,
		                   off + rnb + SOAK_GUARD, pb);
		if (sh.has_output)
			bad |= cmp_elems(st, c, "recvbuf", B + off, st->ex, sh.recvn, 0);
		else
			bad |= cmp_pattern(st, c, "non-root recvbuf", B, off, off, off + rnb, pb);
	}
	return bad;
}
