/* coll.c - the collectives of the communicator, with mpi4py's arguments and semantics:
 * Barrier, Bcast, Gather(v), Scatter(v), Allgather(v), Alltoall(v), Reduce, Allreduce,
 * Reduce_scatter_block, Reduce_scatter, Scan, Exscan, and the non-blocking start of each.
 *
 * Each call reads its message specifications as mpi4py does (message.c), the root-only ones
 * on the root alone (a non-root's are not looked at), checks them on this rank, and runs as
 * one call of the library:
 *   - data that only moves goes as bytes; a buffer whose datatype is contiguous is handed
 *     to the library where it lies, others are packed into scratch memory first and
 *     unpacked from it when the call completes;
 *   - a reduction the library does (op.c's py__op_native: its ops on its element types,
 *     complex SUM as real pairs) runs as that reduction; any other (a user op, MAXLOC, the
 *     logical ops, int16, long double ...) gathers every rank's packed data with the
 *     library (allgather, gather, alltoall(v)) and folds it here in rank order, the same
 *     on every rank, when the call completes.
 * Which way a call goes depends only on its op and datatype, which every rank passes
 * alike, so the ranks always make the same call of the library. */
#include "shmcoll_py.h"

#include <errno.h>
#include <string.h>
#include <time.h>

/* ---- helpers ---- */

static char *at(const struct msg *m, Py_ssize_t elem)
{
	return (char *)((uintptr_t)m->addr + (uintptr_t)(elem * py__extent(m->type)));
}

static int root_ok(CommObject *self, int root, const char *what)
{
	if (root >= 0 && root < self->size)
		return 0;
	char msg[160];

	PyOS_snprintf(msg, sizeof(msg), "%s: root %d is not a rank (0 .. %d)", what, root,
	              self->size - 1);
	py__raise_errno(EINVAL, msg);
	return -1;
}

/* The bytes of n elements of m's datatype. */
static Py_ssize_t bytes_of(const struct msg *m, Py_ssize_t n)
{
	return m->type ? n * m->type->size : 0;
}

/* Where the library reads m's elements first .. first+n-1 from: their memory, or packed
 * into dst (n * size bytes). */
static const char *src(const struct msg *m, Py_ssize_t first, Py_ssize_t n, char *dst)
{
	if (m->type->contig || n == 0)
		return at(m, first);
	py__pack(m->type, at(m, first), n, dst);
	return dst;
}

/* finish: unpack k->count elements from k->out into the receive message. */
static int finish_unpack(struct call *k)
{
	py__unpack(k->r.type, k->out, k->count, k->r.addr);
	return 0;
}

/* finish: unpack every block of a vector receive, packed one after another at k->out. */
static int finish_unpack_v(struct call *k)
{
	const char *p = k->out;
	Py_ssize_t i;

	for (i = 0; i < k->size; i++) {
		py__unpack(k->r.type, p, k->r.counts[i], at(&k->r, k->r.displs[i]));
		p += k->r.counts[i] * k->r.type->size;
	}
	return 0;
}

/* Where the library writes the receive's n elements: their memory when contiguous, else
 * scratch at dst, unpacked by finish_unpack at the end. */
static char *dst(struct call *k, Py_ssize_t n, char *scratch)
{
	if (k->r.type->contig || n == 0)
		return at(&k->r, 0);
	k->out = scratch;
	k->count = n;
	k->finish = finish_unpack;
	return scratch;
}

/* Two messages of a reduction agree: the same datatype and count (mpi4py's checks). */
static int same(const struct msg *s, const struct msg *r)
{
	if (s->type != r->type) {
		PyErr_SetString(PyExc_ValueError, "mismatch in send and receive MPI datatypes");
		return -1;
	}
	if (s->count != r->count) {
		PyErr_Format(PyExc_ValueError, "mismatch in send count %zd and receive count %zd",
		             s->count, r->count);
		return -1;
	}
	return 0;
}

static int fits(const struct msg *m, Py_ssize_t n, const char *what)
{
	return py__msg_fits(m, 0, n, what);
}

/* A vector message's blocks all fit its buffer. */
static int fits_v(const struct msg *m, Py_ssize_t blocks, const char *what)
{
	for (Py_ssize_t i = 0; i < blocks; i++)
		if (py__msg_fits(m, m->displs[i], m->counts[i], what) < 0)
			return -1;
	return 0;
}

static int parse_op(PyObject *opo, const DatatypeObject *t, struct call *k, const char *what)
{
	OpObject *op = py__op_get(opo, what);

	if (!op || py__op_check(op, t, what) < 0)
		return -1;
	Py_INCREF(op);
	k->op = op;
	return 0;
}

/* ---- Barrier ---- */

PyObject *py__comm_barrier(CommObject *self, PyObject *unused)
{
	shmcoll_comm *c = py__live(self);
	int rc;

	if (!c)
		return NULL;
	NOGIL(rc = shmcoll_barrier(c));
	if (rc)
		return py__raise_rc(c, rc);
	Py_RETURN_NONE;
}

static PyObject *comm_ibarrier(CommObject *self, PyObject *unused)
{
	shmcoll_comm *c = py__live(self);
	shmcoll_request *req = NULL;
	struct call *k;
	int rc;

	if (!c || !(k = py__call_new()))
		return NULL;
	rc = shmcoll_ibarrier(c, &req);
	return py__called(self, rc, req, 1, k);
}

/* ---- Bcast ---- */

static PyObject *bcast(CommObject *self, PyObject *args, PyObject *kw, int nb)
{
	static char *kwlist[] = {"buf", "root", NULL};
	const char *what = nb ? "Ibcast" : "Bcast";
	shmcoll_comm *c = py__live(self);
	shmcoll_request *req = NULL;
	struct call *k, kk;
	PyObject *bo;
	int root = 0, rc, is_root;
	Py_ssize_t n;
	char *p, *scratch;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, nb ? "O|i:Ibcast" : "O|i:Bcast", kwlist,
	                                       &bo, &root))
		return NULL;
	if (root_ok(self, root, what) < 0 || !(k = nb ? py__call_new() : py__call_init(&kk)))
		return NULL;
	is_root = root == self->rank;
	if (py__msg_simple(bo, is_root, 0, is_root ? &k->s : &k->r) < 0)
		goto fail;
	if (is_root) {
		n = k->s.count;
		if (fits(&k->s, n, what) < 0 ||
		    !(scratch = py__call_scratch(k, bytes_of(&k->s, n))))
			goto fail;
		p = (char *)src(&k->s, 0, n, scratch);
		n = bytes_of(&k->s, n);
	} else {
		n = k->r.count;
		if (fits(&k->r, n, what) < 0 ||
		    !(scratch = py__call_scratch(k, bytes_of(&k->r, n))))
			goto fail;
		p = dst(k, n, scratch);
		n = bytes_of(&k->r, n);
	}
	if (nb)
		NOGIL(rc = shmcoll_ibcast(p, (size_t)n, SHMCOLL_UINT8, root, c, &req));
	else
		NOGIL(rc = shmcoll_bcast(p, (size_t)n, SHMCOLL_UINT8, root, c));
	return py__called(self, rc, req, nb, k);
fail:
	py__call_free(k);
	return NULL;
}

static PyObject *comm_bcast(CommObject *self, PyObject *args, PyObject *kw)
{
	return bcast(self, args, kw, 0);
}

static PyObject *comm_ibcast(CommObject *self, PyObject *args, PyObject *kw)
{
	return bcast(self, args, kw, 1);
}

/* ---- Gather, Scatter, Allgather, Alltoall ---- */

enum move_kind { M_GATHER, M_SCATTER, M_ALLGATHER, M_ALLTOALL };

static int run_move(enum move_kind k, const void *s, void *r, size_t n, int root, shmcoll_comm *c,
                    shmcoll_request **req)
{
	switch (k) {
	case M_ALLGATHER:
		return req ? shmcoll_iallgather(s, r, n, SHMCOLL_UINT8, c, req)
		           : shmcoll_allgather(s, r, n, SHMCOLL_UINT8, c);
	case M_GATHER:
		return req ? shmcoll_igather(s, r, n, SHMCOLL_UINT8, root, c, req)
		           : shmcoll_gather(s, r, n, SHMCOLL_UINT8, root, c);
	case M_SCATTER:
		return req ? shmcoll_iscatter(s, r, n, SHMCOLL_UINT8, root, c, req)
		           : shmcoll_scatter(s, r, n, SHMCOLL_UINT8, root, c);
	default:
		return req ? shmcoll_ialltoall(s, r, n, SHMCOLL_UINT8, c, req)
		           : shmcoll_alltoall(s, r, n, SHMCOLL_UINT8, c);
	}
}

/* Block bytes that disagree between a rank's own send and receive. */
static int block_mismatch(Py_ssize_t sb, Py_ssize_t rb, const char *what)
{
	PyErr_Format(PyExc_ValueError,
	             "%s: mismatch in send and receive blocks: %zd bytes sent, %zd received", what,
	             sb, rb);
	return -1;
}

/* The two messages of gather, allgather and scatter: b, size blocks (the gathers' receive,
 * scatter's send, parsed at the root only), and o, this rank's block (or IN_PLACE at the
 * root). Returns the bytes of one block, or -1 with an exception set. */
static Py_ssize_t parse_blocks_and_one(PyObject *bo, int b_send, struct msg *b, PyObject *oo,
                                       struct msg *o, int is_root, int P, const char *what)
{
	Py_ssize_t blk, ob;

	if (!is_root) {
		py__msg_ignore(b);
		if (py__msg_simple(oo, !b_send, 0, o) < 0 || fits(o, o->count, what) < 0)
			return -1;
		return bytes_of(o, o->count);
	}
	if (py__msg_simple(bo, b_send, P, b) < 0)
		return -1;
	if (py__is_in_place(oo))
		py__msg_in_place(o);
	else if (py__msg_simple(oo, !b_send, 0, o) < 0)
		return -1;
	blk = bytes_of(b, b->count);
	if (!o->inplace && (ob = bytes_of(o, o->count)) != blk) {
		block_mismatch(b_send ? blk : ob, b_send ? ob : blk, what);
		return -1;
	}
	if (fits(b, b->count * P, what) < 0 || (!o->inplace && fits(o, o->count, what) < 0))
		return -1;
	return blk;
}

static PyObject *move(CommObject *self, PyObject *args, PyObject *kw, enum move_kind kind,
                      const char *fmt, const char *what, int nb)
{
	static char *kwlist[] = {"sendbuf", "recvbuf", "root", NULL};
	static char *kwlist_rootless[] = {"sendbuf", "recvbuf", NULL};
	shmcoll_comm *c = py__live(self);
	shmcoll_request *req = NULL;
	PyObject *so, *ro;
	struct call *k, kk;
	int root = 0, rc, rooted = kind == M_GATHER || kind == M_SCATTER, is_root, P = self->size,
	    me = self->rank;
	Py_ssize_t blk = 0, sneed, rneed; /* bytes of one block; scratch wanted */
	const char *sp = NULL;
	char *rp = NULL, *scratch;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, fmt, rooted ? kwlist : kwlist_rootless,
	                                       &so, &ro, &root))
		return NULL;
	if ((rooted && root_ok(self, root, what) < 0) ||
	    !(k = nb ? py__call_new() : py__call_init(&kk)))
		return NULL;
	is_root = !rooted || root == me;
	switch (kind) {
	case M_GATHER:
	case M_ALLGATHER:
		/* The receive holds size blocks (the root's only, for gather). */
		if ((blk = parse_blocks_and_one(ro, 0, &k->r, so, &k->s, is_root, P, what)) < 0)
			goto fail;
		/* Scratch only for what is not contiguous: the receive's blocks, then the send. */
		rneed = is_root && !k->r.type->contig ? blk * P : 0;
		sneed = !k->s.inplace && !k->s.type->contig ? blk : 0;
		if (!(scratch = py__call_scratch(k, rneed + sneed)))
			goto fail;
		if (is_root) {
			rp = dst(k, k->r.count * P, scratch);
			if (k->s.inplace) {
				/* This rank's block is in place in the receive buffer. */
				if (!k->r.type->contig)
					py__pack(k->r.type, at(&k->r, (Py_ssize_t)me * k->r.count),
					         k->r.count, rp + (Py_ssize_t)me * blk);
				sp = rp + (Py_ssize_t)me * blk;
			} else {
				sp = src(&k->s, 0, k->s.count, scratch + rneed);
			}
		} else {
			sp = src(&k->s, 0, k->s.count, scratch);
		}
		break;
	case M_SCATTER:
		/* The send holds size blocks (the root's only). */
		if ((blk = parse_blocks_and_one(so, 1, &k->s, ro, &k->r, is_root, P, what)) < 0)
			goto fail;
		sneed = is_root && !k->s.type->contig ? blk * P : 0;
		rneed = !k->r.inplace && !k->r.type->contig ? blk : 0;
		if (!(scratch = py__call_scratch(k, sneed + rneed)))
			goto fail;
		if (is_root) {
			sp = src(&k->s, 0, k->s.count * P, scratch);
			if (k->r.inplace) /* the root keeps its block where it is */
				rp = (char *)sp + (Py_ssize_t)me * blk;
			else
				rp = dst(k, k->r.count, scratch + sneed);
		} else {
			rp = dst(k, k->r.count, scratch);
		}
		break;
	default: /* M_ALLTOALL: both hold size blocks */
		if (py__msg_simple(ro, 0, P, &k->r) < 0)
			goto fail;
		if (py__is_in_place(so))
			py__msg_in_place(&k->s);
		else if (py__msg_simple(so, 1, P, &k->s) < 0)
			goto fail;
		blk = bytes_of(&k->r, k->r.count);
		if (!k->s.inplace && bytes_of(&k->s, k->s.count) != blk) {
			block_mismatch(bytes_of(&k->s, k->s.count), blk, what);
			goto fail;
		}
		if (fits(&k->r, k->r.count * P, what) < 0 ||
		    (!k->s.inplace && fits(&k->s, k->s.count * P, what) < 0))
			goto fail;
		rneed = !k->r.type->contig ? blk * P : 0;
		sneed = !k->s.inplace && !k->s.type->contig ? blk * P : 0;
		if (!(scratch = py__call_scratch(k, rneed + sneed)))
			goto fail;
		rp = dst(k, k->r.count * P, scratch);
		if (k->s.inplace) {
			/* The library's in-place form: the data to send is in the receive buffer
			 * (packed into scratch first when its datatype is not contiguous). */
			if (!k->r.type->contig)
				py__pack(k->r.type, at(&k->r, 0), k->r.count * P, rp);
			sp = rp;
		} else {
			sp = src(&k->s, 0, k->s.count * P, scratch + rneed);
		}
		break;
	}
	NOGIL(rc = run_move(kind, sp, rp, (size_t)blk, root, c, nb ? &req : NULL));
	return py__called(self, rc, req, nb, k);
fail:
	py__call_free(k);
	return NULL;
}

static PyObject *comm_allgather(CommObject *self, PyObject *args, PyObject *kw)
{
	return move(self, args, kw, M_ALLGATHER, "OO:Allgather", "Allgather", 0);
}

static PyObject *comm_iallgather(CommObject *self, PyObject *args, PyObject *kw)
{
	return move(self, args, kw, M_ALLGATHER, "OO:Iallgather", "Iallgather", 1);
}

static PyObject *comm_gather(CommObject *self, PyObject *args, PyObject *kw)
{
	return move(self, args, kw, M_GATHER, "OO|i:Gather", "Gather", 0);
}

static PyObject *comm_igather(CommObject *self, PyObject *args, PyObject *kw)
{
	return move(self, args, kw, M_GATHER, "OO|i:Igather", "Igather", 1);
}

static PyObject *comm_scatter(CommObject *self, PyObject *args, PyObject *kw)
{
	return move(self, args, kw, M_SCATTER, "OO|i:Scatter", "Scatter", 0);
}

static PyObject *comm_iscatter(CommObject *self, PyObject *args, PyObject *kw)
{
	return move(self, args, kw, M_SCATTER, "OO|i:Iscatter", "Iscatter", 1);
}

static PyObject *comm_alltoall(CommObject *self, PyObject *args, PyObject *kw)
{
	return move(self, args, kw, M_ALLTOALL, "OO:Alltoall", "Alltoall", 0);
}

static PyObject *comm_ialltoall(CommObject *self, PyObject *args, PyObject *kw)
{
	return move(self, args, kw, M_ALLTOALL, "OO:Ialltoall", "Ialltoall", 1);
}

/* ---- the variable-count moves ---- */

enum vkind { V_GATHERV, V_SCATTERV, V_ALLGATHERV, V_ALLTOALLV };

/* A vector message's blocks as the library takes them: byte counts and displacements into
 * its memory, or, packed, into its packed copy (blocks one after another), into cnt and dsp
 * (P entries each). */
static void byte_layout(const struct msg *m, int P, int packed, size_t *cnt, size_t *dsp)
{
	Py_ssize_t i, off = 0, ext = py__extent(m->type), sz = m->type->size;

	for (i = 0; i < P; i++) {
		cnt[i] = (size_t)(m->counts[i] * sz);
		if (!packed) {
			dsp[i] = (size_t)(m->displs[i] * ext);
		} else {
			dsp[i] = (size_t)off;
			off += m->counts[i] * sz;
		}
	}
}

/* The packed size of a vector message's blocks. */
static Py_ssize_t packed_v(const struct msg *m, int P)
{
	Py_ssize_t i, n = 0;

	for (i = 0; i < P; i++)
		n += m->counts[i] * m->type->size;
	return n;
}

/* Packs a vector message's blocks one after another into dst. */
static void pack_v(const struct msg *m, int P, char *dstp)
{
	for (int i = 0; i < P; i++) {
		py__pack(m->type, at(m, m->displs[i]), m->counts[i], dstp);
		dstp += m->counts[i] * m->type->size;
	}
}

/* Nonzero when any of a vector message's displacements is negative (the library's are
 * unsigned; MPI allows them, so such a message goes packed). */
static int any_negative(const struct msg *m, int P)
{
	for (int i = 0; i < P; i++)
		if (m->displs[i] < 0)
			return 1;
	return 0;
}

/* Nonzero when two non-empty blocks of a vector message of a contiguous datatype overlap.
 * One pass settles blocks in rank order; any other layout is checked pair by pair. */
static int blocks_overlap(const struct msg *m, int P)
{
	Py_ssize_t end = PY_SSIZE_T_MIN;
	int i, j, ordered = 1;

	for (i = 0; i < P && ordered; i++) {
		if (!m->counts[i])
			continue;
		ordered = m->displs[i] >= end;
		end = m->displs[i] + m->counts[i];
	}
	if (ordered)
		return 0;
	for (i = 0; i < P; i++)
		for (j = i + 1; j < P; j++)
			if (m->counts[i] && m->counts[j] &&
			    m->displs[i] < m->displs[j] + m->counts[j] &&
			    m->displs[j] < m->displs[i] + m->counts[i])
				return 1;
	return 0;
}

/* Whether a vector message moves through a packed copy of its blocks, one after another,
 * rather than in its own memory: a datatype that is not contiguous, a negative displacement,
 * or, received, blocks that overlap. The library refuses overlapping receive blocks; MPI
 * calls them erroneous, and mpi4py on Open MPI or MPICH runs them all the same, so here they
 * are unpacked block by block in rank order: the last rank's bytes win where they overlap. */
static int goes_packed(const struct msg *m, int P, int received)
{
	return !m->type->contig || any_negative(m, P) || (received && blocks_overlap(m, P));
}

/* The two messages of gatherv, allgatherv and scatterv: the vector v (a block per rank: the
 * gathers' receive, scatterv's send, parsed at the root only) and the single message o (this
 * rank's block, or IN_PLACE at the root). 0, or -1 with an exception set. */
static int parse_v_and_one(PyObject *vo, int v_send, struct msg *v, PyObject *oo, struct msg *o,
                           int is_root, int P, int me, const char *what)
{
	if (!is_root) {
		py__msg_ignore(v);
		if (py__msg_simple(oo, !v_send, 0, o) < 0 || fits(o, o->count, what) < 0)
			return -1;
		return 0;
	}
	if (py__msg_vector(vo, v_send, P, v) < 0)
		return -1;
	if (py__is_in_place(oo))
		py__msg_in_place(o);
	else if (py__msg_simple(oo, !v_send, 0, o) < 0)
		return -1;
	if (fits_v(v, P, what) < 0 || (!o->inplace && fits(o, o->count, what) < 0))
		return -1;
	if (!o->inplace && bytes_of(o, o->count) != bytes_of(v, v->counts[me])) {
		Py_ssize_t vb = bytes_of(v, v->counts[me]), ob = bytes_of(o, o->count);
		block_mismatch(v_send ? vb : ob, v_send ? ob : vb, what);
		return -1;
	}
	return 0;
}

static PyObject *vmove(CommObject *self, PyObject *args, PyObject *kw, enum vkind kind,
                       const char *fmt, const char *what, int nb)
{
	static char *kwlist[] = {"sendbuf", "recvbuf", "root", NULL};
	static char *kwlist_rootless[] = {"sendbuf", "recvbuf", NULL};
	shmcoll_comm *c = py__live(self);
	shmcoll_request *req = NULL;
	PyObject *so, *ro;
	struct call *k, kk;
	int root = 0, rc, rooted = kind == V_GATHERV || kind == V_SCATTERV, is_root, P = self->size,
	    me = self->rank;
	size_t *sc, *sd, *rc_, *rd, one = 0;
	const char *sp = NULL;
	char *rp = NULL, *scratch;
	Py_ssize_t spack = 0, rpack = 0;
	int spacked = 0, rpacked = 0; /* the v-side goes through a packed copy (goes_packed) */

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, fmt, rooted ? kwlist : kwlist_rootless,
	                                       &so, &ro, &root))
		return NULL;
	if ((rooted && root_ok(self, root, what) < 0) ||
	    !(k = nb ? py__call_new() : py__call_init(&kk)))
		return NULL;
	is_root = !rooted || root == me;
	k->size = P;
	if (py__call_arrays(k, P) < 0)
		goto out;
	sc = k->arrays[0]; /* byte counts and displacements: the send's, the receive's */
	sd = k->arrays[1];
	rc_ = k->arrays[2];
	rd = k->arrays[3];
	switch (kind) {
	case V_GATHERV:
	case V_ALLGATHERV:
		if (parse_v_and_one(ro, 0, &k->r, so, &k->s, is_root, P, me, what) < 0)
			goto out;
		rpacked = is_root && goes_packed(&k->r, P, 1);
		rpack = rpacked ? packed_v(&k->r, P) : 0;
		spack = k->s.inplace ? 0 : bytes_of(&k->s, k->s.count);
		if (!(scratch = py__call_scratch(k, spack + rpack)))
			goto out;
		if (is_root) {
			byte_layout(&k->r, P, rpacked, rc_, rd);
			if (!rpacked) {
				rp = at(&k->r, 0);
			} else {
				rp = scratch + spack;
				k->out = rp;
				k->finish = finish_unpack_v;
			}
			if (k->s.inplace) {
				if (rpacked)
					py__pack(k->r.type, at(&k->r, k->r.displs[me]),
					         k->r.counts[me], rp + rd[me]);
				sp = rp + rd[me];
				one = rc_[me];
			} else {
				sp = src(&k->s, 0, k->s.count, scratch);
				one = (size_t)bytes_of(&k->s, k->s.count);
			}
		} else {
			sp = src(&k->s, 0, k->s.count, scratch);
			one = (size_t)bytes_of(&k->s, k->s.count);
		}
		if (kind == V_ALLGATHERV)
			NOGIL(rc = nb ? shmcoll_iallgatherv(sp, one, rp, rc_, rd, SHMCOLL_UINT8, c,
			                                    &req)
			              : shmcoll_allgatherv(sp, one, rp, rc_, rd, SHMCOLL_UINT8, c));
		else
			NOGIL(rc = nb ? shmcoll_igatherv(sp, one, rp, rc_, rd, SHMCOLL_UINT8, root,
			                                 c, &req)
			              : shmcoll_gatherv(sp, one, rp, rc_, rd, SHMCOLL_UINT8, root,
			                                c));
		break;
	case V_SCATTERV:
		if (parse_v_and_one(so, 1, &k->s, ro, &k->r, is_root, P, me, what) < 0)
			goto out;
		spacked = is_root && goes_packed(&k->s, P, 0);
		spack = spacked ? packed_v(&k->s, P) : 0;
		rpack = k->r.inplace ? 0 : bytes_of(&k->r, k->r.count);
		if (!(scratch = py__call_scratch(k, spack + rpack)))
			goto out;
		if (is_root) {
			byte_layout(&k->s, P, spacked, sc, sd);
			if (!spacked) {
				sp = at(&k->s, 0);
			} else {
				pack_v(&k->s, P, scratch);
				sp = scratch;
			}
			if (k->r.inplace) {
				rp = (char *)sp + sd[me];
				one = sc[me];
			} else {
				rp = dst(k, k->r.count, scratch + spack);
				one = (size_t)bytes_of(&k->r, k->r.count);
			}
		} else {
			rp = dst(k, k->r.count, scratch + spack);
			one = (size_t)bytes_of(&k->r, k->r.count);
		}
		NOGIL(rc = nb ? shmcoll_iscatterv(sp, sc, sd, rp, one, SHMCOLL_UINT8, root, c, &req)
		              : shmcoll_scatterv(sp, sc, sd, rp, one, SHMCOLL_UINT8, root, c));
		break;
	default: /* V_ALLTOALLV */
		if (py__msg_vector(ro, 0, P, &k->r) < 0)
			goto out;
		if (py__is_in_place(so))
			py__msg_in_place(&k->s);
		else if (py__msg_vector(so, 1, P, &k->s) < 0)
			goto out;
		if (fits_v(&k->r, P, what) < 0 || (!k->s.inplace && fits_v(&k->s, P, what) < 0))
			goto out;
		/* Packed copies where goes_packed says, and of the receive buffer for an in-place
		 * call: the library's alltoallv has no in-place form. */
		rpacked = goes_packed(&k->r, P, 1);
		spacked = k->s.inplace || goes_packed(&k->s, P, 0);
		rpack = rpacked ? packed_v(&k->r, P) : 0;
		spack = !spacked ? 0 : packed_v(k->s.inplace ? &k->r : &k->s, P);
		if (!(scratch = py__call_scratch(k, spack + rpack)))
			goto out;
		if (spacked) {
			const struct msg *from = k->s.inplace ? &k->r : &k->s;
			Py_ssize_t i, off = 0;

			pack_v(from, P, scratch);
			sp = scratch;
			for (i = 0; i < P; i++) {
				sc[i] = (size_t)(from->counts[i] * from->type->size);
				sd[i] = (size_t)off;
				off += (Py_ssize_t)sc[i];
			}
		} else {
			sp = at(&k->s, 0);
			byte_layout(&k->s, P, 0, sc, sd);
		}
		byte_layout(&k->r, P, rpacked, rc_, rd);
		if (rpacked) {
			rp = scratch + spack;
			k->out = rp;
			k->finish = finish_unpack_v;
		} else {
			rp = at(&k->r, 0);
		}
		NOGIL(rc = nb ? shmcoll_ialltoallv(sp, sc, sd, rp, rc_, rd, SHMCOLL_UINT8, c, &req)
		              : shmcoll_alltoallv(sp, sc, sd, rp, rc_, rd, SHMCOLL_UINT8, c));
		break;
	}
	/* The library reads the arrays until the call completes: the call keeps them. */
	return py__called(self, rc, req, nb, k);
out:
	py__call_free(k);
	return NULL;
}

static PyObject *comm_gatherv(CommObject *self, PyObject *args, PyObject *kw)
{
	return vmove(self, args, kw, V_GATHERV, "OO|i:Gatherv", "Gatherv", 0);
}

static PyObject *comm_igatherv(CommObject *self, PyObject *args, PyObject *kw)
{
	return vmove(self, args, kw, V_GATHERV, "OO|i:Igatherv", "Igatherv", 1);
}

static PyObject *comm_scatterv(CommObject *self, PyObject *args, PyObject *kw)
{
	return vmove(self, args, kw, V_SCATTERV, "OO|i:Scatterv", "Scatterv", 0);
}

static PyObject *comm_iscatterv(CommObject *self, PyObject *args, PyObject *kw)
{
	return vmove(self, args, kw, V_SCATTERV, "OO|i:Iscatterv", "Iscatterv", 1);
}

static PyObject *comm_allgatherv(CommObject *self, PyObject *args, PyObject *kw)
{
	return vmove(self, args, kw, V_ALLGATHERV, "OO:Allgatherv", "Allgatherv", 0);
}

static PyObject *comm_iallgatherv(CommObject *self, PyObject *args, PyObject *kw)
{
	return vmove(self, args, kw, V_ALLGATHERV, "OO:Iallgatherv", "Iallgatherv", 1);
}

static PyObject *comm_alltoallv(CommObject *self, PyObject *args, PyObject *kw)
{
	return vmove(self, args, kw, V_ALLTOALLV, "OO:Alltoallv", "Alltoallv", 0);
}

static PyObject *comm_ialltoallv(CommObject *self, PyObject *args, PyObject *kw)
{
	return vmove(self, args, kw, V_ALLTOALLV, "OO:Ialltoallv", "Ialltoallv", 1);
}

/* ---- Alltoallw ---- */

/* A message of Alltoallw (mpi4py's message_vector_w): (buf, types),
 * (buf, (counts, displs), types) or (buf, counts, displs, types); displacements in bytes,
 * a datatype per block (one Datatype: the same for all). Without counts and displacements
 * every block is one element at the buffer's start. Into m (counts, displs) and *types. */
static int msg_w(PyObject *obj, int readonly, int P, struct msg *m, DatatypeObject ***types,
                 const char *what)
{
	PyObject *ob, *oc = NULL, *od = NULL, *ot, *pair, *seq;
	Py_ssize_t n, i;

	memset(m, 0, sizeof(*m));
	Py_INCREF(obj);
	m->obj = obj;
	if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
		PyErr_SetString(PyExc_TypeError, "message: expecting a list or tuple");
		return -1;
	}
	n = PySequence_Fast_GET_SIZE(obj);
	if (n < 2 || n > 4) {
		PyErr_SetString(PyExc_ValueError, "message: expecting 2 to 4 items");
		return -1;
	}
	ob = PySequence_Fast_GET_ITEM(obj, 0);
	ot = PySequence_Fast_GET_ITEM(obj, n - 1);
	if (n == 3) {
		pair = PySequence_Fast_GET_ITEM(obj, 1);
		if (!PyTuple_Check(pair) && !PyList_Check(pair)) {
			PyErr_SetString(PyExc_TypeError, "message: expecting (counts, displs)");
			return -1;
		}
		if (PySequence_Fast_GET_SIZE(pair) != 2) {
			PyErr_SetString(PyExc_ValueError, "message: expecting (counts, displs)");
			return -1;
		}
		oc = PySequence_Fast_GET_ITEM(pair, 0);
		od = PySequence_Fast_GET_ITEM(pair, 1);
	} else if (n == 4) {
		oc = PySequence_Fast_GET_ITEM(obj, 1);
		od = PySequence_Fast_GET_ITEM(obj, 2);
	}
	if (oc == Py_None && od == Py_None)
		oc = od = NULL; /* left out: one element at the start, per block */
	if (ob == py__bottom || ob == Py_None) {
		/* Absolute addresses: both arrays are needed; None for either is left out
		 * (ValueError, as mpi4py, rather than a TypeError from reading None). */
		if (!oc || oc == Py_None || !od || od == Py_None) {
			PyErr_Format(PyExc_ValueError, "message: BOTTOM requires %s",
			             oc && oc != Py_None ? "displs" : "counts");
			return -1;
		}
		m->addr = NULL;
	} else {
		if (py__mem_get(ob, !readonly, &m->mem) < 0)
			return -1;
		m->addr = m->mem.ptr;
	}
	m->counts = PyMem_Calloc((size_t)P, sizeof(Py_ssize_t));
	m->displs = PyMem_Calloc((size_t)P, sizeof(Py_ssize_t));
	*types = PyMem_Calloc((size_t)P, sizeof(**types));
	if (!m->counts || !m->displs || !*types) {
		PyErr_NoMemory();
		return -1;
	}
	for (i = 0; i < P; i++)
		m->counts[i] = 1;
	for (int side = 0; side < 2; side++) {
		PyObject *from = side ? od : oc;

		if (!from)
			continue;
		seq = PySequence_Fast(from, "message: counts and displacements are sequences");
		if (!seq)
			return -1;
		if (PySequence_Fast_GET_SIZE(seq) != P) {
			PyErr_Format(PyExc_ValueError, "expecting %d items, got %zd", P,
			             PySequence_Fast_GET_SIZE(seq));
			Py_DECREF(seq);
			return -1;
		}
		for (i = 0; i < P; i++) {
			Py_ssize_t v = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i),
			                                  PyExc_OverflowError);

			if (v == -1 && PyErr_Occurred()) {
				Py_DECREF(seq);
				return -1;
			}
			(side ? m->displs : m->counts)[i] = v;
		}
		Py_DECREF(seq);
	}
	if (PyObject_TypeCheck(ot, &py__DatatypeType)) {
		for (i = 0; i < P; i++) {
			Py_INCREF(ot);
			(*types)[i] = (DatatypeObject *)ot;
		}
	} else {
		seq = PySequence_Fast(ot, "message: expecting a sequence of datatypes");
		if (!seq)
			return -1;
		if (PySequence_Fast_GET_SIZE(seq) != P) {
			PyErr_Format(PyExc_ValueError, "expecting %d items, got %zd", P,
			             PySequence_Fast_GET_SIZE(seq));
			Py_DECREF(seq);
			return -1;
		}
		for (i = 0; i < P; i++) {
			DatatypeObject *t = py__dt_get(PySequence_Fast_GET_ITEM(seq, i));

			if (!t) {
				Py_DECREF(seq);
				return -1;
			}
			Py_INCREF(t);
			(*types)[i] = t;
		}
		Py_DECREF(seq);
	}
	for (i = 0; i < P; i++) {
		DatatypeObject *t = (*types)[i];
		Py_ssize_t ext = py__extent(t), a, b;

		if (m->counts[i] < 0) {
			PyErr_Format(PyExc_ValueError, "message: negative count %zd", m->counts[i]);
			return -1;
		}
		if (!m->counts[i] || !m->mem.ptr)
			continue;
		a = m->displs[i];
		b = m->displs[i] + (m->counts[i] - 1) * ext;
		if ((a < b ? a : b) + t->true_lb < 0 || (a > b ? a : b) + t->true_ub > m->mem.len) {
			PyErr_Format(
			    PyExc_ValueError,
			    "%s: block %zd (%zd elements at byte %zd) is past the buffer's "
			    "end (%zd bytes)",
			    what, i, m->counts[i], m->displs[i], m->mem.len);
			return -1;
		}
	}
	return 0;
}

/* finish of Alltoallw: every received block unpacked with its own datatype. */
static int finish_unpack_w(struct call *k)
{
	const char *p = k->out;

	for (int i = 0; i < k->size; i++) {
		DatatypeObject *t = k->wtypes[1][i];

		py__unpack(t, p, k->r.counts[i], k->r.addr + k->r.displs[i]);
		p += k->r.counts[i] * t->size;
	}
	return 0;
}

/* Alltoallw(sendbuf, recvbuf): every block packed with its datatype, moved as bytes by the
 * library's alltoallv, unpacked with the receive's. */
static PyObject *alltoallw(CommObject *self, PyObject *args, PyObject *kw, int nb)
{
	static char *kwlist[] = {"sendbuf", "recvbuf", NULL};
	const char *what = nb ? "Ialltoallw" : "Alltoallw";
	shmcoll_comm *c = py__live(self);
	shmcoll_request *req = NULL;
	PyObject *so, *ro;
	struct call *k, kk;
	int P = self->size, rc, i;
	size_t *sc, *sd, *rcn, *rd;
	Py_ssize_t spack = 0, rpack = 0;
	char *scratch, *p;

	if (!c ||
	    !PyArg_ParseTupleAndKeywords(args, kw, nb ? "OO:Ialltoallw" : "OO:Alltoallw", kwlist,
	                                 &so, &ro) ||
	    !(k = nb ? py__call_new() : py__call_init(&kk)))
		return NULL;
	k->size = P;
	if (py__call_arrays(k, P) < 0 || msg_w(ro, 0, P, &k->r, &k->wtypes[1], what) < 0)
		goto out;
	sc = k->arrays[0];
	sd = k->arrays[1];
	rcn = k->arrays[2];
	rd = k->arrays[3];
	if (py__is_in_place(so))
		py__msg_in_place(&k->s);
	else if (msg_w(so, 1, P, &k->s, &k->wtypes[0], what) < 0)
		goto out;
	{
		/* In place: the data sent is the receive buffer's, with its counts and types. */
		struct msg *sm = k->s.inplace ? &k->r : &k->s;
		DatatypeObject **st = k->s.inplace ? k->wtypes[1] : k->wtypes[0];

		for (i = 0; i < P; i++) {
			sc[i] = (size_t)(sm->counts[i] * st[i]->size);
			sd[i] = (size_t)spack;
			spack += (Py_ssize_t)sc[i];
			rcn[i] = (size_t)(k->r.counts[i] * k->wtypes[1][i]->size);
			rd[i] = (size_t)rpack;
			rpack += (Py_ssize_t)rcn[i];
		}
		if (!(scratch = py__call_scratch(k, spack + rpack)))
			goto out;
		for (i = 0, p = scratch; i < P; i++) {
			py__pack(st[i], sm->addr + sm->displs[i], sm->counts[i], p);
			p += sc[i];
		}
	}
	k->out = scratch + spack;
	k->finish = finish_unpack_w;
	NOGIL(rc = nb ? shmcoll_ialltoallv(scratch, sc, sd, k->out, rcn, rd, SHMCOLL_UINT8, c, &req)
	              : shmcoll_alltoallv(scratch, sc, sd, k->out, rcn, rd, SHMCOLL_UINT8, c));
	/* The library reads the arrays until the call completes: the call keeps them. */
	return py__called(self, rc, req, nb, k);
out:
	py__call_free(k);
	return NULL;
}

static PyObject *comm_alltoallw(CommObject *self, PyObject *args, PyObject *kw)
{
	return alltoallw(self, args, kw, 0);
}

static PyObject *comm_ialltoallw(CommObject *self, PyObject *args, PyObject *kw)
{
	return alltoallw(self, args, kw, 1);
}

/* ---- reductions ---- */

enum red_kind { R_ALLREDUCE, R_REDUCE, R_SCAN, R_EXSCAN, R_RSB, R_RS };

/* finish of a folded reduction: the contributions of every rank, packed, k->count elements
 * each, one after another at k->out (block p from rank p, or for the reduce-scatters from
 * rank p's slice for this rank); folds blocks first .. last into block last, in rank order,
 * and unpacks it. */
static int fold_blocks(struct call *k, int first, int last)
{
	Py_ssize_t nb = k->count * k->type->size;
	char *acc = k->out + (Py_ssize_t)last * nb;
	int p;

	for (p = last - 1; p >= first; p--)
		if (py__op_fold(k->op, k->type, k->out + (Py_ssize_t)p * nb, acc, k->count) < 0)
			return -1;
	if (k->op->kind == OP_AVG)
		py__op_avg_finish(k->type, acc, k->count, k->size);
	py__unpack(k->type, acc, k->count, k->r.addr);
	return 0;
}

static int finish_fold_all(struct call *k)
{
	return fold_blocks(k, 0, k->size - 1);
}

static int finish_fold_scan(struct call *k)
{
	return fold_blocks(k, 0, k->rank);
}

static int finish_fold_exscan(struct call *k)
{
	return k->rank == 0 ? 0 : fold_blocks(k, 0, k->rank - 1);
}

static int finish_fold_root(struct call *k)
{
	return k->rank == k->root ? fold_blocks(k, 0, k->size - 1) : 0;
}

static int run_native(enum red_kind kind, const void *s, void *r, size_t n, shmcoll_dtype dt,
                      shmcoll_op op, int root, const size_t *counts, shmcoll_comm *c,
                      shmcoll_request **req)
{
	switch (kind) {
	case R_ALLREDUCE:
		return req ? shmcoll_iallreduce(s, r, n, dt, op, c, req)
		           : shmcoll_allreduce(s, r, n, dt, op, c);
	case R_REDUCE:
		return req ? shmcoll_ireduce(s, r, n, dt, op, root, c, req)
		           : shmcoll_reduce(s, r, n, dt, op, root, c);
	case R_SCAN:
		return req ? shmcoll_iscan(s, r, n, dt, op, c, req)
		           : shmcoll_scan(s, r, n, dt, op, c);
	case R_EXSCAN:
		return req ? shmcoll_iexscan(s, r, n, dt, op, c, req)
		           : shmcoll_exscan(s, r, n, dt, op, c);
	case R_RSB:
		return req ? shmcoll_ireduce_scatter(s, r, n, dt, op, c, req)
		           : shmcoll_reduce_scatter(s, r, n, dt, op, c);
	default:
		return req ? shmcoll_ireduce_scatterv(s, r, counts, dt, op, c, req)
		           : shmcoll_reduce_scatterv(s, r, counts, dt, op, c);
	}
}

/* finish of an in-place reduce-scatter on the library: this rank's result sits at its
 * slice of the packed input (k->off bytes into k->out); it goes to the start of the
 * receive. */
static int finish_rs_inplace(struct call *k)
{
	py__unpack(k->type, k->out + k->off, k->count, k->r.addr);
	return 0;
}

/* Reads the messages of a reduction into k: its send (or IN_PLACE) and receive, as mpi4py
 * reads them for each kind, with rcounts for Reduce_scatter. *n gets the elements this
 * rank contributes (all of them: a reduce-scatter's send). */
static int red_msgs(CommObject *self, enum red_kind kind, PyObject *so, PyObject *ro, PyObject *rco,
                    int root, struct call *k, Py_ssize_t **rcounts, const char *what)
{
	int P = self->size, me = self->rank, is_root = kind != R_REDUCE || root == me;
	Py_ssize_t i, total;

	if (kind == R_REDUCE && !is_root) {
		py__msg_ignore(&k->r);
		if (py__msg_simple(so, 1, 0, &k->s) < 0)
			return -1;
		return fits(&k->s, k->s.count, what);
	}
	if (kind == R_RSB) {
		if (py__is_in_place(so)) {
			if (py__msg_simple(ro, 0, P, &k->r) < 0)
				return -1;
			py__msg_in_place(&k->s);
			return fits(&k->r, k->r.count * P, what);
		}
		if (py__msg_simple(ro, 0, 0, &k->r) < 0 || py__msg_simple(so, 1, P, &k->s) < 0)
			return -1;
		if (k->s.type != k->r.type) {
			PyErr_SetString(PyExc_ValueError,
			                "mismatch in send and receive MPI datatypes");
			return -1;
		}
		if (k->s.count != k->r.count) {
			PyErr_Format(PyExc_ValueError,
			             "mismatch in send count %zd receive count %zd", k->s.count,
			             k->r.count * P);
			return -1;
		}
		return fits(&k->r, k->r.count, what) < 0 || fits(&k->s, k->s.count * P, what) < 0
		           ? -1
		           : 0;
	}
	if (py__msg_simple(ro, 0, 0, &k->r) < 0)
		return -1;
	if (py__is_in_place(so))
		py__msg_in_place(&k->s);
	else if (py__msg_simple(so, 1, 0, &k->s) < 0)
		return -1;
	if (kind == R_RS) {
		if (rco == Py_None && k->s.inplace) {
			PyErr_SetString(PyExc_TypeError,
			                "Reduce_scatter: IN_PLACE needs recvcounts");
			return -1;
		}
		*rcounts = PyMem_Malloc(sizeof(**rcounts) * (size_t)P);
		if (!*rcounts) {
			PyErr_NoMemory();
			return -1;
		}
		if (rco == Py_None) {
			/* mpi4py's default: every rank's receive count, gathered (a collective). */
			int64_t mine = (int64_t)k->r.count,
			        *all = PyMem_Malloc(sizeof(*all) * (size_t)P);
			int rc;

			if (!all) {
				PyErr_NoMemory();
				return -1;
			}
			NOGIL(rc = shmcoll_allgather(&mine, all, 1, SHMCOLL_INT64, py__live(self)));
			if (rc) {
				PyMem_Free(all);
				py__raise_rc(self->c, rc);
				return -1;
			}
			for (i = 0; i < P; i++)
				(*rcounts)[i] = (Py_ssize_t)all[i];
			PyMem_Free(all);
		} else {
			PyObject *seq = PySequence_Fast(rco, "Reduce_scatter: recvcounts must be a "
			                                     "sequence of integers");

			if (!seq)
				return -1;
			if (PySequence_Fast_GET_SIZE(seq) != P) {
				PyErr_Format(PyExc_ValueError, "expecting %d items, got %zd", P,
				             PySequence_Fast_GET_SIZE(seq));
				Py_DECREF(seq);
				return -1;
			}
			for (i = 0; i < P; i++) {
				(*rcounts)[i] = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i),
				                                   PyExc_OverflowError);
				if ((*rcounts)[i] < 0) {
					Py_DECREF(seq);
					if (!PyErr_Occurred())
						PyErr_Format(PyExc_ValueError,
						             "Reduce_scatter: negative count");
					return -1;
				}
			}
			Py_DECREF(seq);
		}
		for (i = 0, total = 0; i < P; i++)
			total += (*rcounts)[i];
		if (!k->s.inplace) {
			if (k->s.type != k->r.type) {
				PyErr_SetString(PyExc_ValueError,
				                "mismatch in send and receive MPI datatypes");
				return -1;
			}
			if (k->s.count != total) {
				PyErr_Format(PyExc_ValueError,
				             "mismatch in send count %zd and sum(counts) %zd",
				             k->s.count, total);
				return -1;
			}
			if (k->r.count != (*rcounts)[me]) {
				PyErr_Format(PyExc_ValueError,
				             "mismatch in receive count %zd and counts[%d] %zd",
				             k->r.count, me, (*rcounts)[me]);
				return -1;
			}
			return fits(&k->s, total, what) < 0 || fits(&k->r, (*rcounts)[me], what) < 0
			           ? -1
			           : 0;
		}
		if (k->r.count != total) {
			PyErr_Format(PyExc_ValueError,
			             "mismatch in receive count %zd and sum(counts) %zd",
			             k->r.count, total);
			return -1;
		}
		return fits(&k->r, total, what);
	}
	/* Reduce's root: mpi4py 4 checks its two messages as Allreduce's; mpi4py 3 does not
	 * (MPI calls a mismatch erroneous; the send's count and datatype are used). */
	if (!k->s.inplace && (kind != R_REDUCE || py__mpi4py_api >= 4) && same(&k->s, &k->r) < 0)
		return -1;
	return fits(&k->r, k->r.count, what) < 0 ||
	               (!k->s.inplace && fits(&k->s, k->s.count, what) < 0)
	           ? -1
	           : 0;
}

static PyObject *reduction(CommObject *self, PyObject *args, PyObject *kw, enum red_kind kind,
                           const char *fmt, const char *what, int nb)
{
	static char *kw_root[] = {"sendbuf", "recvbuf", "op", "root", NULL};
	static char *kw_plain[] = {"sendbuf", "recvbuf", "op", NULL};
	static char *kw_rs[] = {"sendbuf", "recvbuf", "recvcounts", "op", NULL};
	shmcoll_comm *c = py__live(self);
	shmcoll_request *req = NULL;
	PyObject *so, *ro, *opo = (PyObject *)py__op[OP_SUM], *rco = Py_None, *res = NULL;
	int root = 0, rc, P = self->size, me = self->rank, is_root, native;
	Py_ssize_t n, nbytes, *rcounts = NULL, i, before = 0;
	size_t *bcounts, *bdispls, *rbcounts, *rbdispls; /* the reduce-scatters' byte layouts */
	shmcoll_dtype cdt = SHMCOLL_UINT8;
	shmcoll_op cop = SHMCOLL_SUM;
	Py_ssize_t mult = 1;
	DatatypeObject *t;
	struct call *k, kk;
	const char *sp;
	char *rp, *scratch;

	if (!c)
		return NULL;
	if (kind == R_RS) {
		if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kw_rs, &so, &ro, &rco, &opo))
			return NULL;
	} else if (!PyArg_ParseTupleAndKeywords(args, kw, fmt,
	                                        kind == R_REDUCE ? kw_root : kw_plain, &so, &ro,
	                                        &opo, &root)) {
		return NULL;
	}
	if ((kind == R_REDUCE && root_ok(self, root, what) < 0) ||
	    !(k = nb ? py__call_new() : py__call_init(&kk)))
		return NULL;
	is_root = kind != R_REDUCE || root == me;
	k->rank = me;
	k->size = P;
	k->root = root;
	if (red_msgs(self, kind, so, ro, rco, root, k, &rcounts, what) < 0 ||
	    (kind == R_RS && py__call_arrays(k, P) < 0))
		goto out;
	bcounts = k->arrays[0];
	bdispls = k->arrays[1];
	rbcounts = k->arrays[2];
	rbdispls = k->arrays[3];
	/* The datatype and count every rank reduces: the send's, or the receive's in place. */
	t = k->s.inplace ? k->r.type : k->s.type;
	n = k->s.inplace ? k->r.count : k->s.count; /* elements this rank contributes */
	if (kind == R_RSB)
		n = k->r.count * P; /* size blocks of the receive's count */
	if (parse_op(opo, t, k, what) < 0)
		goto out;
	Py_INCREF(t);
	k->type = t;
	native = py__op_native(k->op, t, &cdt, &cop, &mult);
	nbytes = n * t->size;
	if (kind == R_RS)
		for (i = 0; i < me; i++)
			before += rcounts[i];

	if (native) {
		/* The library reduces: packed copies where a datatype is not contiguous. */
		Py_ssize_t out_n = kind == R_RSB ? k->r.count : kind == R_RS ? rcounts[me] : n;

		Py_ssize_t need = 0;

		if (k->s.inplace && (kind == R_RSB || kind == R_RS))
			need = nbytes; /* the input, packed: the library's in-place form */
		else if (!t->contig)
			need = nbytes + out_n * t->size;
		if (!(scratch = py__call_scratch(k, need)))
			goto out;
		if (k->s.inplace) {
			/* The input is in the receive buffer. */
			if (kind == R_REDUCE || kind == R_ALLREDUCE || kind == R_SCAN ||
			    kind == R_EXSCAN) {
				if (t->contig) {
					sp = rp = at(&k->r, 0);
				} else {
					py__pack(t, at(&k->r, 0), n, scratch);
					sp = rp = scratch;
					k->out = scratch;
					k->count = n;
					k->finish = finish_unpack;
				}
			} else {
				/* Reduce-scatter in place: the library's in-place form puts this
				 * rank's result at its slice of the input, which then moves to the
				 * start. */
				Py_ssize_t slice =
				    kind == R_RSB ? (Py_ssize_t)me * k->r.count : before;

				py__pack(t, at(&k->r, 0), n, scratch);
				sp = scratch;
				rp = scratch + slice * t->size;
				k->out = scratch;
				k->off = slice * t->size;
				k->count = kind == R_RSB ? k->r.count : rcounts[me];
				k->finish = finish_rs_inplace;
			}
		} else {
			sp = src(&k->s, 0, n, scratch);
			if (kind == R_REDUCE && !is_root)
				rp = NULL;
			else
				rp = dst(k, out_n, scratch + nbytes);
		}
		if (kind == R_RS) {
			for (i = 0; i < P; i++)
				bcounts[i] = (size_t)(rcounts[i] * mult);
		}
		NOGIL(rc = run_native(kind, sp, rp,
		                      (size_t)((kind == R_RSB ? k->r.count : n) * mult), cdt, cop,
		                      root, bcounts, c, nb ? &req : NULL));
	} else {
		/* Folded here: every contribution gathered, packed, then folded in rank order
		 * when the call completes. */
		Py_ssize_t blk;

		switch (kind) {
		case R_RSB:
		case R_RS: {
			/* Each rank's slice for every rank: an alltoall(v) of the packed input. */
			Py_ssize_t mine = kind == R_RSB ? k->r.count : rcounts[me];

			blk = mine * t->size;
			if (!(scratch = py__call_scratch(k, nbytes + blk * P)))
				goto out;
			py__pack(t, k->s.inplace ? at(&k->r, 0) : at(&k->s, 0), n, scratch);
			k->out = scratch + nbytes;
			k->count = mine;
			k->finish = finish_fold_all;
			if (kind == R_RSB) {
				NOGIL(rc = nb ? shmcoll_ialltoall(scratch, k->out, (size_t)blk,
				                                  SHMCOLL_UINT8, c, &req)
				              : shmcoll_alltoall(scratch, k->out, (size_t)blk,
				                                 SHMCOLL_UINT8, c));
				break;
			}
			for (i = 0, before = 0; i < P; i++) {
				bcounts[i] = (size_t)(rcounts[i] * t->size);
				bdispls[i] = (size_t)before;
				before += (Py_ssize_t)bcounts[i];
				rbcounts[i] = (size_t)blk;
				rbdispls[i] = (size_t)(i * blk);
			}
			NOGIL(rc = nb ? shmcoll_ialltoallv(scratch, bcounts, bdispls, k->out,
			                                   rbcounts, rbdispls, SHMCOLL_UINT8, c,
			                                   &req)
			              : shmcoll_alltoallv(scratch, bcounts, bdispls, k->out,
			                                  rbcounts, rbdispls, SHMCOLL_UINT8, c));
			break;
		}
		default:
			blk = nbytes;
			if (!(scratch = py__call_scratch(k, blk * P)))
				goto out;
			k->out = scratch;
			k->count = n;
			/* This rank's own block packed in place: the library's in-place forms. */
			py__pack(t, k->s.inplace ? at(&k->r, 0) : at(&k->s, 0), n,
			         scratch + (Py_ssize_t)me * blk);
			if (kind == R_REDUCE) {
				k->finish = finish_fold_root;
				if (is_root)
					NOGIL(
					    rc = nb ? shmcoll_igather(
					                  scratch + (Py_ssize_t)me * blk, scratch,
					                  (size_t)blk, SHMCOLL_UINT8, root, c, &req)
					            : shmcoll_gather(scratch + (Py_ssize_t)me * blk,
					                             scratch, (size_t)blk,
					                             SHMCOLL_UINT8, root, c));
				else
					NOGIL(
					    rc = nb ? shmcoll_igather(
					                  scratch + (Py_ssize_t)me * blk, NULL,
					                  (size_t)blk, SHMCOLL_UINT8, root, c, &req)
					            : shmcoll_gather(scratch + (Py_ssize_t)me * blk,
					                             NULL, (size_t)blk,
					                             SHMCOLL_UINT8, root, c));
				break;
			}
			k->finish = kind == R_SCAN     ? finish_fold_scan
			            : kind == R_EXSCAN ? finish_fold_exscan
			                               : finish_fold_all;
			NOGIL(rc = nb ? shmcoll_iallgather(scratch + (Py_ssize_t)me * blk, scratch,
			                                   (size_t)blk, SHMCOLL_UINT8, c, &req)
			              : shmcoll_allgather(scratch + (Py_ssize_t)me * blk, scratch,
			                                  (size_t)blk, SHMCOLL_UINT8, c));
			break;
		}
	}
	res = py__called(self, rc, req, nb, k);
	k = NULL;
out:
	if (k)
		py__call_free(k);
	PyMem_Free(rcounts);
	return res;
}

static PyObject *comm_Allreduce(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_ALLREDUCE, "OO|O:Allreduce", "Allreduce", 0);
}

static PyObject *comm_Iallreduce(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_ALLREDUCE, "OO|O:Iallreduce", "Iallreduce", 1);
}

static PyObject *comm_Reduce(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_REDUCE, "OO|Oi:Reduce", "Reduce", 0);
}

static PyObject *comm_Ireduce(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_REDUCE, "OO|Oi:Ireduce", "Ireduce", 1);
}

static PyObject *comm_Scan(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_SCAN, "OO|O:Scan", "Scan", 0);
}

static PyObject *comm_Iscan(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_SCAN, "OO|O:Iscan", "Iscan", 1);
}

static PyObject *comm_Exscan(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_EXSCAN, "OO|O:Exscan", "Exscan", 0);
}

static PyObject *comm_Iexscan(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_EXSCAN, "OO|O:Iexscan", "Iexscan", 1);
}

static PyObject *comm_Reduce_scatter_block(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_RSB, "OO|O:Reduce_scatter_block", "Reduce_scatter_block",
	                 0);
}

static PyObject *comm_Ireduce_scatter_block(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_RSB, "OO|O:Ireduce_scatter_block",
	                 "Ireduce_scatter_block", 1);
}

static PyObject *comm_Reduce_scatter(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_RS, "OO|OO:Reduce_scatter", "Reduce_scatter", 0);
}

static PyObject *comm_Ireduce_scatter(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_RS, "OO|OO:Ireduce_scatter", "Ireduce_scatter", 1);
}

/* ---- the benchmark's loop ---- */

static int allreduce_loop(shmcoll_comm *c, const void *s, void *r, size_t n, shmcoll_dtype dt,
                          Py_ssize_t iters, double *secs)
{
	struct timespec t0, t1;
	Py_ssize_t i;
	int rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < iters && !rc; i++)
		rc = shmcoll_allreduce(s, r, n, dt, SHMCOLL_SUM, c);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	return rc;
}

/* _allreduce_loop(sendbuf, recvbuf, iters) -> seconds: iters back-to-back Allreduce(SUM)
 * calls made from C on this communicator, the buffers resolved once and the GIL released
 * once: the C side of bench/python/overhead.py, which times the same calls made one by one
 * from Python against it. Buffers of one of the library's element types, contiguous. */
static PyObject *comm_allreduce_loop(CommObject *self, PyObject *args)
{
	shmcoll_comm *c = py__live(self);
	struct msg s, r;
	PyObject *so, *ro, *res = NULL;
	Py_ssize_t iters;
	double secs = 0;
	int rc, cdt;

	if (!c || !PyArg_ParseTuple(args, "OOn:_allreduce_loop", &so, &ro, &iters))
		return NULL;
	if (py__msg_simple(so, 1, 0, &s) < 0)
		return NULL;
	if (py__msg_simple(ro, 0, 0, &r) < 0) {
		py__msg_release(&s);
		return NULL;
	}
	cdt = py__basic_cdt(s.type->basic);
	if (s.type != r.type || s.count > r.count || !s.type->contig || cdt < 0 ||
	    s.type->nbasic != 1) {
		PyErr_SetString(PyExc_TypeError,
		                "_allreduce_loop: two contiguous buffers of one of the library's "
		                "element types");
		goto out;
	}
	NOGIL(rc = allreduce_loop(c, s.addr, r.addr, (size_t)s.count, (shmcoll_dtype)cdt, iters,
	                          &secs));
	if (rc)
		py__raise_rc(c, rc);
	else
		res = PyFloat_FromDouble(secs);
out:
	py__msg_release(&s);
	py__msg_release(&r);
	return res;
}

PyMethodDef py__coll_methods[] = {
    {"Barrier", (PyCFunction)py__comm_barrier, METH_NOARGS, "Waits for every rank."},
    {"Ibarrier", (PyCFunction)comm_ibarrier, METH_NOARGS, "Ibarrier() -> Request"},
    {"Bcast", KW(comm_bcast), METH_VARARGS | METH_KEYWORDS, "Bcast(buf, root=0)"},
    {"Ibcast", KW(comm_ibcast), METH_VARARGS | METH_KEYWORDS, "Ibcast(buf, root=0) -> Request"},
    {"Gather", KW(comm_gather), METH_VARARGS | METH_KEYWORDS, "Gather(sendbuf, recvbuf, root=0)"},
    {"Igather", KW(comm_igather), METH_VARARGS | METH_KEYWORDS,
     "Igather(sendbuf, recvbuf, root=0) -> Request"},
    {"Gatherv", KW(comm_gatherv), METH_VARARGS | METH_KEYWORDS,
     "Gatherv(sendbuf, recvbuf, root=0)"},
    {"Igatherv", KW(comm_igatherv), METH_VARARGS | METH_KEYWORDS,
     "Igatherv(sendbuf, recvbuf, root=0) -> Request"},
    {"Scatter", KW(comm_scatter), METH_VARARGS | METH_KEYWORDS,
     "Scatter(sendbuf, recvbuf, root=0)"},
    {"Iscatter", KW(comm_iscatter), METH_VARARGS | METH_KEYWORDS,
     "Iscatter(sendbuf, recvbuf, root=0) -> Request"},
    {"Scatterv", KW(comm_scatterv), METH_VARARGS | METH_KEYWORDS,
     "Scatterv(sendbuf, recvbuf, root=0)"},
    {"Iscatterv", KW(comm_iscatterv), METH_VARARGS | METH_KEYWORDS,
     "Iscatterv(sendbuf, recvbuf, root=0) -> Request"},
    {"Allgather", KW(comm_allgather), METH_VARARGS | METH_KEYWORDS, "Allgather(sendbuf, recvbuf)"},
    {"Iallgather", KW(comm_iallgather), METH_VARARGS | METH_KEYWORDS,
     "Iallgather(sendbuf, recvbuf) -> Request"},
    {"Allgatherv", KW(comm_allgatherv), METH_VARARGS | METH_KEYWORDS,
     "Allgatherv(sendbuf, recvbuf)"},
    {"Iallgatherv", KW(comm_iallgatherv), METH_VARARGS | METH_KEYWORDS,
     "Iallgatherv(sendbuf, recvbuf) -> Request"},
    {"Alltoall", KW(comm_alltoall), METH_VARARGS | METH_KEYWORDS, "Alltoall(sendbuf, recvbuf)"},
    {"Ialltoall", KW(comm_ialltoall), METH_VARARGS | METH_KEYWORDS,
     "Ialltoall(sendbuf, recvbuf) -> Request"},
    {"Alltoallv", KW(comm_alltoallv), METH_VARARGS | METH_KEYWORDS, "Alltoallv(sendbuf, recvbuf)"},
    {"Ialltoallv", KW(comm_ialltoallv), METH_VARARGS | METH_KEYWORDS,
     "Ialltoallv(sendbuf, recvbuf) -> Request"},
    {"Alltoallw", KW(comm_alltoallw), METH_VARARGS | METH_KEYWORDS,
     "Alltoallw(sendbuf, recvbuf): a datatype per block, displacements in bytes"},
    {"Ialltoallw", KW(comm_ialltoallw), METH_VARARGS | METH_KEYWORDS,
     "Ialltoallw(sendbuf, recvbuf) -> Request"},
    {"Reduce", KW(comm_Reduce), METH_VARARGS | METH_KEYWORDS,
     "Reduce(sendbuf, recvbuf, op=SUM, root=0)"},
    {"Ireduce", KW(comm_Ireduce), METH_VARARGS | METH_KEYWORDS,
     "Ireduce(sendbuf, recvbuf, op=SUM, root=0) -> Request"},
    {"Allreduce", KW(comm_Allreduce), METH_VARARGS | METH_KEYWORDS,
     "Allreduce(sendbuf, recvbuf, op=SUM)"},
    {"Iallreduce", KW(comm_Iallreduce), METH_VARARGS | METH_KEYWORDS,
     "Iallreduce(sendbuf, recvbuf, op=SUM) -> Request"},
    {"Scan", KW(comm_Scan), METH_VARARGS | METH_KEYWORDS, "Scan(sendbuf, recvbuf, op=SUM)"},
    {"Iscan", KW(comm_Iscan), METH_VARARGS | METH_KEYWORDS,
     "Iscan(sendbuf, recvbuf, op=SUM) -> Request"},
    {"Exscan", KW(comm_Exscan), METH_VARARGS | METH_KEYWORDS, "Exscan(sendbuf, recvbuf, op=SUM)"},
    {"Iexscan", KW(comm_Iexscan), METH_VARARGS | METH_KEYWORDS,
     "Iexscan(sendbuf, recvbuf, op=SUM) -> Request"},
    {"Reduce_scatter_block", KW(comm_Reduce_scatter_block), METH_VARARGS | METH_KEYWORDS,
     "Reduce_scatter_block(sendbuf, recvbuf, op=SUM)"},
    {"Ireduce_scatter_block", KW(comm_Ireduce_scatter_block), METH_VARARGS | METH_KEYWORDS,
     "Ireduce_scatter_block(sendbuf, recvbuf, op=SUM) -> Request"},
    {"Reduce_scatter", KW(comm_Reduce_scatter), METH_VARARGS | METH_KEYWORDS,
     "Reduce_scatter(sendbuf, recvbuf, recvcounts=None, op=SUM)"},
    {"Ireduce_scatter", KW(comm_Ireduce_scatter), METH_VARARGS | METH_KEYWORDS,
     "Ireduce_scatter(sendbuf, recvbuf, recvcounts=None, op=SUM) -> Request"},
    {"_allreduce_loop", (PyCFunction)comm_allreduce_loop, METH_VARARGS,
     "_allreduce_loop(sendbuf, recvbuf, iters) -> seconds: the same calls made from C"},
    {NULL, NULL, 0, NULL},
};
