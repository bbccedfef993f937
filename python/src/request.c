/* request.c - requests and statuses: shmcoll.Request, the started non-blocking operation
 * (Wait, Test, Waitall, Testall and mpi4py's lower-case forms), and the filling of a Status. */
#include "shmcoll_py.h"

#include <string.h>

PyObject *py__status_fill(PyObject *status, const shmcoll_status *st)
{
	/* A shmcoll.Status (or mpi4py-like) object: source, tag, count in bytes. */
	if (status && status != Py_None) {
		PyObject *v;

		if (!(v = PyLong_FromLong(st->source)) ||
		    PyObject_SetAttrString(status, "source", v) < 0)
			goto fail;
		Py_DECREF(v);
		if (!(v = PyLong_FromLong(st->tag)) || PyObject_SetAttrString(status, "tag", v) < 0)
			goto fail;
		Py_DECREF(v);
		if (!(v = PyLong_FromSize_t(st->bytes)) ||
		    PyObject_SetAttrString(status, "nbytes", v) < 0)
			goto fail;
		Py_DECREF(v);
		if (!(v = PyLong_FromSize_t(st->total)) ||
		    PyObject_SetAttrString(status, "total", v) < 0)
			goto fail;
		Py_DECREF(v);
		return status;
	fail:
		Py_XDECREF(v);
		return NULL;
	}
	return Py_None;
}

static void request_done(RequestObject *r)
{
	int i;

	for (i = 0; i < 2; i++) {
		py__buf_release(&r->bufs[i]);
		Py_CLEAR(r->objs[i]);
	}
	if (r->counted && !r->req) {
		((CommObject *)r->comm)->nreq--;
		r->counted = 0;
	}
}

PyObject *py__request_new(PyObject *comm, shmcoll_request *req, struct buf *a, struct buf *b,
                          int recv)
{
	RequestObject *r = PyObject_New(RequestObject, &py__RequestType);
	struct buf *src[2] = {a, b};
	int i;

	if (!r) {
		/* Out of memory: the operation is started; finish it before its buffers go. */
		NOGIL(shmcoll_wait(&req, NULL));
		for (i = 0; i < 2; i++)
			if (src[i])
				py__buf_release(src[i]);
		return NULL;
	}
	r->req = req;
	Py_INCREF(comm);
	r->comm = comm;
	r->recv = recv;
	r->counted = req != NULL;
	if (req)
		((CommObject *)comm)->nreq++;
	for (i = 0; i < 2; i++) {
		memset(&r->bufs[i], 0, sizeof(r->bufs[i]));
		r->objs[i] = NULL;
		if (src[i]) {
			r->bufs[i] = *src[i];
			src[i]->held = 0;
			r->objs[i] = src[i]->obj;
			Py_XINCREF(r->objs[i]);
		}
	}
	return (PyObject *)r;
}

/* What a completed request returns: None, or raises its error. */
static PyObject *request_finish(RequestObject *r, int rc, PyObject *status,
                                const shmcoll_status *st)
{
	request_done(r);
	if (rc)
		return py__raise_rc(((CommObject *)r->comm)->c, rc);
	if (r->recv && !py__status_fill(status, st))
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *request_wait(RequestObject *r, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"status", NULL};
	PyObject *status = Py_None;
	shmcoll_status st = {0};
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Wait", kwlist, &status))
		return NULL;
	if (!r->req)
		Py_RETURN_NONE; /* completed before */
	NOGIL(rc = shmcoll_wait(&r->req, &st));
	return request_finish(r, rc, status, &st);
}

static PyObject *request_test(RequestObject *r, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"status", NULL};
	PyObject *status = Py_None, *res;
	shmcoll_status st = {0};
	int rc, done = 1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Test", kwlist, &status))
		return NULL;
	if (!r->req)
		Py_RETURN_TRUE;
	rc = shmcoll_test(&r->req, &done, &st);
	if (!done && !rc)
		Py_RETURN_FALSE;
	res = request_finish(r, rc, status, &st);
	if (!res)
		return NULL;
	Py_DECREF(res);
	Py_RETURN_TRUE;
}

static void request_dealloc(RequestObject *r)
{
	/* Dropped before it completed: it still owns its buffers, so it finishes first (a
	 * broken communicator ends it at once; a peer that never comes, at the timeout). */
	if (r->req)
		NOGIL(shmcoll_wait(&r->req, NULL));
	request_done(r);
	Py_XDECREF(r->comm);
	Py_TYPE(r)->tp_free((PyObject *)r);
}

/* A request's Wait or Test (wait, test) with args: the C type's own directly, a subclass's
 * (the object requests of python/shmcoll/_comm.py) through its method. */
static PyObject *call_wait(PyObject *r, const char *name, PyObject *args)
{
	PyObject *m, *res;

	if (Py_IS_TYPE(r, &py__RequestType)) {
		if (name[0] == 'W')
			return request_wait((RequestObject *)r, args, NULL);
		if (name[0] == 'T')
			return request_test((RequestObject *)r, args, NULL);
	}
	m = PyObject_GetAttrString(r, name);
	if (!m)
		return NULL;
	res = PyObject_Call(m, args, NULL);
	Py_DECREF(m);
	return res;
}

/* Waitall(requests, statuses=None): every request waited for, in order (each wait advances
 * all of them); statuses, a list as long, gets each receive's status. Then the first error
 * in order is raised. */
/* Waitall and waitall: method ("Wait" or "wait") called on every request of reqs in order,
 * each with its status of statuses (when given), the first error raised once every one was
 * waited for. With keep, the list of their results (None for a failed one); else None. */
static PyObject *wait_each(PyObject *reqs, PyObject *statuses, const char *method, int keep,
                           const char *what)
{
	PyObject *seq, *res, *st, *out = NULL, *first_t = NULL, *first_v = NULL, *first_tb = NULL;
	Py_ssize_t i, n;

	seq = PySequence_Fast(reqs, "requests must be a sequence");
	if (!seq)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	for (i = 0; i < n; i++) {
		PyObject *r = PySequence_Fast_GET_ITEM(seq, i);

		if (r != Py_None && !PyObject_TypeCheck(r, &py__RequestType)) {
			Py_DECREF(seq);
			return PyErr_Format(PyExc_TypeError, "%s: item %zd is not a request", what,
			                    i);
		}
	}
	if (keep && !(out = PyList_New(n))) {
		Py_DECREF(seq);
		return NULL;
	}
	for (i = 0; i < n; i++) {
		PyObject *r = PySequence_Fast_GET_ITEM(seq, i);
		PyObject *a;

		res = NULL;
		if (r != Py_None) {
			st = statuses != Py_None ? PySequence_GetItem(statuses, i) : NULL;
			if (statuses != Py_None && !st)
				PyErr_Clear();
			a = st ? PyTuple_Pack(1, st) : PyTuple_New(0);
			Py_XDECREF(st);
			res = a ? call_wait(r, method, a) : NULL;
			Py_XDECREF(a);
			if (!res && !first_t)
				PyErr_Fetch(&first_t, &first_v, &first_tb);
			else if (!res)
				PyErr_Clear();
		}
		if (!res) {
			Py_INCREF(Py_None);
			res = Py_None;
		}
		if (keep)
			PyList_SET_ITEM(out, i, res);
		else
			Py_DECREF(res);
	}
	Py_DECREF(seq);
	if (first_t) {
		Py_XDECREF(out);
		PyErr_Restore(first_t, first_v, first_tb);
		return NULL;
	}
	if (!keep)
		Py_RETURN_NONE;
	return out;
}

static PyObject *request_waitall(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"requests", "statuses", NULL};
	PyObject *reqs, *statuses = Py_None;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:Waitall", kwlist, &reqs, &statuses))
		return NULL;
	return wait_each(reqs, statuses, "Wait", 0, "Waitall");
}

static PyObject *request_testall(PyObject *cls, PyObject *args)
{
	PyObject *reqs, *seq, *res, *empty;
	Py_ssize_t i, n;
	int all = 1;

	if (!PyArg_ParseTuple(args, "O:Testall", &reqs))
		return NULL;
	seq = PySequence_Fast(reqs, "Testall: requests must be a sequence");
	if (!seq)
		return NULL;
	empty = PyTuple_New(0);
	n = PySequence_Fast_GET_SIZE(seq);
	for (i = 0; i < n && empty; i++) {
		PyObject *r = PySequence_Fast_GET_ITEM(seq, i);

		if (r == Py_None)
			continue;
		if (!PyObject_TypeCheck(r, &py__RequestType)) {
			PyErr_Format(PyExc_TypeError, "Testall: item %zd is not a request", i);
			break;
		}
		res = call_wait(r, "Test", empty);
		if (!res)
			break;
		all &= PyObject_IsTrue(res) == 1;
		Py_DECREF(res);
	}
	Py_XDECREF(empty);
	Py_DECREF(seq);
	if (PyErr_Occurred())
		return NULL;
	return PyBool_FromLong(all);
}

/* mpi4py's lower-case forms: wait(status=None) -> None, test(status=None) -> (flag, None)
 * (a buffer request carries no object); a subclass (an object request) overrides them. */
static PyObject *request_wait_obj(RequestObject *r, PyObject *args, PyObject *kw)
{
	PyObject *res = request_wait(r, args, kw);

	if (!res)
		return NULL;
	Py_DECREF(res);
	Py_RETURN_NONE;
}

static PyObject *request_test_obj(RequestObject *r, PyObject *args, PyObject *kw)
{
	PyObject *res = request_test(r, args, kw), *t;

	if (!res)
		return NULL;
	t = PyTuple_Pack(2, res, Py_None);
	Py_DECREF(res);
	return t;
}

/* waitall(requests, statuses=None) -> [each one's wait()]: every one waited for, in order,
 * then the first error raised. */
static PyObject *request_waitall_obj(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"requests", "statuses", NULL};
	PyObject *reqs, *statuses = Py_None;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:waitall", kwlist, &reqs, &statuses))
		return NULL;
	return wait_each(reqs, statuses, "wait", 1, "waitall");
}

/* testall(requests) -> (True, [each one's wait()]) when every one completed, else
 * (False, None); an object receive that completed keeps its object for a later call. */
static PyObject *request_testall_obj(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"requests", "statuses", NULL};
	PyObject *reqs, *statuses = Py_None, *flag, *a, *res;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:testall", kwlist, &reqs, &statuses))
		return NULL;
	a = PyTuple_Pack(1, reqs);
	flag = a ? request_testall(cls, a) : NULL;
	Py_XDECREF(a);
	if (!flag)
		return NULL;
	if (flag != Py_True) {
		Py_DECREF(flag);
		return Py_BuildValue("(OO)", Py_False, Py_None);
	}
	Py_DECREF(flag);
	a = PyTuple_Pack(2, reqs, statuses);
	res = a ? request_waitall_obj(cls, a, NULL) : NULL;
	Py_XDECREF(a);
	if (!res)
		return NULL;
	return Py_BuildValue("(ON)", Py_True, res);
}

static PyObject *request_get_done(RequestObject *r, void *unused)
{
	return PyBool_FromLong(r->req == NULL);
}

static PyGetSetDef request_getset[] = {
    {"completed", (getter)request_get_done, NULL, "whether Wait or Test completed it", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef request_methods[] = {
    {"Wait", (PyCFunction)(void (*)(void))request_wait, METH_VARARGS | METH_KEYWORDS,
     "Wait(status=None): until the operation completes; raises its error."},
    {"Test", (PyCFunction)(void (*)(void))request_test, METH_VARARGS | METH_KEYWORDS,
     "Test(status=None) -> bool: whether it completed (raises its error if so)."},
    {"Waitall", (PyCFunction)(void (*)(void))request_waitall,
     METH_VARARGS | METH_KEYWORDS | METH_STATIC,
     "Waitall(requests, statuses=None): waits for every one, then raises the first error."},
    {"Testall", (PyCFunction)(void (*)(void))request_testall, METH_VARARGS | METH_STATIC,
     "Testall(requests) -> bool: whether every one completed (each that did is complete)."},
    {"wait", (PyCFunction)(void (*)(void))request_wait_obj, METH_VARARGS | METH_KEYWORDS,
     "wait(status=None) -> None: Wait, as mpi4py's lower-case form."},
    {"test", (PyCFunction)(void (*)(void))request_test_obj, METH_VARARGS | METH_KEYWORDS,
     "test(status=None) -> (flag, None): Test, as mpi4py's lower-case form."},
    {"waitall", (PyCFunction)(void (*)(void))request_waitall_obj,
     METH_VARARGS | METH_KEYWORDS | METH_STATIC,
     "waitall(requests, statuses=None) -> list: each one's wait(), in order."},
    {"testall", (PyCFunction)(void (*)(void))request_testall_obj,
     METH_VARARGS | METH_KEYWORDS | METH_STATIC,
     "testall(requests) -> (flag, list or None): the objects when every one completed."},
    {NULL, NULL, 0, NULL},
};

static PyObject *request_waitall(PyObject *cls, PyObject *args, PyObject *kw);
static PyObject *request_testall(PyObject *cls, PyObject *args);

PyTypeObject py__RequestType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.Request",
    .tp_basicsize = sizeof(RequestObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A started non-blocking operation (Isend, Iallreduce, ...).",
    .tp_new = PyType_GenericNew, /* a complete request; subclasses are the object requests */
    .tp_dealloc = (destructor)request_dealloc,
    .tp_methods = request_methods,
    .tp_getset = request_getset,
};

PyObject *py__called(PyObject *self, shmcoll_comm *c, int rc, shmcoll_request *req, int nb,
                     struct buf *a, struct buf *b, int recv)
{
	if (rc || !nb) {
		if (a)
			py__buf_release(a);
		if (b)
			py__buf_release(b);
		if (rc)
			return py__raise_rc(c, rc);
		Py_RETURN_NONE;
	}
	return py__request_new(self, req, a, b, recv);
}
