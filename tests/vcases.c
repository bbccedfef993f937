/* vcases.c - the cases of the variable-count collectives and their checks (vcases.h): the
 * values every rank derives alone, the counts and displacements, the buffers with their
 * guards and what they must hold, the calls. */
#include "tests/vcases.h"

#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm/arena.h"
#include "tests/harness.h"

#define GUARD 64                 /* checked bytes on each side of every buffer */
#define BOGUS ((size_t)SIZE_MAX) /* array entries a rank must not read */

const char *const vk_name[VK_COUNT] = {
    "allgatherv", "gatherv", "scatterv", "alltoallv", "reduce_scatterv", "scan", "exscan",
};

static const char *const sz_name[SZ_COUNT] = {"tiny", "small", "kib", "large", "huge"};
static const char *const cn_name[CN_COUNT] = {"varied", "zero", "equal", "inline-edge",
                                              "inline-edge+1"};
static const char *const ly_name[LY_COUNT] = {"packed", "reverse-gaps", "overlapping-send"};

/* ---- messages ---- */

static void describe(const struct vc *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s dtype=%s op=%s root=%d size=%s counts=%s layout=%s %s%s salt=%llu",
	         vk_name[c->kind], th_dtype_name(c->dt), th_op_name(c->op), c->root, sz_name[c->sz],
	         cn_name[c->cn], ly_name[c->ly], c->inplace ? "in-place" : "out-of-place",
	         c->nulls ? " nulls" : "", (unsigned long long)c->salt);
}

int vc_failf(int code, const struct vc *c, int me, const char *fmt, ...)
{
	char msg[512], what[256] = "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c)
		describe(c, what, sizeof(what));
	vc_env.report(me, what, msg);
	return code;
}

void vc_crumb(const struct vc *c, const char *form)
{
	char what[256];

	describe(c, what, sizeof(what));
	th_breadcrumb("%s %s", form, what);
}

/* ---- values every rank derives alone ---- */

/* Element pos of owner's send buffer, for the calls that move data: any bit pattern. */
static void mv_elem(uint64_t salt, int owner, size_t pos, size_t es, unsigned char *dst)
{
	uint64_t h = th_hash(salt ^ 0x6d6f7665ull, owner, pos);

	memcpy(dst, &h, es); /* the low bytes (little-endian hosts) */
}

/* The bytes around and between blocks before the call. */
static unsigned char pat(uint64_t salt, size_t off)
{
	return (unsigned char)(0xa5u ^ (unsigned)(off * 29u) ^ (unsigned)(salt * 59u));
}

static uint64_t red_h(const struct vc *c, int r, size_t idx)
{
	return th_hash(c->salt ^ 0x726564ull, r, idx);
}

/* Element idx of rank r's sendbuf of a reduction. */
static void red_in(const struct vc *c, int r, size_t idx, unsigned char *dst)
{
	uint64_t v;

	if (th_dtype_is_float(c->dt)) {
		th_store_float(c->dt, dst, th_input_float(c->op, red_h(c, r, idx)));
		return;
	}
	v = th_input_int(c->dt, red_h(c, r, idx));
	memcpy(dst, &v, th_dtype_size(c->dt));
}

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

/* op over element idx of ranks 0 .. nr-1 (nr >= 1), folded in rank order, from the
 * definition; AVG divides by P. */
static void red_fold(const struct vc *c, int nr, int P, size_t idx, unsigned char *dst)
{
	shmcoll_dtype dt = c->dt;
	shmcoll_op op = c->op;
	size_t es = th_dtype_size(dt);
	int r, sgn = th_dtype_is_signed(dt);

	if (th_dtype_is_float(dt)) {
		double acc = th_input_float(op, red_h(c, 0, idx)), v;

		for (r = 1; r < nr; r++) {
			v = th_input_float(op, red_h(c, r, idx));
			if (op == SHMCOLL_SUM || op == SHMCOLL_AVG)
				acc += v;
			else if (op == SHMCOLL_PROD)
				acc *= v;
			else if (op == SHMCOLL_MIN)
				acc = v < acc ? v : acc;
			else
				acc = v > acc ? v : acc;
		}
		if (op == SHMCOLL_AVG && dt == SHMCOLL_FLOAT64)
			acc = acc / P;
		else if (op == SHMCOLL_AVG) /* in float32, then the one rounding */
			acc = (double)((float)acc / (float)P);
		th_store_float(dt, dst, acc);
		return;
	}
	if (op == SHMCOLL_AVG) {
		i128 s = 0;
		u128 u = 0;
		uint64_t v;

		for (r = 0; r < nr; r++) {
			v = th_input_int(dt, red_h(c, r, idx));
			s += (int64_t)v;
			u += v;
		}
		v = sgn ? (uint64_t)(int64_t)(s / P) : (uint64_t)(u / (u128)P);
		memcpy(dst, &v, es);
		return;
	}
	uint64_t acc = th_input_int(dt, red_h(c, 0, idx)), v;

	for (r = 1; r < nr; r++) {
		v = th_input_int(dt, red_h(c, r, idx));
		switch (op) {
		case SHMCOLL_SUM:
			acc += v;
			break;
		case SHMCOLL_PROD:
			acc *= v;
			break;
		case SHMCOLL_MIN:
			if (sgn ? (int64_t)v < (int64_t)acc : v < acc)
				acc = v;
			break;
		case SHMCOLL_MAX:
			if (sgn ? (int64_t)v > (int64_t)acc : v > acc)
				acc = v;
			break;
		case SHMCOLL_BAND:
			acc &= v;
			break;
		case SHMCOLL_BOR:
			acc |= v;
			break;
		default:
			acc ^= v;
			break;
		}
	}
	memcpy(dst, &acc, es);
}

/* ---- counts and displacements ---- */

static size_t sized(const struct vc *c, int P, uint64_t h)
{
	size_t es = th_dtype_size(c->dt), lo, span;

	switch (c->sz) {
	case SZ_TINY:
		return 1 + h % (32 / es);
	case SZ_SMALL:
		lo = 33;
		span = 200;
		break;
	case SZ_KIB:
		return SHMCOLL_INLINE_MAX / es - 2 + h % 5;
	case SZ_LARGE:
		lo = c->kind == VK_ALLTOALLV ? 192 * 1024 / (size_t)P : 48 * 1024;
		span = lo;
		break;
	default: /* SZ_HUGE: about vc_env.huge_bytes a call (reductions half of it) */
		lo = c->kind >= VK_SCAN              ? vc_env.huge_bytes / 2
		     : c->kind == VK_REDUCE_SCATTERV ? vc_env.huge_bytes / 2 / (size_t)P
		                                     : vc_env.huge_bytes / (size_t)P;
		span = lo / 8;
		lo -= span;
		break;
	}
	return (lo + h % span) / es;
}

/* Counts that fill a message of SHMCOLL_INLINE_MAX bytes holding a 4-byte head, a table of
 * 4 bytes per rank and the blocks to every rank but from (scatterv and alltoallv), plus one
 * element for one of them with CN_EDGE1. */
static void edge_row(const struct vc *c, int P, int from, size_t *row)
{
	size_t es = th_dtype_size(c->dt), avail, each;
	int q, first = -1, last = -1;

	avail = (SHMCOLL_INLINE_MAX - 4 - 4 * (size_t)P) / es;
	each = P > 1 ? avail / (size_t)(P - 1) : 0;
	for (q = 0; q < P; q++) {
		if (q == from) {
			row[q] = 3;
			continue;
		}
		row[q] = each;
		first = first < 0 ? q : first;
		last = q;
	}
	if (first >= 0)
		row[first] += avail - each * (size_t)(P - 1);
	if (c->cn == CN_EDGE1 && last >= 0)
		row[last]++;
}

/* Every rank's counts (the same table on every rank). */
static void counts(const struct vc *c, int P, size_t *cnt)
{
	size_t es = th_dtype_size(c->dt), tot;
	int p, q, rows = c->kind == VK_ALLTOALLV ? P : 1, cols = c->kind >= VK_SCAN ? 1 : P;
	uint64_t h;

	if (c->cn == CN_EDGE || c->cn == CN_EDGE1) {
		switch (c->kind) {
		case VK_SCATTERV:
			edge_row(c, P, c->root, cnt);
			return;
		case VK_ALLTOALLV:
			for (p = 0; p < P; p++)
				edge_row(c, P, p, cnt + (size_t)p * (size_t)P);
			return;
		case VK_REDUCE_SCATTERV:
			tot = 512 / es; /* the inline limit of reduce_scatter(v) */
			for (p = 0; p < P; p++)
				cnt[p] = tot / (size_t)P + (p == 0 ? tot % (size_t)P : 0);
			cnt[P - 1] += c->cn == CN_EDGE1;
			return;
		default: /* allgatherv and gatherv: blocks of exactly the limit; scan: a vector */
			for (p = 0; p < cols; p++)
				cnt[p] = SHMCOLL_INLINE_MAX / es;
			cnt[cols - 1] += c->cn == CN_EDGE1;
			return;
		}
	}
	for (p = 0; p < rows; p++)
		for (q = 0; q < cols; q++) {
			/* 1-D kinds: the count of rank q; alltoallv: p's to q. */
			size_t *slot = cnt + (size_t)p * (size_t)P + (size_t)q;

			h = th_hash(c->salt ^ 0xc0c0ull, rows > 1 ? p : q, (uint64_t)q);
			if (c->cn == CN_ZERO) {
				*slot = 0;
			} else if (c->cn == CN_EQUAL || c->kind >= VK_SCAN) {
				*slot = sized(c, P, th_hash(c->salt, 0, 0));
			} else if ((unsigned)(p + 2 * q + (int)(c->salt % 3)) % 3 == 1) {
				*slot = 0;
			} else {
				*slot = sized(c, P, h);
			}
		}
}

/* Displacements d of the blocks c (nb of them) of one buffer, laid out as ly; returns the
 * buffer's elements (past the last block: two elements more, or none when packed). */
static size_t lay_out(int ly, int send, uint64_t seed, int nb, const size_t *c, size_t *d)
{
	size_t pos = 0, end = 0;
	int p;

	if (ly == LY_PACKED) {
		for (p = 0; p < nb; p++) {
			d[p] = pos;
			pos += c[p];
		}
		return pos;
	}
	if (ly == LY_SENDOVL && send) {
		for (p = 0; p < nb; p++) {
			d[p] = th_hash(seed, p, 1) % 4;
			if (c[p] && d[p] + c[p] > end)
				end = d[p] + c[p];
		}
		return end + 1;
	}
	pos = 1 + seed % 3;
	for (p = nb - 1; p >= 0; p--) {
		if (!c[p])
			continue;
		d[p] = pos;
		pos += c[p] + th_hash(seed, p, 2) % 4; /* gaps of 0 .. 3 elements */
	}
	for (p = 0; p < nb; p++)
		if (!c[p]) /* anywhere: inside another block, in a gap, at the end */
			d[p] = th_hash(seed, p, 3) % (pos + 1);
	return pos + 2;
}

static uint64_t seed_of(const struct vc *c, int rank, char which)
{
	return th_hash(c->salt ^ (uint64_t)which, rank, 77);
}

/* ---- buffers ---- */

static int area_new(struct vc_area *a, size_t bytes, uint64_t salt)
{
	size_t tot = bytes + 2 * GUARD, i;

	a->bytes = bytes;
	a->p = malloc(tot);
	a->want = malloc(tot);
	a->snap = malloc(tot);
	if (!a->p || !a->want || !a->snap)
		return E_NOMEM;
	for (i = 0; i < tot; i++)
		a->p[i] = pat(salt, i);
	return 0;
}

static unsigned char *data(const struct vc_area *a)
{
	return a->p + GUARD;
}

static unsigned char *wdata(const struct vc_area *a)
{
	return a->want + GUARD;
}

static void area_free(struct vc_area *a)
{
	free(a->p);
	free(a->want);
	free(a->snap);
	a->p = a->want = a->snap = NULL;
}

void vc_run_free(struct vc_run *r)
{
	area_free(&r->A);
	area_free(&r->B);
}

/* This rank's buffers, arguments and wanted bytes for c. 0 or E_NOMEM. */
int vc_setup(struct vc_run *r, const struct vc *c, int P, int me)
{
	size_t es = th_dtype_size(c->dt), i, ext = 0, tot = 0, off = 0;
	int p, rc = 0, root = c->root == me, any_in = 0;

	memset(r, 0, sizeof(*r));
	r->c = *c;
	r->P = P;
	r->me = me;
	r->es = es;
	for (p = 0; p < VMAXP; p++)
		r->bogus[p] = BOGUS - (size_t)p;
	counts(c, P, r->cnt);
	switch (c->kind) {
	case VK_ALLGATHERV:
	case VK_GATHERV:
		r->n = r->cnt[me];
		for (p = 0; p < P; p++)
			tot += r->cnt[p];
		if (c->kind == VK_GATHERV && !root) {
			/* Out of place; recvbuf and the arrays are the root's only. */
			if (c->nulls) {
				r->rp = NULL;
				r->rc = r->rdp = NULL;
			} else {
				rc = area_new(&r->B, 16, c->salt ^ 0xb);
				r->rp = data(&r->B);
				r->rc = r->rdp = r->bogus;
			}
		} else {
			ext =
			    lay_out(c->ly, 0, seed_of(c, c->kind == VK_GATHERV ? c->root : me, 'R'),
			            P, r->cnt, r->rd);
			r->rc = r->cnt;
			r->rdp = r->rd;
			if (c->nulls && !tot) {
				r->rp = NULL;
			} else {
				rc = area_new(&r->B, ext * es, c->salt ^ 0xb);
				if (rc)
					break;
				r->rp = data(&r->B);
				r->B.bd = r->rd;
				r->B.bc = r->cnt;
				r->B.nb = P;
			}
		}
		if (rc)
			break;
		if (r->B.p)
			memcpy(r->B.want, r->B.p, r->B.bytes + 2 * GUARD);
		if (r->B.p && (c->kind == VK_ALLGATHERV || root))
			for (p = 0; p < P; p++)
				for (i = 0; i < r->cnt[p]; i++)
					mv_elem(c->salt, p, i, es,
					        wdata(&r->B) + (r->rd[p] + i) * es);
		if (c->inplace && r->rp && (c->kind == VK_ALLGATHERV || root)) {
			/* This rank's block already in place. */
			for (i = 0; i < r->n; i++)
				mv_elem(c->salt, me, i, es, data(&r->B) + (r->rd[me] + i) * es);
			r->sp = data(&r->B) + r->rd[me] * es;
		} else if (c->nulls && !r->n) {
			r->sp = NULL;
		} else {
			rc = area_new(&r->A, r->n * es, c->salt ^ 0xa);
			if (rc)
				break;
			for (i = 0; i < r->n; i++)
				mv_elem(c->salt, me, i, es, data(&r->A) + i * es);
			memcpy(r->A.want, r->A.p, r->A.bytes + 2 * GUARD);
			r->sp = data(&r->A);
		}
		break;
	case VK_SCATTERV:
		r->n = r->cnt[me];
		for (p = 0; p < P; p++)
			tot += r->cnt[p];
		ext = lay_out(c->ly, 1, seed_of(c, c->root, 'S'), P, r->cnt, r->sd);
		if (root) {
			r->sc = r->cnt;
			r->sdp = r->sd;
			if (c->nulls && !tot) {
				r->sp = NULL;
			} else {
				rc = area_new(&r->A, ext * es, c->salt ^ 0xa);
				if (rc)
					break;
				for (i = 0; i < ext; i++) /* gaps too: a wrong offset shows */
					mv_elem(c->salt, me, i, es, data(&r->A) + i * es);
				memcpy(r->A.want, r->A.p, r->A.bytes + 2 * GUARD);
				r->sp = data(&r->A);
				r->A.bd = r->sd;
				r->A.bc = r->cnt;
				r->A.nb = P;
			}
		} else if (c->nulls) {
			r->sp = NULL;
			r->sc = r->sdp = NULL;
		} else {
			rc = area_new(&r->A, 16, c->salt ^ 0xa);
			if (rc)
				break;
			memcpy(r->A.want, r->A.p, r->A.bytes + 2 * GUARD);
			r->sp = data(&r->A);
			r->sc = r->sdp = r->bogus;
		}
		if (root && c->inplace && r->sp) {
			r->rp = (unsigned char *)data(&r->A) + r->sd[me] * es;
		} else if (c->nulls && !r->n) {
			r->rp = NULL;
		} else {
			rc = area_new(&r->B, r->n * es, c->salt ^ 0xb);
			if (rc)
				break;
			memcpy(r->B.want, r->B.p, r->B.bytes + 2 * GUARD);
			for (i = 0; i < r->n; i++)
				mv_elem(c->salt, c->root, r->sd[me] + i, es, wdata(&r->B) + i * es);
			r->rp = data(&r->B);
		}
		break;
	case VK_ALLTOALLV:
		for (p = 0; p < P; p++) {
			size_t e = lay_out(c->ly, 1, seed_of(c, p, 'S'), P, r->cnt + (size_t)p * P,
			                   r->sd + (size_t)p * P);

			if (p == me)
				ext = e;
			r->col[p] = r->cnt[(size_t)p * P + (size_t)me];
			tot += r->col[p];
			any_in |= r->cnt[(size_t)me * P + (size_t)p] != 0;
		}
		r->sc = r->cnt + (size_t)me * P;
		r->sdp = r->sd + (size_t)me * P;
		if (c->nulls && !any_in) {
			r->sp = NULL;
		} else {
			rc = area_new(&r->A, ext * es, c->salt ^ 0xa);
			if (rc)
				break;
			for (i = 0; i < ext; i++)
				mv_elem(c->salt, me, i, es, data(&r->A) + i * es);
			memcpy(r->A.want, r->A.p, r->A.bytes + 2 * GUARD);
			r->sp = data(&r->A);
			r->A.bd = r->sdp;
			r->A.bc = r->sc;
			r->A.nb = P;
		}
		ext = lay_out(c->ly, 0, seed_of(c, me, 'R'), P, r->col, r->rd);
		r->rc = r->col;
		r->rdp = r->rd;
		if (c->nulls && !tot) {
			r->rp = NULL;
			break;
		}
		rc = area_new(&r->B, ext * es, c->salt ^ 0xb);
		if (rc)
			break;
		memcpy(r->B.want, r->B.p, r->B.bytes + 2 * GUARD);
		for (p = 0; p < P; p++)
			for (i = 0; i < r->col[p]; i++)
				mv_elem(c->salt, p, r->sd[(size_t)p * P + (size_t)me] + i, es,
				        wdata(&r->B) + (r->rd[p] + i) * es);
		r->rp = data(&r->B);
		r->B.bd = r->rd;
		r->B.bc = r->col;
		r->B.nb = P;
		break;
	case VK_REDUCE_SCATTERV:
		for (p = 0; p < P; p++) {
			if (p < me)
				off += r->cnt[p];
			tot += r->cnt[p];
		}
		r->rc = r->cnt;
		r->n = r->cnt[me];
		if (c->nulls && !tot) {
			r->sp = r->rp = NULL;
			break;
		}
		rc = area_new(&r->A, tot * es, c->salt ^ 0xa);
		if (rc)
			break;
		for (i = 0; i < tot; i++)
			red_in(c, me, i, data(&r->A) + i * es);
		memcpy(r->A.want, r->A.p, r->A.bytes + 2 * GUARD);
		r->sp = data(&r->A);
		if (c->inplace) {
			r->rp = data(&r->A) + off * es;
			for (i = 0; i < r->n; i++)
				red_fold(c, P, P, off + i, wdata(&r->A) + (off + i) * es);
		} else if (c->nulls && !r->n) {
			r->rp = NULL;
		} else {
			rc = area_new(&r->B, r->n * es, c->salt ^ 0xb);
			if (rc)
				break;
			memcpy(r->B.want, r->B.p, r->B.bytes + 2 * GUARD);
			for (i = 0; i < r->n; i++)
				red_fold(c, P, P, off + i, wdata(&r->B) + i * es);
			r->rp = data(&r->B);
		}
		break;
	default: { /* scan, exscan */
		int nr = me + (c->kind == VK_SCAN);
		struct vc_area *out;

		r->n = r->cnt[0];
		if (c->nulls && !r->n) {
			r->sp = r->rp = NULL;
			break;
		}
		rc = area_new(&r->A, r->n * es, c->salt ^ 0xa);
		if (rc)
			break;
		for (i = 0; i < r->n; i++)
			red_in(c, me, i, data(&r->A) + i * es);
		memcpy(r->A.want, r->A.p, r->A.bytes + 2 * GUARD);
		r->sp = data(&r->A);
		out = &r->A;
		if (!c->inplace) {
			rc = area_new(&r->B, r->n * es, c->salt ^ 0xb);
			if (rc)
				break;
			memcpy(r->B.want, r->B.p, r->B.bytes + 2 * GUARD);
			out = &r->B;
		}
		r->rp = data(out);
		/* exscan: rank 0's recvbuf is left as it was. */
		for (i = 0; nr > 0 && i < r->n; i++)
			red_fold(c, nr, P, i, wdata(out) + i * es);
		break;
	}
	}
	if (!rc && r->A.p)
		memcpy(r->A.snap, r->A.p, r->A.bytes + 2 * GUARD);
	if (!rc && r->B.p)
		memcpy(r->B.snap, r->B.p, r->B.bytes + 2 * GUARD);
	return rc;
}

static void restore(struct vc_run *r)
{
	if (r->A.p)
		memcpy(r->A.p, r->A.snap, r->A.bytes + 2 * GUARD);
	if (r->B.p)
		memcpy(r->B.p, r->B.snap, r->B.bytes + 2 * GUARD);
}

/* Where byte off of a's whole area (guards included) lies. */
static void where(const struct vc_area *a, size_t es, size_t off, char *buf, size_t len)
{
	size_t e;
	int p;

	if (off < GUARD) {
		snprintf(buf, len, "the guard before the buffer (byte %zu of %d)", off, GUARD);
		return;
	}
	if (off >= GUARD + a->bytes) {
		snprintf(buf, len, "the guard past the buffer's %zu bytes (byte %zu after)",
		         a->bytes, off - GUARD - a->bytes);
		return;
	}
	e = (off - GUARD) / es;
	for (p = 0; p < a->nb; p++)
		if (a->bc[p] && e >= a->bd[p] && e < a->bd[p] + a->bc[p]) {
			snprintf(buf, len, "element %zu: element %zu of block %d", e, e - a->bd[p],
			         p);
			return;
		}
	snprintf(buf, len, "element %zu%s", e, a->nb ? ", outside every block" : "");
}

static int area_check(const struct vc_run *r, const struct vc_area *a, const char *name,
                      const char *form)
{
	size_t tot = a->bytes + 2 * GUARD, i, bad = 0, first = SIZE_MAX, e;
	char at[160], got[64], want[64];

	if (!a->p || !memcmp(a->p, a->want, tot))
		return 0;
	for (i = 0; i < tot; i++)
		if (a->p[i] != a->want[i]) {
			bad++;
			first = first == SIZE_MAX ? i : first;
		}
	where(a, r->es, first, at, sizeof(at));
	if (first >= GUARD && first < GUARD + a->bytes) {
		e = (first - GUARD) / r->es;
		th_format_elem(r->c.dt, a->p + GUARD + e * r->es, got, sizeof(got));
		th_format_elem(r->c.dt, a->want + GUARD + e * r->es, want, sizeof(want));
	} else {
		snprintf(got, sizeof(got), "0x%02x", a->p[first]);
		snprintf(want, sizeof(want), "0x%02x", a->want[first]);
	}
	return vc_failf(E_OUT, &r->c, r->me,
	                "%s form: %s, %s is %s, want %s (%zu bytes wrong of %zu)", form, name, at,
	                got, want, bad, tot);
}

int vc_run_check(const struct vc_run *r, const char *form)
{
	int rc = area_check(r, &r->A, r->B.p ? "sendbuf" : "the buffer", form);

	return rc ? rc : area_check(r, &r->B, "recvbuf", form);
}

/* ---- the calls ---- */

int vc_call_blocking(const struct vc_run *r, shmcoll_comm *comm)
{
	const struct vc *c = &r->c;

	switch (c->kind) {
	case VK_ALLGATHERV:
		return shmcoll_allgatherv(r->sp, r->n, r->rp, r->rc, r->rdp, c->dt, comm);
	case VK_GATHERV:
		return shmcoll_gatherv(r->sp, r->n, r->rp, r->rc, r->rdp, c->dt, c->root, comm);
	case VK_SCATTERV:
		return shmcoll_scatterv(r->sp, r->sc, r->sdp, r->rp, r->n, c->dt, c->root, comm);
	case VK_ALLTOALLV:
		return shmcoll_alltoallv(r->sp, r->sc, r->sdp, r->rp, r->rc, r->rdp, c->dt, comm);
	case VK_REDUCE_SCATTERV:
		return shmcoll_reduce_scatterv(r->sp, r->rp, r->rc, c->dt, c->op, comm);
	case VK_SCAN:
		return shmcoll_scan(r->sp, r->rp, r->n, c->dt, c->op, comm);
	default:
		return shmcoll_exscan(r->sp, r->rp, r->n, c->dt, c->op, comm);
	}
}

int vc_call_start(const struct vc_run *r, shmcoll_comm *comm, shmcoll_request **q)
{
	const struct vc *c = &r->c;

	switch (c->kind) {
	case VK_ALLGATHERV:
		return shmcoll_iallgatherv(r->sp, r->n, r->rp, r->rc, r->rdp, c->dt, comm, q);
	case VK_GATHERV:
		return shmcoll_igatherv(r->sp, r->n, r->rp, r->rc, r->rdp, c->dt, c->root, comm, q);
	case VK_SCATTERV:
		return shmcoll_iscatterv(r->sp, r->sc, r->sdp, r->rp, r->n, c->dt, c->root, comm,
		                         q);
	case VK_ALLTOALLV:
		return shmcoll_ialltoallv(r->sp, r->sc, r->sdp, r->rp, r->rc, r->rdp, c->dt, comm,
		                          q);
	case VK_REDUCE_SCATTERV:
		return shmcoll_ireduce_scatterv(r->sp, r->rp, r->rc, c->dt, c->op, comm, q);
	case VK_SCAN:
		return shmcoll_iscan(r->sp, r->rp, r->n, c->dt, c->op, comm, q);
	default:
		return shmcoll_iexscan(r->sp, r->rp, r->n, c->dt, c->op, comm, q);
	}
}

static const char *const method_name[5] = {"wait", "test loop", "waitall", "testall loop",
                                           "waitany"};

/* Completes one request by method m % 5; its result. *bad: the request or status was left
 * wrong. */
static int complete_one(shmcoll_request **q, int m, int *bad)
{
	shmcoll_status st;
	size_t idx = 12345;
	int rc, done = 0;

	*bad = 0;
	switch (m % 5) {
	case 0:
		rc = shmcoll_wait(q, NULL);
		break;
	case 1:
		while (!(rc = shmcoll_test(q, &done, NULL)) && !done)
			sched_yield();
		*bad = !done;
		break;
	case 2:
		st.error = 12345;
		rc = shmcoll_waitall(1, q, &st);
		*bad = st.error != rc;
		break;
	case 3:
		while (!(rc = shmcoll_testall(1, q, &done, NULL)) && !done)
			sched_yield();
		*bad = !done;
		break;
	default:
		rc = shmcoll_waitany(1, q, &idx, NULL);
		*bad = idx != 0;
		break;
	}
	*bad = *bad || *q != NULL;
	return rc;
}

/* One case in the forms asked for, each checked. */
int vc_run_case(shmcoll_comm *comm, const struct vc *c, int P, int me, int forms, int method)
{
	struct vc_run *r = malloc(sizeof(*r));
	shmcoll_request *q = NULL;
	int rc, bad;

	if (!r)
		return vc_failf(E_NOMEM, c, me, "out of memory");
	rc = vc_setup(r, c, P, me);
	if (rc) {
		vc_run_free(r);
		free(r);
		return vc_failf(rc, c, me, "out of memory");
	}
	if (forms & F_BLOCKING) {
		vc_crumb(c, "blocking");
		rc = vc_call_blocking(r, comm);
		if (rc)
			rc = vc_failf(E_CALL, c, me, "blocking form returned %d (%s): %s", rc,
			              shmcoll_strerror(rc), shmcoll_last_error(comm));
		if (!rc)
			rc = vc_run_check(r, "blocking");
		restore(r);
	}
	if (!rc && (forms & F_NONBLOCKING)) {
		vc_crumb(c, "non-blocking");
		rc = vc_call_start(r, comm, &q);
		if (rc || !q)
			rc = vc_failf(E_START, c, me, "start returned %d (%s), request %p: %s", rc,
			              shmcoll_strerror(rc), (void *)q, shmcoll_last_error(comm));
		if (!rc) {
			rc = complete_one(&q, method, &bad);
			if (rc)
				rc = vc_failf(E_DONE, c, me, "%s returned %d (%s)%s: %s",
				              method_name[method % 5], rc, shmcoll_strerror(rc),
				              bad ? " and left the request set" : "",
				              shmcoll_last_error(comm));
			else if (bad)
				rc = vc_failf(E_REQ, c, me,
				              "%s left the request or its status wrong",
				              method_name[method % 5]);
		}
		if (!rc)
			rc = vc_run_check(r, "non-blocking");
	}
	vc_run_free(r);
	free(r);
	return rc;
}
