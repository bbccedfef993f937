/* coll.c - the collectives of the communicator: Barrier, Bcast, the reductions (Allreduce,
 * Reduce, Scan, Exscan, Reduce_scatter_block), the moves (Allgather, Gather, Scatter, Alltoall),
 * the variable-count calls (_vcall, under python/shmcoll/_comm.py's buffer specs), and their
 * non-blocking starts. */
#include "shmcoll_py.h"

#include <string.h>
#include <time.h>

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
	int rc;

	if (!c)
		return NULL;
	rc = shmcoll_ibarrier(c, &req);
	return py__called((PyObject *)self, c, rc, req, 1, NULL, NULL, 0);
}

/* The reductions with one count: allreduce, reduce, scan, exscan. */
enum red_kind { R_ALLREDUCE, R_REDUCE, R_SCAN, R_EXSCAN };

/* The blocking call (req NULL) or its start. */
static int run_reduction(enum red_kind k, const void *s, void *r, size_t n, shmcoll_dtype dt,
                         shmcoll_op op, int root, shmcoll_comm *c, shmcoll_request **req)
{
	switch (k) {
	case R_ALLREDUCE:
		return req ? shmcoll_iallreduce(s, r, n, dt, op, c, req)
		           : shmcoll_allreduce(s, r, n, dt, op, c);
	case R_REDUCE:
		return req ? shmcoll_ireduce(s, r, n, dt, op, root, c, req)
		           : shmcoll_reduce(s, r, n, dt, op, root, c);
	case R_SCAN:
		return req ? shmcoll_iscan(s, r, n, dt, op, c, req)
		           : shmcoll_scan(s, r, n, dt, op, c);
	default:
		return req ? shmcoll_iexscan(s, r, n, dt, op, c, req)
		           : shmcoll_exscan(s, r, n, dt, op, c);
	}
}

static PyObject *reduction(CommObject *self, PyObject *args, PyObject *kw, enum red_kind k,
                           const char *fmt, const char *what, int nb)
{
	shmcoll_request *req = NULL;
	static char *kwlist[] = {"sendbuf", "recvbuf", "op", "root", NULL};
	static char *kwlist_rootless[] = {"sendbuf", "recvbuf", "op", NULL};
	PyObject *so, *ro, *opo = py__ops[SHMCOLL_SUM];
	shmcoll_comm *c = py__live(self);
	struct buf s, r;
	shmcoll_op op;
	int root = 0, rc, is_root;
	const void *sp;

	if (!c ||
	    !PyArg_ParseTupleAndKeywords(args, kw, fmt, k == R_REDUCE ? kwlist : kwlist_rootless,
	                                 &so, &ro, &opo, &root))
		return NULL;
	if (k == R_REDUCE && (root < 0 || root >= self->size))
		return PyErr_Format(PyExc_ValueError, "%s: root %d out of range 0..%d", what, root,
		                    self->size - 1);
	is_root = k != R_REDUCE || root == self->rank;
	if (py__get_buf(so, &s, 0, is_root, 0, what) < 0)
		return NULL;
	if (py__get_buf(ro, &r, 1, 0, !is_root, what) < 0) {
		py__buf_release(&s);
		return NULL;
	}
	if (s.inplace) {
		/* The receive buffer holds this rank's contribution. */
		s.dt = r.dt;
		s.es = r.es;
		s.count = r.count;
	}
	if (py__agree(&s, &r, 1, what) < 0 || py__get_op(opo, s.dt, &op, what) < 0 ||
	    (!r.none && py__need(&r, s.count, what, "receive") < 0))
		goto fail;
	sp = s.inplace ? r.ptr : s.ptr;
	NOGIL(rc = run_reduction(k, sp, r.ptr, s.count, py__cdt(s.dt), op, root, c,
	                         nb ? &req : NULL));
	return py__called((PyObject *)self, c, rc, req, nb, &s, &r, 0);
fail:
	py__buf_release(&s);
	py__buf_release(&r);
	return NULL;
}

static PyObject *comm_allreduce(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_ALLREDUCE, "OO|O:Allreduce", "Allreduce", 0);
}

static PyObject *comm_iallreduce(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_ALLREDUCE, "OO|O:Iallreduce", "Iallreduce", 1);
}

static PyObject *comm_reduce(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_REDUCE, "OO|Oi:Reduce", "Reduce", 0);
}

static PyObject *comm_ireduce(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_REDUCE, "OO|Oi:Ireduce", "Ireduce", 1);
}

static PyObject *comm_scan(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_SCAN, "OO|O:Scan", "Scan", 0);
}

static PyObject *comm_iscan(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_SCAN, "OO|O:Iscan", "Iscan", 1);
}

static PyObject *comm_exscan(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_EXSCAN, "OO|O:Exscan", "Exscan", 0);
}

static PyObject *comm_iexscan(CommObject *self, PyObject *args, PyObject *kw)
{
	return reduction(self, args, kw, R_EXSCAN, "OO|O:Iexscan", "Iexscan", 1);
}

static PyObject *bcast(CommObject *self, PyObject *args, PyObject *kw, int nb)
{
	static char *kwlist[] = {"buf", "root", NULL};
	const char *what = nb ? "Ibcast" : "Bcast";
	shmcoll_comm *c = py__live(self);
	shmcoll_request *req = NULL;
	PyObject *bo;
	struct buf b;
	int root = 0, rc;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, nb ? "O|i:Ibcast" : "O|i:Bcast", kwlist,
	                                       &bo, &root))
		return NULL;
	if (root < 0 || root >= self->size)
		return PyErr_Format(PyExc_ValueError, "%s: root %d out of range 0..%d", what, root,
		                    self->size - 1);
	if (py__get_buf(bo, &b, root != self->rank, 0, 0, what) < 0)
		return NULL;
	if (nb)
		NOGIL(rc = shmcoll_ibcast(b.ptr, b.count, py__cdt(b.dt), root, c, &req));
	else
		NOGIL(rc = shmcoll_bcast(b.ptr, b.count, py__cdt(b.dt), root, c));
	return py__called((PyObject *)self, c, rc, req, nb, &b, NULL, 0);
}

static PyObject *comm_bcast(CommObject *self, PyObject *args, PyObject *kw)
{
	return bcast(self, args, kw, 0);
}

static PyObject *comm_ibcast(CommObject *self, PyObject *args, PyObject *kw)
{
	return bcast(self, args, kw, 1);
}

/* The moves whose receive buffer holds size blocks of the send count: allgather, gather,
 * alltoall; and scatter, whose send buffer holds size blocks of the receive count. */
enum move_kind { M_ALLGATHER, M_GATHER, M_ALLTOALL, M_SCATTER };

static int run_move(enum move_kind k, const void *s, void *r, size_t n, shmcoll_dtype dt, int root,
                    shmcoll_comm *c, shmcoll_request **req)
{
	switch (k) {
	case M_ALLGATHER:
		return req ? shmcoll_iallgather(s, r, n, dt, c, req)
		           : shmcoll_allgather(s, r, n, dt, c);
	case M_GATHER:
		return req ? shmcoll_igather(s, r, n, dt, root, c, req)
		           : shmcoll_gather(s, r, n, dt, root, c);
	case M_SCATTER:
		return req ? shmcoll_iscatter(s, r, n, dt, root, c, req)
		           : shmcoll_scatter(s, r, n, dt, root, c);
	default:
		return req ? shmcoll_ialltoall(s, r, n, dt, c, req)
		           : shmcoll_alltoall(s, r, n, dt, c);
	}
}

static PyObject *move(CommObject *self, PyObject *args, PyObject *kw, enum move_kind k,
                      const char *fmt, const char *what, int nb)
{
	shmcoll_request *req = NULL;
	static char *kwlist[] = {"sendbuf", "recvbuf", "root", NULL};
	static char *kwlist_rootless[] = {"sendbuf", "recvbuf", NULL};
	shmcoll_comm *c = py__live(self);
	PyObject *so, *ro;
	struct buf s, r;
	int root = 0, rc, rooted = k == M_GATHER || k == M_SCATTER, is_root;
	size_t n, P = (size_t)self->size;
	const void *sp;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, fmt, rooted ? kwlist : kwlist_rootless,
	                                       &so, &ro, &root))
		return NULL;
	if (rooted && (root < 0 || root >= self->size))
		return PyErr_Format(PyExc_ValueError, "%s: root %d out of range 0..%d", what, root,
		                    self->size - 1);
	is_root = !rooted || root == self->rank;
	/* Gather: only the root receives; scatter: only the root sends. */
	if (py__get_buf(so, &s, 0, is_root && k != M_ALLTOALL, k == M_SCATTER && !is_root, what) <
	    0)
		return NULL;
	if (py__get_buf(ro, &r, 1, k == M_SCATTER && is_root, k == M_GATHER && !is_root, what) <
	    0) {
		py__buf_release(&s);
		return NULL;
	}
	if (k == M_SCATTER) {
		if (r.inplace) { /* the root keeps its block where it is */
			r.dt = s.dt;
			r.es = s.es;
			r.count = s.count / P;
		}
		if (!s.none && py__agree(&r, &s, 0, what) < 0)
			goto fail;
		n = r.count;
		if (!s.none && py__need(&s, n * P, what, "send") < 0)
			goto fail;
		if (r.inplace)
			r.ptr = s.ptr + (size_t)root * n * s.es;
		NOGIL(rc = run_move(k, s.ptr, r.ptr, n, py__cdt(r.dt), root, c, nb ? &req : NULL));
		goto done;
	}
	if (s.inplace) { /* this rank's block is in place in recvbuf */
		s.dt = r.dt;
		s.es = r.es;
		s.count = r.count / P;
	}
	if (py__agree(&s, &r, 0, what) < 0)
		goto fail;
	n = s.count;
	if (k == M_ALLTOALL) {
		if (n % P) {
			PyErr_Format(
			    PyExc_ValueError,
			    "Alltoall: the send buffer's %zu elements are not %zu equal blocks", n,
			    P);
			goto fail;
		}
		n /= P;
	}
	if (!r.none && py__need(&r, n * P, what, "receive") < 0)
		goto fail;
	sp = s.inplace ? r.ptr + (size_t)self->rank * n * r.es : s.ptr;
	NOGIL(rc = run_move(k, sp, r.ptr, n, py__cdt(s.dt), root, c, nb ? &req : NULL));
done:
	return py__called((PyObject *)self, c, rc, req, nb, &s, &r, 0);
fail:
	py__buf_release(&s);
	py__buf_release(&r);
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

static PyObject *comm_reduce_scatter_block(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"sendbuf", "recvbuf", "op", NULL};
	const char *what = "Reduce_scatter_block";
	PyObject *so, *ro, *opo = py__ops[SHMCOLL_SUM];
	shmcoll_comm *c = py__live(self);
	struct buf s, r;
	shmcoll_op op;
	size_t n;
	int rc;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, "OO|O:Reduce_scatter_block", kwlist, &so,
	                                       &ro, &opo))
		return NULL;
	if (py__get_buf(so, &s, 0, 0, 0, what) < 0)
		return NULL;
	if (py__get_buf(ro, &r, 1, 0, 0, what) < 0) {
		py__buf_release(&s);
		return NULL;
	}
	if (py__agree(&s, &r, 1, what) < 0 || py__get_op(opo, s.dt, &op, what) < 0)
		goto fail;
	n = r.count;
	if (py__need(&s, n * (size_t)self->size, what, "send") < 0)
		goto fail;
	NOGIL(rc = shmcoll_reduce_scatter(s.ptr, r.ptr, n, py__cdt(s.dt), op, c));
	py__buf_release(&s);
	py__buf_release(&r);
	if (rc)
		return py__raise_rc(c, rc);
	Py_RETURN_NONE;
fail:
	py__buf_release(&s);
	py__buf_release(&r);
	return NULL;
}

static int allreduce_loop(shmcoll_comm *c, const struct buf *s, Py_ssize_t iters, struct buf *r,
                          double *secs)
{
	struct timespec t0, t1;
	Py_ssize_t i;
	int rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < iters && !rc; i++)
		rc = shmcoll_allreduce(s->ptr, r->ptr, s->count, py__cdt(s->dt), SHMCOLL_SUM, c);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	return rc;
}

/* _allreduce_loop(sendbuf, recvbuf, iters) -> seconds: iters back-to-back Allreduce(SUM)
 * calls made from C on this communicator, the buffers resolved once and the GIL released
 * once: the C side of bench/python/overhead.py, which times the same calls made one by one
 * from Python against it. */
static PyObject *comm_allreduce_loop(CommObject *self, PyObject *args)
{
	shmcoll_comm *c = py__live(self);
	PyObject *so, *ro;
	struct buf s, r;
	Py_ssize_t iters;
	double secs = 0;
	int rc;

	if (!c || !PyArg_ParseTuple(args, "OOn:_allreduce_loop", &so, &ro, &iters))
		return NULL;
	if (py__get_buf(so, &s, 0, 0, 0, "_allreduce_loop") < 0)
		return NULL;
	if (py__get_buf(ro, &r, 1, 0, 0, "_allreduce_loop") < 0) {
		py__buf_release(&s);
		return NULL;
	}
	if (py__agree(&s, &r, 1, "_allreduce_loop") < 0 ||
	    py__need(&r, s.count, "_allreduce_loop", "receive") < 0) {
		py__buf_release(&s);
		py__buf_release(&r);
		return NULL;
	}
	NOGIL(rc = allreduce_loop(c, &s, iters, &r, &secs));
	py__buf_release(&s);
	py__buf_release(&r);
	if (rc)
		return py__raise_rc(c, rc);
	return PyFloat_FromDouble(secs);
}

/* ---- variable counts ---- */

/* counts or displacements: None, or a sequence of size non-negative ints, into *out
 * (PyMem, the caller frees). 0, or -1 with an exception set. */
static int size_array(PyObject *obj, Py_ssize_t size, size_t **out, const char *what,
                      const char *name)
{
	PyObject *seq;
	Py_ssize_t i;
	size_t *a;

	*out = NULL;
	if (obj == Py_None)
		return 0;
	seq = PySequence_Fast(obj, "counts and displacements must be sequences of ints");
	if (!seq)
		return -1;
	if (PySequence_Fast_GET_SIZE(seq) != size) {
		PyErr_Format(PyExc_ValueError, "%s: %s has %zd entries, not one per rank (%zd)",
		             what, name, PySequence_Fast_GET_SIZE(seq), size);
		Py_DECREF(seq);
		return -1;
	}
	a = PyMem_Malloc(sizeof(*a) * (size_t)(size ? size : 1));
	if (!a) {
		Py_DECREF(seq);
		PyErr_NoMemory();
		return -1;
	}
	for (i = 0; i < size; i++) {
		Py_ssize_t v =
		    PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i), PyExc_OverflowError);

		if (v < 0) {
			if (!PyErr_Occurred())
				PyErr_Format(PyExc_ValueError, "%s: %s[%zd] is negative", what,
				             name, i);
			PyMem_Free(a);
			Py_DECREF(seq);
			return -1;
		}
		a[i] = (size_t)v;
	}
	Py_DECREF(seq);
	*out = a;
	return 0;
}

/* Every block (counts[p] elements at displs[p]) inside b: the library writes and reads them
 * without knowing the buffer's length. */
static int blocks_fit(const struct buf *b, const size_t *counts, const size_t *displs,
                      Py_ssize_t size, const char *what, const char *which)
{
	Py_ssize_t p;

	for (p = 0; p < size; p++)
		if (counts[p] && (displs[p] > b->count || counts[p] > b->count - displs[p])) {
			PyErr_Format(
			    PyExc_ValueError,
			    "%s: %s block %zd (%zu elements at %zu) is past the buffer's end "
			    "(%zu elements)",
			    what, which, p, counts[p], displs[p], b->count);
			return -1;
		}
	return 0;
}

enum vkind { V_ALLGATHERV, V_GATHERV, V_SCATTERV, V_ALLTOALLV, V_REDUCE_SCATTER };

/* _vcall(kind, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, root, op): the
 * variable-count calls with counts and displacements already taken out of mpi4py's buffer
 * specs (shmcoll/_comm.py does that). None where the call has no such argument, or where
 * this rank's role ignores it (a non-root's gatherv receive). */
static PyObject *comm_vcall(CommObject *self, PyObject *args)
{
	static const char *const names[] = {"Allgatherv", "Gatherv", "Scatterv", "Alltoallv",
	                                    "Reduce_scatter"};
	PyObject *so, *sco, *sdo, *ro, *rco, *rdo, *opo;
	size_t *sc = NULL, *sd = NULL, *rc_ = NULL, *rd = NULL;
	shmcoll_comm *c = py__live(self);
	struct buf s, r;
	const char *what;
	int kind, root, rc = 0, is_root, dt;
	Py_ssize_t P = self->size;
	shmcoll_op op = SHMCOLL_SUM;
	PyObject *res = NULL;

	if (!c || !PyArg_ParseTuple(args, "iOOOOOOiO:_vcall", &kind, &so, &sco, &sdo, &ro, &rco,
	                            &rdo, &root, &opo))
		return NULL;
	if (kind < V_ALLGATHERV || kind > V_REDUCE_SCATTER)
		return PyErr_Format(PyExc_ValueError, "_vcall: unknown kind %d", kind);
	what = names[kind];
	if ((kind == V_GATHERV || kind == V_SCATTERV) && (root < 0 || root >= self->size))
		return PyErr_Format(PyExc_ValueError, "%s: root %d out of range 0..%d", what, root,
		                    self->size - 1);
	is_root = root == self->rank;
	if (py__get_buf(so, &s, 0, kind != V_ALLTOALLV && (kind != V_SCATTERV || is_root),
	                kind == V_SCATTERV && !is_root, what) < 0)
		return NULL;
	if (py__get_buf(ro, &r, 1, kind == V_SCATTERV && is_root, kind == V_GATHERV && !is_root,
	                what) < 0) {
		py__buf_release(&s);
		return NULL;
	}
	if (size_array(sco, P, &sc, what, "the send counts") < 0 ||
	    size_array(sdo, P, &sd, what, "the send displacements") < 0 ||
	    size_array(rco, P, &rc_, what, "the receive counts") < 0 ||
	    size_array(rdo, P, &rd, what, "the receive displacements") < 0)
		goto out;
	/* The element type: the typed side's (both, when both are typed, must agree). */
	if (s.inplace || s.none) {
		s.dt = r.dt;
		s.es = r.es;
	} else if (r.inplace || r.none) {
		r.dt = s.dt;
		r.es = s.es;
	} else if (py__agree(&s, &r, kind == V_REDUCE_SCATTER, what) < 0) {
		goto out;
	}
	if (kind == V_REDUCE_SCATTER &&
	    (py__agree(&s, NULL, 1, what) < 0 || py__get_op(opo, s.dt, &op, what) < 0))
		goto out;
	dt = s.dt;
	switch (kind) {
	case V_ALLGATHERV:
	case V_GATHERV:
		if (kind == V_ALLGATHERV || is_root) {
			if (!rc_ || !rd) {
				PyErr_Format(PyExc_ValueError,
				             "%s: the receive counts and displacements", what);
				goto out;
			}
			if (blocks_fit(&r, rc_, rd, P, what, "receive") < 0)
				goto out;
			if (s.inplace) {
				s.ptr = r.ptr + rd[self->rank] * r.es;
				s.count = rc_[self->rank];
			}
		}
		if (kind == V_ALLGATHERV)
			NOGIL(rc = shmcoll_allgatherv(s.ptr, s.count, r.ptr, rc_, rd, py__cdt(dt),
			                              c));
		else
			NOGIL(rc = shmcoll_gatherv(s.ptr, s.count, r.ptr, is_root ? rc_ : NULL,
			                           is_root ? rd : NULL, py__cdt(dt), root, c));
		break;
	case V_SCATTERV:
		if (is_root) {
			if (!sc || !sd) {
				PyErr_Format(PyExc_ValueError,
				             "Scatterv: the send counts and displacements");
				goto out;
			}
			if (blocks_fit(&s, sc, sd, P, what, "send") < 0)
				goto out;
			if (r.inplace) {
				r.ptr = s.ptr + sd[self->rank] * s.es;
				r.count = sc[self->rank];
			}
		}
		NOGIL(rc = shmcoll_scatterv(s.ptr, is_root ? sc : NULL, is_root ? sd : NULL, r.ptr,
		                            r.count, py__cdt(dt), root, c));
		break;
	case V_ALLTOALLV:
		if (!sc || !sd || !rc_ || !rd) {
			PyErr_Format(PyExc_ValueError,
			             "Alltoallv: counts and displacements on both sides");
			goto out;
		}
		if (blocks_fit(&s, sc, sd, P, what, "send") < 0 ||
		    blocks_fit(&r, rc_, rd, P, what, "receive") < 0)
			goto out;
		NOGIL(rc = shmcoll_alltoallv(s.ptr, sc, sd, r.ptr, rc_, rd, py__cdt(dt), c));
		break;
	default: { /* Reduce_scatter: recvcounts, the same on every rank */
		size_t total = 0, before = 0;
		Py_ssize_t p;

		if (!rc_) {
			PyErr_SetString(PyExc_ValueError, "Reduce_scatter: the receive counts");
			goto out;
		}
		for (p = 0; p < P; p++) {
			if (p < self->rank)
				before += rc_[p];
			total += rc_[p];
		}
		if (s.inplace) {
			/* MPI's in-place form: the input in recvbuf, this rank's result at its
			 * start. */
			if (py__need(&r, total, what, "receive") < 0)
				goto out;
			NOGIL(rc = shmcoll_reduce_scatterv(r.ptr, r.ptr + before * r.es, rc_,
			                                   py__cdt(dt), op, c));
			if (!rc && before)
				memmove(r.ptr, r.ptr + before * r.es, rc_[self->rank] * r.es);
			break;
		}
		if (py__need(&s, total, what, "send") < 0 ||
		    py__need(&r, rc_[self->rank], what, "receive") < 0)
			goto out;
		NOGIL(rc = shmcoll_reduce_scatterv(s.ptr, r.ptr, rc_, py__cdt(dt), op, c));
		break;
	}
	}
	if (rc)
		py__raise_rc(c, rc);
	else
		res = Py_NewRef(Py_None);
out:
	py__buf_release(&s);
	py__buf_release(&r);
	PyMem_Free(sc);
	PyMem_Free(sd);
	PyMem_Free(rc_);
	PyMem_Free(rd);
	return res;
}

PyMethodDef py__coll_methods[] = {
    {"Barrier", (PyCFunction)py__comm_barrier, METH_NOARGS, "Waits for every rank."},
    {"Ibarrier", (PyCFunction)comm_ibarrier, METH_NOARGS, "Ibarrier() -> Request"},
    {"Bcast", KW(comm_bcast), METH_VARARGS | METH_KEYWORDS, "Bcast(buf, root=0)"},
    {"Ibcast", KW(comm_ibcast), METH_VARARGS | METH_KEYWORDS, "Ibcast(buf, root=0) -> Request"},
    {"Allreduce", KW(comm_allreduce), METH_VARARGS | METH_KEYWORDS,
     "Allreduce(sendbuf, recvbuf, op=SUM)"},
    {"Iallreduce", KW(comm_iallreduce), METH_VARARGS | METH_KEYWORDS,
     "Iallreduce(sendbuf, recvbuf, op=SUM) -> Request"},
    {"Reduce", KW(comm_reduce), METH_VARARGS | METH_KEYWORDS,
     "Reduce(sendbuf, recvbuf, op=SUM, root=0)"},
    {"Ireduce", KW(comm_ireduce), METH_VARARGS | METH_KEYWORDS,
     "Ireduce(sendbuf, recvbuf, op=SUM, root=0) -> Request"},
    {"Scan", KW(comm_scan), METH_VARARGS | METH_KEYWORDS, "Scan(sendbuf, recvbuf, op=SUM)"},
    {"Iscan", KW(comm_iscan), METH_VARARGS | METH_KEYWORDS, "Iscan(sendbuf, recvbuf, op=SUM)"},
    {"Exscan", KW(comm_exscan), METH_VARARGS | METH_KEYWORDS, "Exscan(sendbuf, recvbuf, op=SUM)"},
    {"Iexscan", KW(comm_iexscan), METH_VARARGS | METH_KEYWORDS,
     "Iexscan(sendbuf, recvbuf, op=SUM)"},
    {"Allgather", KW(comm_allgather), METH_VARARGS | METH_KEYWORDS, "Allgather(sendbuf, recvbuf)"},
    {"Iallgather", KW(comm_iallgather), METH_VARARGS | METH_KEYWORDS,
     "Iallgather(sendbuf, recvbuf) -> Request"},
    {"Gather", KW(comm_gather), METH_VARARGS | METH_KEYWORDS, "Gather(sendbuf, recvbuf, root=0)"},
    {"Igather", KW(comm_igather), METH_VARARGS | METH_KEYWORDS,
     "Igather(sendbuf, recvbuf, root=0) -> Request"},
    {"Scatter", KW(comm_scatter), METH_VARARGS | METH_KEYWORDS,
     "Scatter(sendbuf, recvbuf, root=0)"},
    {"Iscatter", KW(comm_iscatter), METH_VARARGS | METH_KEYWORDS,
     "Iscatter(sendbuf, recvbuf, root=0) -> Request"},
    {"Alltoall", KW(comm_alltoall), METH_VARARGS | METH_KEYWORDS, "Alltoall(sendbuf, recvbuf)"},
    {"Ialltoall", KW(comm_ialltoall), METH_VARARGS | METH_KEYWORDS,
     "Ialltoall(sendbuf, recvbuf) -> Request"},
    {"Reduce_scatter_block", KW(comm_reduce_scatter_block), METH_VARARGS | METH_KEYWORDS,
     "Reduce_scatter_block(sendbuf, recvbuf, op=SUM)"},
    {"_vcall", (PyCFunction)comm_vcall, METH_VARARGS,
     "_vcall(kind, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, root, op)"},
    {"_allreduce_loop", (PyCFunction)comm_allreduce_loop, METH_VARARGS,
     "_allreduce_loop(sendbuf, recvbuf, iters) -> seconds: the same calls made from C"},
    {NULL, NULL, 0, NULL},
};
