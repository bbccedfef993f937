/* p2p.c - point to point: Send, Recv, their non-blocking starts, Sendrecv, Probe, Iprobe.
 * Messages travel as bytes: a receive takes up to its buffer's bytes. */
#include "shmcoll_py.h"

static const shmcoll_status null_status = {.source = PROC_NULL, .tag = SHMCOLL_ANY_TAG};

/* Messages travel as bytes: a receive takes up to its buffer's bytes. */
static PyObject *send(CommObject *self, PyObject *args, PyObject *kw, int nb)
{
	static char *kwlist[] = {"buf", "dest", "tag", NULL};
	const char *what = nb ? "Isend" : "Send";
	shmcoll_comm *c = py__live(self);
	shmcoll_request *req = NULL;
	PyObject *bo;
	struct buf b;
	int dest, tag = 0, rc;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, nb ? "Oi|i:Isend" : "Oi|i:Send", kwlist,
	                                       &bo, &dest, &tag))
		return NULL;
	if (py__get_buf(bo, &b, 0, 0, 0, what) < 0)
		return NULL;
	if (dest == PROC_NULL) /* a request that is complete already */
		return py__called((PyObject *)self, c, 0, NULL, nb, &b, NULL, 0);
	if (nb)
		NOGIL(rc = shmcoll_isend(b.ptr, b.count * b.es, SHMCOLL_UINT8, dest, tag, c, &req));
	else
		NOGIL(rc = shmcoll_send(b.ptr, b.count * b.es, SHMCOLL_UINT8, dest, tag, c));
	return py__called((PyObject *)self, c, rc, req, nb, &b, NULL, 0);
}

static PyObject *comm_send(CommObject *self, PyObject *args, PyObject *kw)
{
	return send(self, args, kw, 0);
}

static PyObject *comm_isend(CommObject *self, PyObject *args, PyObject *kw)
{
	return send(self, args, kw, 1);
}

static PyObject *comm_irecv(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"buf", "source", "tag", NULL};
	shmcoll_comm *c = py__live(self);
	shmcoll_request *req = NULL;
	int src = SHMCOLL_ANY_SOURCE, tag = SHMCOLL_ANY_TAG, rc;
	PyObject *bo;
	struct buf b;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, "O|ii:Irecv", kwlist, &bo, &src, &tag))
		return NULL;
	if (py__get_buf(bo, &b, 1, 0, 0, "Irecv") < 0)
		return NULL;
	if (src == PROC_NULL)
		return py__called((PyObject *)self, c, 0, NULL, 1, &b, NULL, 0);
	NOGIL(rc = shmcoll_irecv(b.ptr, b.count * b.es, SHMCOLL_UINT8, src, tag, c, &req));
	return py__called((PyObject *)self, c, rc, req, 1, &b, NULL, 1);
}

static PyObject *comm_recv(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"buf", "source", "tag", "status", NULL};
	shmcoll_comm *c = py__live(self);
	PyObject *bo, *so = Py_None;
	shmcoll_status st = {0};
	struct buf b;
	int src = SHMCOLL_ANY_SOURCE, tag = SHMCOLL_ANY_TAG, rc;

	if (!c ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "O|iiO:Recv", kwlist, &bo, &src, &tag, &so))
		return NULL;
	if (py__get_buf(bo, &b, 1, 0, 0, "Recv") < 0)
		return NULL;
	if (src == PROC_NULL) {
		rc = 0;
		st = null_status;
	} else {
		NOGIL(rc = shmcoll_recv(b.ptr, b.count * b.es, SHMCOLL_UINT8, src, tag, c, &st));
	}
	py__buf_release(&b);
	if (rc)
		return py__raise_rc(c, rc);
	if (!py__status_fill(so, &st))
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *comm_sendrecv(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"sendbuf", "dest",    "sendtag", "recvbuf",
	                         "source",  "recvtag", "status",  NULL};
	shmcoll_comm *c = py__live(self);
	PyObject *so, *ro = Py_None, *sto = Py_None;
	shmcoll_status st = {0};
	struct buf s, r;
	int dest, stag = 0, src = SHMCOLL_ANY_SOURCE, rtag = SHMCOLL_ANY_TAG, rc;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, "Oi|iOiiO:Sendrecv", kwlist, &so, &dest,
	                                       &stag, &ro, &src, &rtag, &sto))
		return NULL;
	if (py__get_buf(so, &s, 0, 0, 0, "Sendrecv") < 0)
		return NULL;
	if (py__get_buf(ro, &r, 1, 0, 0, "Sendrecv") < 0) {
		py__buf_release(&s);
		return NULL;
	}
	st = null_status;
	if (dest == PROC_NULL && src == PROC_NULL)
		rc = 0;
	else if (dest == PROC_NULL)
		NOGIL(rc = shmcoll_recv(r.ptr, r.count * r.es, SHMCOLL_UINT8, src, rtag, c, &st));
	else if (src == PROC_NULL)
		NOGIL(rc = shmcoll_send(s.ptr, s.count * s.es, SHMCOLL_UINT8, dest, stag, c));
	else
		NOGIL(rc = shmcoll_sendrecv(s.ptr, s.count * s.es, SHMCOLL_UINT8, dest, stag, r.ptr,
		                            r.count * r.es, SHMCOLL_UINT8, src, rtag, c, &st));
	py__buf_release(&s);
	py__buf_release(&r);
	if (rc)
		return py__raise_rc(c, rc);
	if (!py__status_fill(sto, &st))
		return NULL;
	Py_RETURN_NONE;
}

/* Probe(source=ANY_SOURCE, tag=ANY_TAG, status=None): waits for a matching message; Iprobe
 * returns whether one is there. The status's nbytes is the message's size. */
static PyObject *probe(CommObject *self, PyObject *args, PyObject *kw, int blocking)
{
	static char *kwlist[] = {"source", "tag", "status", NULL};
	shmcoll_comm *c = py__live(self);
	int src = SHMCOLL_ANY_SOURCE, tag = SHMCOLL_ANY_TAG, rc, flag = 1;
	PyObject *so = Py_None;
	shmcoll_status st = {0};

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, blocking ? "|iiO:Probe" : "|iiO:Iprobe",
	                                       kwlist, &src, &tag, &so))
		return NULL;
	if (blocking)
		NOGIL(rc = shmcoll_probe(src, tag, SHMCOLL_UINT8, c, &st));
	else
		NOGIL(rc = shmcoll_iprobe(src, tag, SHMCOLL_UINT8, c, &flag, &st));
	if (rc)
		return py__raise_rc(c, rc);
	if (flag && !py__status_fill(so, &st))
		return NULL;
	return PyBool_FromLong(flag);
}

static PyObject *comm_probe(CommObject *self, PyObject *args, PyObject *kw)
{
	return probe(self, args, kw, 1);
}

static PyObject *comm_iprobe(CommObject *self, PyObject *args, PyObject *kw)
{
	return probe(self, args, kw, 0);
}

PyMethodDef py__p2p_methods[] = {
    {"Send", KW(comm_send), METH_VARARGS | METH_KEYWORDS, "Send(buf, dest, tag=0)"},
    {"Isend", KW(comm_isend), METH_VARARGS | METH_KEYWORDS, "Isend(buf, dest, tag=0) -> Request"},
    {"Recv", KW(comm_recv), METH_VARARGS | METH_KEYWORDS,
     "Recv(buf, source=ANY_SOURCE, tag=ANY_TAG, status=None)"},
    {"Irecv", KW(comm_irecv), METH_VARARGS | METH_KEYWORDS,
     "Irecv(buf, source=ANY_SOURCE, tag=ANY_TAG) -> Request"},
    {"Sendrecv", KW(comm_sendrecv), METH_VARARGS | METH_KEYWORDS,
     "Sendrecv(sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, "
     "status=None)"},
    {"Probe", KW(comm_probe), METH_VARARGS | METH_KEYWORDS,
     "Probe(source=ANY_SOURCE, tag=ANY_TAG, status=None)"},
    {"Iprobe", KW(comm_iprobe), METH_VARARGS | METH_KEYWORDS,
     "Iprobe(source=ANY_SOURCE, tag=ANY_TAG, status=None) -> bool"},
    {NULL, NULL, 0, NULL},
};
