/* request.c - calls and requests: the state of a call in progress (struct call), and
 * shmcoll.Request, a started non-blocking operation, with mpi4py's semantics:
 *
 *   Wait(status=None) -> True, Test(status=None) -> bool; once complete a request is
 *   inactive: false, and equal to REQUEST_NULL. Waitall, Testall, Waitany, Testany,
 *   Waitsome, Testsome over lists (None and inactive entries are skipped, as MPI's null
 *   requests); Get_status; Free (the operation still completes, in the background of later
 *   calls); Cancel; and mpi4py's lower-case forms, which return the objects of object
 *   requests (python/shmcoll/_comm.py's subclass).
 *
 * While a request waits, every operation the process has outstanding moves: the library's
 * waits advance every communicator (its progress rule). Waits over several requests poll
 * them, yielding the CPU between rounds that moved nothing. */
#include "shmcoll_py.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

const shmcoll_status py__empty_status = {.source = SHMCOLL_ANY_SOURCE, .tag = SHMCOLL_ANY_TAG};
const shmcoll_status py__null_status = {.source = PROC_NULL, .tag = SHMCOLL_ANY_TAG};

/* ---- calls ---- */

/* A message of nothing: what py__msg_release and the calls read of an unused one. */
static void msg_none(struct msg *m)
{
	m->mem.held = 0;
	m->mem.ptr = NULL;
	m->mem.len = 0;
	m->mem.keep = NULL;
	m->ignored = 1;
	m->inplace = 0;
	m->addr = NULL;
	m->count = 0;
	m->counts = m->displs = NULL;
	m->type = NULL;
	m->obj = NULL;
}

/* Field by field rather than a memset of the whole (two Py_buffers among them): every call
 * makes one, and this is on its path. */
struct call *py__call_init(struct call *k)
{
	msg_none(&k->s);
	msg_none(&k->r);
	k->scratch = NULL;
	k->nscratch = 0;
	k->finish = NULL;
	k->op = NULL;
	k->type = NULL;
	k->count = 0;
	k->rank = k->size = k->root = 0;
	k->out = NULL;
	k->off = 0;
	k->recv = 0;
	k->st = py__empty_status;
	k->arrays[0] = k->arrays[1] = k->arrays[2] = k->arrays[3] = NULL;
	k->heap = 0;
	k->wtypes[0] = k->wtypes[1] = NULL;
	k->req2 = NULL;
	return k;
}

struct call *py__call_new(void)
{
	struct call *k = PyMem_Malloc(sizeof(*k));

	if (!k) {
		PyErr_NoMemory();
		return NULL;
	}
	py__call_init(k);
	k->heap = 1;
	return k;
}

char *py__call_scratch(struct call *k, Py_ssize_t n)
{
	static char none[1]; /* no scratch wanted: a pointer nothing is written through */

	if (n <= 0)
		return none;
	PyMem_Free(k->scratch);
	k->scratch = PyMem_Malloc((size_t)n);
	k->nscratch = k->scratch ? n : 0;
	if (!k->scratch)
		PyErr_NoMemory();
	return k->scratch;
}

int py__call_arrays(struct call *k, Py_ssize_t n)
{
	for (int i = 0; i < 4; i++)
		if (!k->arrays[i] &&
		    !(k->arrays[i] = PyMem_Calloc((size_t)(n ? n : 1), sizeof(size_t)))) {
			PyErr_NoMemory();
			return -1;
		}
	return 0;
}

void py__call_free(struct call *k)
{
	int i;

	if (!k)
		return;
	/* A second operation still running (an Isendrecv's send, on an error path) reads the
	 * call's memory until it ends. */
	if (k->req2)
		NOGIL(shmcoll_wait(&k->req2, NULL));
	py__msg_release(&k->s);
	py__msg_release(&k->r);
	PyMem_Free(k->scratch);
	for (i = 0; i < 4; i++)
		PyMem_Free(k->arrays[i]);
	for (i = 0; i < 2; i++) {
		if (!k->wtypes[i])
			continue;
		for (Py_ssize_t j = 0; j < k->size; j++)
			Py_XDECREF(k->wtypes[i][j]);
		PyMem_Free(k->wtypes[i]);
	}
	Py_XDECREF(k->op);
	Py_XDECREF(k->type);
	if (k->heap)
		PyMem_Free(k);
}

/* The last step of a call whose library operation ended with rc (the GIL held): its finish
 * when rc is 0. 0, or -1 with the error raised. */
static int call_end(struct call *k, shmcoll_comm *c, int rc)
{
	if (rc) {
		py__raise_rc(c, rc);
		return -1;
	}
	if (k->finish && k->finish(k) < 0)
		return -1;
	return 0;
}

static PyObject *request_free(RequestObject *r, PyObject *unused);

/* The request of a started non-blocking call: it takes k. NULL with the error raised (the
 * operation waited for and k freed). */
static PyObject *request_of(CommObject *self, shmcoll_request *req, struct call *k)
{
	RequestObject *r;

	if (!k->heap) {
		/* Not reached: non-blocking calls are made with py__call_new. */
		PyErr_SetString(PyExc_SystemError, "a non-blocking call without its own state");
		NOGIL(shmcoll_wait(&req, NULL));
		py__call_free(k);
		return NULL;
	}
	r = PyObject_New(RequestObject, &py__RequestType);
	if (!r) {
		/* Out of memory: the operation is started; finish it before its buffers go. */
		NOGIL(shmcoll_wait(&req, NULL));
		py__call_free(k);
		return NULL;
	}
	r->req = req;
	Py_INCREF(self);
	r->comm = (PyObject *)self;
	r->call = k;
	r->active = 1;
	r->rc = 0;
	r->counted = req != NULL;
	if (req)
		py__comm_req_start(self);
	return (PyObject *)r;
}

PyObject *py__called(CommObject *self, int rc, shmcoll_request *req, int nb, struct call *k)
{
	if (rc && req) {
		PyObject *r = request_of(self, req, k), *f;

		if (!r)
			return NULL;
		f = request_free((RequestObject *)r, NULL);
		Py_XDECREF(f);
		Py_DECREF(r);
		if (!PyErr_Occurred())
			py__raise_rc(self->c, rc);
		return NULL;
	}
	if (rc || !nb) {
		rc = call_end(k, self->c, rc);
		py__call_free(k);
		if (rc < 0)
			return NULL;
		Py_RETURN_NONE;
	}
	return request_of(self, req, k);
}

/* ---- statuses ---- */

static PyObject *s_source, *s_tag, *s_error, *s_nbytes, *s_total, *s_cancelled;

static int status_names(void)
{
	if (s_cancelled)
		return 0;
	s_source = PyUnicode_InternFromString("source");
	s_tag = PyUnicode_InternFromString("tag");
	s_error = PyUnicode_InternFromString("error");
	s_nbytes = PyUnicode_InternFromString("nbytes");
	s_total = PyUnicode_InternFromString("total");
	s_cancelled = PyUnicode_InternFromString("cancelled");
	return s_source && s_tag && s_error && s_nbytes && s_total && s_cancelled ? 0 : -1;
}

static int set_long(PyObject *o, PyObject *name, long long v)
{
	PyObject *x = PyLong_FromLongLong(v);
	int rc;

	if (!x)
		return -1;
	rc = PyObject_SetAttr(o, name, x);
	Py_DECREF(x);
	return rc;
}

int py__status_fill(PyObject *status, const shmcoll_status *st)
{
	if (!status || status == Py_None)
		return 0;
	if (status_names() < 0 || set_long(status, s_source, st->source) < 0 ||
	    set_long(status, s_tag, st->tag) < 0 || set_long(status, s_error, st->error) < 0 ||
	    set_long(status, s_nbytes, (long long)st->bytes) < 0 ||
	    set_long(status, s_total, (long long)st->total) < 0 ||
	    PyObject_SetAttr(status, s_cancelled, Py_False) < 0)
		return -1;
	return 0;
}

/* ---- completing a request ---- */

static CommObject *comm_of(RequestObject *r)
{
	return (CommObject *)r->comm;
}

/* The library's operation of r completed with rc (r->req is NULL now): its call finished,
 * the request inactive. 0, or -1 with the error raised; status filled either way (a
 * receive's, else the empty status). */
static int complete(RequestObject *r, int rc, PyObject *status)
{
	struct call *k = r->call;
	shmcoll_comm *c = r->comm ? comm_of(r)->c : NULL;
	int res = 0;

	if (r->counted) {
		py__comm_req_done(comm_of(r));
		r->counted = 0;
	}
	r->active = 0;
	r->rc = rc;
	r->call = NULL;
	if (k) {
		/* The status first: filling it runs Python code, which must not find the call's
		 * error already raised (a failed operation's status says its error too). */
		k->st.error = rc;
		res = py__status_fill(status, k->recv ? &k->st : &py__empty_status);
		if (res == 0)
			res = call_end(k, c, rc);
		py__call_free(k);
	} else if (py__status_fill(status, &py__empty_status) < 0) {
		res = -1;
	}
	return res;
}

/* Moves r's library operation: waits for it (wait) or tests it once. 1 when it has ended
 * (r->req NULL, its result in r->rc, a receive's status in its call), else 0. */
static int lib_poll(RequestObject *r, int wait)
{
	struct call *k = r->call;
	shmcoll_request **two = k && k->req2 ? &k->req2 : NULL;
	/* A send leaves the status alone: the call's stays (a receive from PROC_NULL's). */
	shmcoll_status st = k ? k->st : py__empty_status;
	int rc = 0, done = 1;

	if (!r->req && !two)
		return 1;
	if (two) {
		/* Isendrecv: its receive (r->req) and its send end together. */
		shmcoll_request *reqs[2] = {r->req, *two};
		shmcoll_status sts[2] = {st, py__empty_status};
		int recv = r->req != NULL;

		if (wait)
			NOGIL(rc = shmcoll_waitall(2, reqs, sts));
		else
			rc = shmcoll_testall(2, reqs, &done, sts);
		r->req = reqs[0];
		*two = reqs[1];
		if (r->req || *two)
			return 0; /* a test that found one still running */
		if (recv)
			st = sts[0];
	} else if (wait) {
		NOGIL(rc = shmcoll_wait(&r->req, &st));
	} else {
		rc = shmcoll_test(&r->req, &done, &st);
		if (!done && !rc)
			return 0;
	}
	r->req = NULL;
	r->rc = rc;
	if (r->counted) {
		py__comm_req_done(comm_of(r));
		r->counted = 0;
	}
	if (k && k->recv)
		k->st = st;
	return 1;
}

/* Waits for r (active) and completes it. */
static int wait_one(RequestObject *r, PyObject *status)
{
	lib_poll(r, 1);
	return complete(r, r->rc, status);
}

/* Tests r (active): 1 (completed now), 0, or -1 with the error raised. */
static int test_one(RequestObject *r, PyObject *status)
{
	if (!lib_poll(r, 0))
		return 0;
	return complete(r, r->rc, status) < 0 ? -1 : 1;
}

/* Whether r (active) has completed, without completing it (MPI_Request_get_status): 1 with
 * its status in status (a receive's, else the empty one, its error the operation's), or 0.
 * The library's test ends what it finds done: the result is kept for Wait. */
static int peek_own(RequestObject *r, PyObject *status)
{
	shmcoll_status st;

	if (!lib_poll(r, 0))
		return 0;
	st = r->call && r->call->recv ? r->call->st : py__empty_status;
	st.error = r->rc;
	return py__status_fill(status, &st) < 0 ? -1 : 1;
}

/* ---- the type ---- */

static PyObject *request_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	PyObject *o = NULL;

	if (!PyArg_ParseTuple(args, "|O:Request", &o))
		return NULL;
	/* Request() and Request(request): an inactive request (REQUEST_NULL); mpi4py copies
	 * the handle, which only a null one can be here. */
	return type->tp_alloc(type, 0);
}

static void request_dealloc(RequestObject *r)
{
	/* Dropped before it completed: it still owns its buffers, so it completes first (a
	 * broken communicator ends it at once; a peer that never comes, at the timeout). */
	if (r->req || (r->call && r->call->req2))
		lib_poll(r, 1);
	if (r->counted)
		py__comm_req_done(comm_of(r));
	py__call_free(r->call);
	Py_XDECREF(r->comm);
	Py_TYPE(r)->tp_free((PyObject *)r);
}

/* Whether obj is a request of ours that a subclass (an object request) drives itself. */
static int is_sub(PyObject *obj)
{
	return !Py_IS_TYPE(obj, &py__RequestType);
}

static PyObject *request_wait(RequestObject *r, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"status", NULL};
	PyObject *status = Py_None;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Wait", kwlist, &status))
		return NULL;
	if (!r->active) {
		if (py__status_fill(status, &py__empty_status) < 0)
			return NULL;
		Py_RETURN_TRUE;
	}
	if (wait_one(r, status) < 0)
		return NULL;
	Py_RETURN_TRUE;
}

static PyObject *request_test(RequestObject *r, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"status", NULL};
	PyObject *status = Py_None;
	int done;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Test", kwlist, &status))
		return NULL;
	if (!r->active) {
		if (py__status_fill(status, &py__empty_status) < 0)
			return NULL;
		Py_RETURN_TRUE;
	}
	done = test_one(r, status);
	if (done < 0)
		return NULL;
	return PyBool_FromLong(done);
}

/* Get_status(status=None) -> bool: whether it completed, without completing it. */
static PyObject *request_get_status(RequestObject *r, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"status", NULL};
	PyObject *status = Py_None;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Get_status", kwlist, &status))
		return NULL;
	if (!r->active)
		return py__status_fill(status, &py__empty_status) < 0 ? NULL : Py_NewRef(Py_True);
	switch (peek_own(r, status)) {
	case 0:
		Py_RETURN_FALSE;
	case 1:
		Py_RETURN_TRUE;
	default:
		return NULL;
	}
}

/* Free(): the request is let go; its operation completes anyway (a later wait of any other
 * request, or the interpreter's exit, finishes it: the object stays alive until then in the
 * list of freed requests). */
static PyObject *freed_list;

static PyObject *request_free(RequestObject *r, PyObject *unused)
{
	if (!r->active && !r->req && !r->call)
		return py__raise_errno(EINVAL, "Free: the request is REQUEST_NULL");
	if (r->active && (r->req || r->call)) {
		if (!freed_list && !(freed_list = PyList_New(0)))
			return NULL;
		if (PyList_Append(freed_list, (PyObject *)r) < 0)
			return NULL;
	}
	r->active = 0;
	Py_RETURN_NONE;
}

/* Completes the freed requests whose operations have ended. */
static void reap_freed(void)
{
	Py_ssize_t i;

	if (!freed_list)
		return;
	for (i = PyList_GET_SIZE(freed_list) - 1; i >= 0; i--) {
		RequestObject *r = (RequestObject *)PyList_GET_ITEM(freed_list, i);

		if (!lib_poll(r, 0))
			continue;
		if (complete(r, r->rc, NULL) < 0)
			PyErr_Clear(); /* nobody waits for a freed request: its error goes */
		PySequence_DelItem(freed_list, i);
	}
}

/* Cancel(): the library cannot cancel a started operation; MPI lets a cancel fail when the
 * operation completes anyway (Status.Is_cancelled() is then false), which is what happens. */
static PyObject *request_cancel(RequestObject *r, PyObject *unused)
{
	if (!r->active)
		return py__raise_errno(EINVAL, "Cancel: the request is REQUEST_NULL");
	Py_RETURN_NONE;
}

static int request_bool(PyObject *o)
{
	return ((RequestObject *)o)->active;
}

static PyObject *request_richcompare(PyObject *a, PyObject *b, int op)
{
	int eq;

	if (!PyObject_TypeCheck(b, &py__RequestType) || (op != Py_EQ && op != Py_NE))
		Py_RETURN_NOTIMPLEMENTED;
	/* Inactive requests are all REQUEST_NULL; an active one is itself. */
	eq = a == b || (!PyObject_IsTrue(a) && !PyObject_IsTrue(b));
	if (PyErr_Occurred())
		return NULL;
	return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t request_hash(PyObject *a)
{
	return _Py_HashPointer(a);
}

/* ---- over many requests ---- */

/* The items of reqs, checked to be requests or None: a new list, or NULL. */
static PyObject *req_list(PyObject *reqs, const char *what)
{
	PyObject *l = PySequence_List(reqs);
	Py_ssize_t i;

	if (!l)
		return NULL;
	for (i = 0; i < PyList_GET_SIZE(l); i++) {
		PyObject *o = PyList_GET_ITEM(l, i);

		if (o != Py_None && !PyObject_TypeCheck(o, &py__RequestType)) {
			Py_DECREF(l);
			return PyErr_Format(PyExc_TypeError, "%s: item %zd is not a request", what,
			                    i);
		}
	}
	return l;
}

/* Whether item o is an active request. A subclass says so through its _active() method
 * when it has one (a persistent request is inactive between a completion and its next
 * Start, yet not REQUEST_NULL), else through its truth. */
static int active(PyObject *o)
{
	PyObject *r;
	int a;

	if (o == Py_None)
		return 0;
	if (!is_sub(o))
		return ((RequestObject *)o)->active;
	r = PyObject_CallMethod(o, "_active", NULL);
	if (!r) {
		if (!PyErr_ExceptionMatches(PyExc_AttributeError))
			return -1;
		PyErr_Clear();
		return PyObject_IsTrue(o);
	}
	a = PyObject_IsTrue(r);
	Py_DECREF(r);
	return a;
}

/* Tests o (active) with status; for a subclass, through its Test method. 1, 0 or -1. */
static int test_any(PyObject *o, PyObject *status)
{
	if (is_sub(o)) {
		PyObject *r = PyObject_CallMethod(o, "Test", "(O)", status ? status : Py_None);
		int t;

		if (!r)
			return -1;
		t = PyObject_IsTrue(r);
		Py_DECREF(r);
		return t;
	}
	return test_one((RequestObject *)o, status);
}

static int wait_any_one(PyObject *o, PyObject *status)
{
	if (is_sub(o)) {
		PyObject *r = PyObject_CallMethod(o, "Wait", "(O)", status ? status : Py_None);

		Py_XDECREF(r);
		return r ? 0 : -1;
	}
	return wait_one((RequestObject *)o, status);
}

/* peek_own for any item o (active): a subclass answers through its Get_status. 1, 0 or
 * -1. */
static int peek(PyObject *o, PyObject *status)
{
	PyObject *res;
	int t;

	if (!is_sub(o))
		return peek_own((RequestObject *)o, status);
	res = PyObject_CallMethod(o, "Get_status", "(O)", status ? status : Py_None);
	if (!res)
		return -1;
	t = PyObject_IsTrue(res);
	Py_DECREF(res);
	return t;
}

/* One round found nothing: yield the CPU, then sleep a little longer each time (other
 * ranks share the CPUs), with the GIL released. */
static void back_off(unsigned *round)
{
	if (*round < 16) {
		NOGIL(sched_yield());
	} else {
		struct timespec ts = {0, *round < 64 ? 20000 : 200000};

		NOGIL(nanosleep(&ts, NULL));
	}
	(*round)++;
}

/* The status at i of statuses (a list or a tuple of them, or None): a borrowed reference,
 * or Py_None past its end. */
static PyObject *status_at(PyObject *statuses, Py_ssize_t i)
{
	if (!statuses || statuses == Py_None)
		return Py_None;
	if (PyList_Check(statuses))
		return i < PyList_GET_SIZE(statuses) ? PyList_GET_ITEM(statuses, i) : Py_None;
	if (PyTuple_Check(statuses))
		return i < PyTuple_GET_SIZE(statuses) ? PyTuple_GET_ITEM(statuses, i) : Py_None;
	return Py_None;
}

/* A new MPI.Status: a new reference, or NULL with the error set. */
static PyObject *new_status(void)
{
	PyObject *mod = PyImport_ImportModule("shmcoll._status"), *cls, *s;

	cls = mod ? PyObject_GetAttrString(mod, "Status") : NULL;
	Py_XDECREF(mod);
	if (!cls)
		return NULL;
	s = PyObject_CallNoArgs(cls);
	Py_DECREF(cls);
	return s;
}

/* statuses given as a list shorter than n: extended with new Status objects, as mpi4py
 * does. */
static int fit_statuses(PyObject *statuses, Py_ssize_t n)
{
	if (!statuses || statuses == Py_None || !PyList_Check(statuses))
		return 0;
	while (PyList_GET_SIZE(statuses) < n) {
		PyObject *s = new_status();

		if (!s || PyList_Append(statuses, s) < 0) {
			Py_XDECREF(s);
			return -1;
		}
		Py_DECREF(s);
	}
	return 0;
}

/* The status the k-th completion of a Waitsome (Testsome, Get_status_some ...) goes to: the
 * caller's k-th (borrowed), or, past the end of a list, a new one (*made set: a new
 * reference, appended by keep_slot once it is filled); Py_None when there is none to fill.
 * As in mpi4py (3.1 and 4), the list grows to the completions' number, not the requests'.
 * NULL with the error set. */
static PyObject *status_slot(PyObject *statuses, Py_ssize_t k, int *made)
{
	PyObject *s = status_at(statuses, k);

	*made = 0;
	if (s != Py_None || !statuses || !PyList_Check(statuses))
		return s;
	s = new_status();
	*made = s != NULL;
	return s;
}

/* After the slot of status_slot was offered to a request: kept (appended) when filled. 0 or
 * -1. */
static int keep_slot(PyObject *statuses, PyObject *s, int made, int filled)
{
	int rc = 0;

	if (!made)
		return 0;
	if (filled)
		rc = PyList_Append(statuses, s);
	Py_DECREF(s);
	return rc;
}

/* The statuses past the nout completions a Waitsome filled, up to the requests' number n:
 * the empty status, as mpi4py leaves them (MPI's array is all empty statuses before the
 * call). 0 or -1. */
static int empty_rest(PyObject *statuses, Py_ssize_t nout, Py_ssize_t n)
{
	for (Py_ssize_t k = nout; k < n; k++) {
		PyObject *s = status_at(statuses, k);

		if (s == Py_None)
			break;
		if (py__status_fill(s, &py__empty_status) < 0)
			return -1;
	}
	return 0;
}

/* Waitall(requests, statuses=None) -> True: every one waited for in turn (each wait moves
 * all of them), then the first error raised. */
static PyObject *request_waitall(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"requests", "statuses", NULL};
	PyObject *reqs, *statuses = Py_None, *l, *et = NULL, *ev = NULL, *etb = NULL;
	Py_ssize_t i, n;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:Waitall", kwlist, &reqs, &statuses))
		return NULL;
	if (!(l = req_list(reqs, "Waitall")))
		return NULL;
	n = PyList_GET_SIZE(l);
	if (fit_statuses(statuses, n) < 0) {
		Py_DECREF(l);
		return NULL;
	}
	for (i = 0; i < n; i++) {
		PyObject *o = PyList_GET_ITEM(l, i), *st = status_at(statuses, i);
		int a = active(o);

		if (a < 0 || (a == 0 && py__status_fill(st, &py__empty_status) < 0) ||
		    (a > 0 && wait_any_one(o, st) < 0)) {
			if (!et)
				PyErr_Fetch(&et, &ev, &etb);
			else
				PyErr_Clear();
		}
	}
	Py_DECREF(l);
	reap_freed();
	if (et) {
		PyErr_Restore(et, ev, etb);
		return NULL;
	}
	Py_RETURN_TRUE;
}

/* Testall(requests, statuses=None) -> bool: whether every one completed; only then are
 * they all completed (MPI: none is, otherwise). */
static PyObject *request_testall(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"requests", "statuses", NULL};
	PyObject *reqs, *statuses = Py_None, *l, *a2, *res;
	Py_ssize_t i, n;
	int all = 1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:Testall", kwlist, &reqs, &statuses))
		return NULL;
	if (!(l = req_list(reqs, "Testall")))
		return NULL;
	n = PyList_GET_SIZE(l);
	for (i = 0; i < n && all; i++) {
		PyObject *o = PyList_GET_ITEM(l, i);
		int a = active(o), done = 1;

		if (a < 0)
			goto fail;
		if (!a)
			continue;
		if (is_sub(o)) {
			PyObject *r = PyObject_CallMethod(o, "_ready", NULL);

			if (!r)
				goto fail;
			done = PyObject_IsTrue(r);
			Py_DECREF(r);
		} else {
			done = lib_poll((RequestObject *)o, 0);
		}
		all &= done == 1;
	}
	if (!all) {
		Py_DECREF(l);
		reap_freed();
		Py_RETURN_FALSE;
	}
	a2 = Py_BuildValue("(OO)", l, statuses);
	res = a2 ? request_waitall(cls, a2, NULL) : NULL;
	Py_XDECREF(a2);
	Py_DECREF(l);
	if (!res)
		return NULL;
	Py_DECREF(res);
	Py_RETURN_TRUE;
fail:
	Py_DECREF(l);
	return NULL;
}

/* One round of Waitany, Testany and their lower-case forms over the requests of l: the
 * index of the first that completed (lower: taken with its wait(), the object in *obj),
 * NONE_READY while some are active, NONE_ACTIVE, or FAILED with the error raised. */
enum { NONE_READY = -1, NONE_ACTIVE = -2, FAILED = -3 };

static Py_ssize_t any_round(PyObject *l, PyObject *status, int lower, PyObject **obj)
{
	Py_ssize_t i, n = PyList_GET_SIZE(l);
	int any = 0;

	for (i = 0; i < n; i++) {
		PyObject *o = PyList_GET_ITEM(l, i), *r;
		int a = active(o), t;

		if (a < 0)
			return FAILED;
		if (!a)
			continue;
		any = 1;
		if (!lower) {
			t = test_any(o, status);
		} else {
			if (!(r = PyObject_CallMethod(o, "_ready", NULL)))
				return FAILED;
			t = PyObject_IsTrue(r);
			Py_DECREF(r);
			if (t > 0 && !(*obj = PyObject_CallMethod(o, "wait", "(O)", status)))
				return FAILED;
		}
		if (t < 0)
			return FAILED;
		if (t)
			return i;
	}
	return any ? NONE_READY : NONE_ACTIVE;
}

/* Waitany and waitany (wait), Testany and testany: one round, or rounds until one
 * completes, with the answer in mpi4py's form of each. */
static PyObject *any(PyObject *args, PyObject *kw, int wait, int lower, const char *what)
{
	static char *kwlist[] = {"requests", "status", NULL};
	PyObject *reqs, *status = Py_None, *l, *obj = NULL;
	unsigned round = 0;
	Py_ssize_t i;
	int flag;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwlist, &reqs, &status))
		return NULL;
	if (!(l = req_list(reqs, what)))
		return NULL;
	for (;;) {
		i = any_round(l, status, lower, &obj);
		if (i != NONE_READY || !wait)
			break;
		reap_freed();
		back_off(&round);
		if (PyErr_CheckSignals() < 0) {
			i = FAILED;
			break;
		}
	}
	Py_DECREF(l);
	if (i == FAILED)
		return NULL;
	if (i == NONE_ACTIVE && !lower && py__status_fill(status, &py__empty_status) < 0)
		return NULL;
	flag = i >= 0 || i == NONE_ACTIVE; /* Testany's: one completed, or none is active */
	if (i < 0) {
		reap_freed();
		i = SHMCOLL_UNDEFINED;
	}
	if (!obj)
		obj = Py_NewRef(Py_None);
	if (wait && lower)
		return Py_BuildValue("(nN)", i, obj);
	if (lower)
		return Py_BuildValue("(nON)", i, flag ? Py_True : Py_False, obj);
	Py_DECREF(obj);
	return wait ? PyLong_FromSsize_t(i) : Py_BuildValue("(nO)", i, flag ? Py_True : Py_False);
}

static PyObject *request_waitany(PyObject *cls, PyObject *args, PyObject *kw)
{
	return any(args, kw, 1, 0, "Waitany");
}

static PyObject *request_testany(PyObject *cls, PyObject *args, PyObject *kw)
{
	return any(args, kw, 0, 0, "Testany");
}

static PyObject *request_waitany_obj(PyObject *cls, PyObject *args, PyObject *kw)
{
	return any(args, kw, 1, 1, "waitany");
}

static PyObject *request_testany_obj(PyObject *cls, PyObject *args, PyObject *kw)
{
	return any(args, kw, 0, 1, "testany");
}

/* What some() does with each active request: test it, test it until one completes, or look
 * whether it completed without completing it (Get_status_some). */
enum { SOME_TEST, SOME_WAIT, SOME_PEEK };

/* Testsome, Waitsome and Get_status_some: the indices of those that completed (a list;
 * Waitsome waits for at least one), or None when none is active (MPI's UNDEFINED: no status
 * is touched). The k-th completion's status goes to statuses[k], a list growing to the
 * completions' number, and the statuses after them, up to the requests' number, are empty,
 * as mpi4py 3.1 and 4 leave them. */
static PyObject *some(PyObject *args, PyObject *kw, int mode, const char *what)
{
	static char *kwlist[] = {"requests", "statuses", NULL};
	PyObject *reqs, *statuses = Py_None, *l, *out = NULL;
	Py_ssize_t i, n;
	unsigned round = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwlist, &reqs, &statuses))
		return NULL;
	if (!(l = req_list(reqs, what)))
		return NULL;
	n = PyList_GET_SIZE(l);
	for (;;) {
		int any = 0;

		if (!(out = PyList_New(0)))
			goto fail;
		for (i = 0; i < n; i++) {
			PyObject *o = PyList_GET_ITEM(l, i), *st;
			int a = active(o), t, made;

			if (a < 0)
				goto fail;
			if (!a)
				continue;
			any = 1;
			if (!(st = status_slot(statuses, PyList_GET_SIZE(out), &made)))
				goto fail;
			t = mode == SOME_PEEK ? peek(o, st) : test_any(o, st);
			if (keep_slot(statuses, st, made, t > 0) < 0 || t < 0)
				goto fail;
			if (t) {
				PyObject *x = PyLong_FromSsize_t(i);

				if (!x || PyList_Append(out, x) < 0) {
					Py_XDECREF(x);
					goto fail;
				}
				Py_DECREF(x);
			}
		}
		if (!any) {
			Py_DECREF(out);
			Py_DECREF(l);
			Py_RETURN_NONE;
		}
		if (PyList_GET_SIZE(out) || mode != SOME_WAIT)
			break;
		Py_CLEAR(out);
		reap_freed();
		back_off(&round);
		if (PyErr_CheckSignals() < 0)
			goto fail;
	}
	Py_DECREF(l);
	if (empty_rest(statuses, PyList_GET_SIZE(out), n) < 0) {
		Py_DECREF(out);
		return NULL;
	}
	return out;
fail:
	Py_XDECREF(out);
	Py_DECREF(l);
	return NULL;
}

static PyObject *request_waitsome(PyObject *cls, PyObject *args, PyObject *kw)
{
	return some(args, kw, SOME_WAIT, "Waitsome");
}

static PyObject *request_testsome(PyObject *cls, PyObject *args, PyObject *kw)
{
	return some(args, kw, SOME_TEST, "Testsome");
}

static PyObject *request_get_status_some(PyObject *cls, PyObject *args, PyObject *kw)
{
	return some(args, kw, SOME_PEEK, "Get_status_some");
}

/* Get_status_all(requests, statuses=None) -> bool (MPI 4.1): whether every one completed,
 * completing none of them; when they all did, statuses (a list grown to their number) says
 * what each got, the inactive ones' the empty status. */
static PyObject *request_get_status_all(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"requests", "statuses", NULL};
	PyObject *reqs, *statuses = Py_None, *l;
	Py_ssize_t i, n;
	int all = 1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:Get_status_all", kwlist, &reqs, &statuses))
		return NULL;
	if (!(l = req_list(reqs, "Get_status_all")))
		return NULL;
	n = PyList_GET_SIZE(l);
	for (i = 0; i < n && all == 1; i++) {
		PyObject *o = PyList_GET_ITEM(l, i);
		int a = active(o);

		all = a > 0 ? peek(o, NULL) : a < 0 ? -1 : 1;
	}
	if (all == 1 && fit_statuses(statuses, n) < 0)
		all = -1;
	for (i = 0; i < n && all == 1 && statuses != Py_None; i++) {
		PyObject *o = PyList_GET_ITEM(l, i), *st = status_at(statuses, i);
		int a = active(o);

		if (a < 0 || (a == 0 && py__status_fill(st, &py__empty_status) < 0) ||
		    (a > 0 && peek(o, st) < 0))
			all = -1;
	}
	Py_DECREF(l);
	return all < 0 ? NULL : PyBool_FromLong(all);
}

/* Get_status_any(requests, status=None) -> (index, flag) (MPI 4.1): the first that
 * completed, completing none: (its index, True) with its status; (UNDEFINED, True) and the
 * empty status when none is active; else (UNDEFINED, False). */
static PyObject *request_get_status_any(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"requests", "status", NULL};
	PyObject *reqs, *status = Py_None, *l;
	Py_ssize_t i, n, found = SHMCOLL_UNDEFINED;
	int any = 0, t = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:Get_status_any", kwlist, &reqs, &status))
		return NULL;
	if (!(l = req_list(reqs, "Get_status_any")))
		return NULL;
	n = PyList_GET_SIZE(l);
	for (i = 0; i < n && t == 0; i++) {
		PyObject *o = PyList_GET_ITEM(l, i);
		int a = active(o);

		if (a == 0)
			continue;
		any = 1;
		t = a < 0 ? -1 : peek(o, status);
		if (t > 0)
			found = i;
	}
	Py_DECREF(l);
	if (t < 0 || (!any && py__status_fill(status, &py__empty_status) < 0))
		return NULL;
	return Py_BuildValue("(nO)", found, t > 0 || !any ? Py_True : Py_False);
}

/* mpi4py's lower-case forms: wait(status=None) -> the object (None for a buffer request),
 * test(status=None) -> (flag, object); a subclass (an object request) overrides them. */
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

/* The objects of requests each waited for with its wait(): a list. */
static PyObject *waitall_obj(PyObject *l, PyObject *statuses)
{
	PyObject *out = PyList_New(PyList_GET_SIZE(l)), *et = NULL, *ev = NULL, *etb = NULL;
	Py_ssize_t i;

	if (!out)
		return NULL;
	for (i = 0; i < PyList_GET_SIZE(l); i++) {
		PyObject *o = PyList_GET_ITEM(l, i), *res = NULL;

		if (o != Py_None)
			res = PyObject_CallMethod(o, "wait", "(O)", status_at(statuses, i));
		if (!res && PyErr_Occurred()) {
			if (!et)
				PyErr_Fetch(&et, &ev, &etb);
			else
				PyErr_Clear();
		}
		PyList_SET_ITEM(out, i, res ? res : Py_NewRef(Py_None));
	}
	if (et) {
		Py_DECREF(out);
		PyErr_Restore(et, ev, etb);
		return NULL;
	}
	return out;
}

/* waitall(requests, statuses=None) -> [each one's wait()]. */
static PyObject *request_waitall_obj(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"requests", "statuses", NULL};
	PyObject *reqs, *statuses = Py_None, *l, *out;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:waitall", kwlist, &reqs, &statuses))
		return NULL;
	if (!(l = req_list(reqs, "waitall")))
		return NULL;
	if (fit_statuses(statuses, PyList_GET_SIZE(l)) < 0) {
		Py_DECREF(l);
		return NULL;
	}
	out = waitall_obj(l, statuses);
	Py_DECREF(l);
	return out;
}

/* testall(requests, statuses=None) -> (True, [each one's wait()]) when every one
 * completed, else (False, None). */
static PyObject *request_testall_obj(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"requests", "statuses", NULL};
	PyObject *reqs, *statuses = Py_None, *l, *out;
	Py_ssize_t i;
	int all = 1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:testall", kwlist, &reqs, &statuses))
		return NULL;
	if (!(l = req_list(reqs, "testall")))
		return NULL;
	for (i = 0; i < PyList_GET_SIZE(l) && all; i++) {
		PyObject *o = PyList_GET_ITEM(l, i), *r;

		if (o == Py_None)
			continue;
		r = PyObject_CallMethod(o, "_ready", NULL);
		if (!r) {
			Py_DECREF(l);
			return NULL;
		}
		all &= PyObject_IsTrue(r) == 1;
		Py_DECREF(r);
	}
	if (!all) {
		Py_DECREF(l);
		return Py_BuildValue("(OO)", Py_False, Py_None);
	}
	if (fit_statuses(statuses, PyList_GET_SIZE(l)) < 0) {
		Py_DECREF(l);
		return NULL;
	}
	out = waitall_obj(l, statuses);
	Py_DECREF(l);
	if (!out)
		return NULL;
	return Py_BuildValue("(ON)", Py_True, out);
}

/* waitsome and testsome: the indices of the requests that completed and their objects
 * (each one's wait()), or (None, None) when none is active; waitsome waits for one. The
 * statuses as some()'s. */
static PyObject *some_obj(PyObject *args, PyObject *kw, int wait)
{
	static char *kwlist[] = {"requests", "statuses", NULL};
	PyObject *reqs, *statuses = Py_None, *l, *idx = NULL, *objs = NULL;
	Py_ssize_t i, n;
	unsigned round = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwlist, &reqs, &statuses))
		return NULL;
	if (!(l = req_list(reqs, wait ? "waitsome" : "testsome")))
		return NULL;
	n = PyList_GET_SIZE(l);
	for (;;) {
		int any = 0;

		if (!(idx = PyList_New(0)) || !(objs = PyList_New(0)))
			goto fail;
		for (i = 0; i < n; i++) {
			PyObject *o = PyList_GET_ITEM(l, i), *r, *v, *st;
			int a = active(o), ready, made;

			if (a < 0)
				goto fail;
			if (!a)
				continue;
			any = 1;
			r = PyObject_CallMethod(o, "_ready", NULL);
			if (!r)
				goto fail;
			ready = PyObject_IsTrue(r);
			Py_DECREF(r);
			if (!ready)
				continue;
			if (!(st = status_slot(statuses, PyList_GET_SIZE(idx), &made)))
				goto fail;
			v = PyObject_CallMethod(o, "wait", "(O)", st);
			if (keep_slot(statuses, st, made, v != NULL) < 0) {
				Py_XDECREF(v);
				goto fail;
			}
			r = v ? PyLong_FromSsize_t(i) : NULL;
			if (!r || PyList_Append(idx, r) < 0 || PyList_Append(objs, v) < 0) {
				Py_XDECREF(r);
				Py_XDECREF(v);
				goto fail;
			}
			Py_DECREF(r);
			Py_DECREF(v);
		}
		if (!any) {
			Py_DECREF(l);
			Py_DECREF(idx);
			Py_DECREF(objs);
			return Py_BuildValue("(OO)", Py_None, Py_None);
		}
		if (PyList_GET_SIZE(idx) || !wait)
			break;
		Py_CLEAR(idx);
		Py_CLEAR(objs);
		reap_freed();
		back_off(&round);
		if (PyErr_CheckSignals() < 0)
			goto fail;
	}
	Py_DECREF(l);
	if (empty_rest(statuses, PyList_GET_SIZE(idx), n) < 0) {
		Py_DECREF(idx);
		Py_DECREF(objs);
		return NULL;
	}
	return Py_BuildValue("(NN)", idx, objs);
fail:
	Py_XDECREF(idx);
	Py_XDECREF(objs);
	Py_DECREF(l);
	return NULL;
}

static PyObject *request_waitsome_obj(PyObject *cls, PyObject *args, PyObject *kw)
{
	return some_obj(args, kw, 1);
}

static PyObject *request_testsome_obj(PyObject *cls, PyObject *args, PyObject *kw)
{
	return some_obj(args, kw, 0);
}

/* _ready() -> bool: whether it completed (completing it if the library's operation ended),
 * without taking anything from it: what the lower-case forms test by. */
static PyObject *request_ready(RequestObject *r, PyObject *unused)
{
	return PyBool_FromLong(!r->active || lib_poll(r, 0));
}

/* __reduce__: pickled as mpi4py 4 pickles requests (shmcoll.MPI._reduce): REQUEST_NULL, and
 * the inactive requests, which are equal to it. */
static PyObject *request_reduce(PyObject *self, PyObject *unused)
{
	PyObject *mod = PyImport_ImportModule("shmcoll.MPI"), *res;

	if (!mod)
		return NULL;
	res = PyObject_CallMethod(mod, "_reduce", "(O)", self);
	Py_DECREF(mod);
	return res;
}

static PyObject *request_get_done(RequestObject *r, void *unused)
{
	return PyBool_FromLong(!r->active);
}

static PyGetSetDef request_getset[] = {
    {"completed", (getter)request_get_done, NULL, "whether Wait or Test completed it", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#define STATIC (METH_VARARGS | METH_KEYWORDS | METH_STATIC)

static PyMethodDef request_methods[] = {
    {"Wait", KW(request_wait), METH_VARARGS | METH_KEYWORDS,
     "Wait(status=None) -> True: until the operation completes; raises its error."},
    {"Test", KW(request_test), METH_VARARGS | METH_KEYWORDS,
     "Test(status=None) -> bool: whether it completed (raises its error if so)."},
    {"Get_status", KW(request_get_status), METH_VARARGS | METH_KEYWORDS,
     "Get_status(status=None) -> bool: whether it completed, leaving it to Wait or Test."},
    {"get_status", KW(request_get_status), METH_VARARGS | METH_KEYWORDS,
     "get_status(status=None) -> bool: Get_status, mpi4py's lower-case form."},
    {"Free", (PyCFunction)request_free, METH_NOARGS,
     "Lets the request go; its operation completes anyway."},
    {"Cancel", (PyCFunction)request_cancel, METH_NOARGS,
     "Asks to cancel (shmcoll completes the operation instead: Is_cancelled() is false)."},
    {"Waitall", KW(request_waitall), STATIC,
     "Waitall(requests, statuses=None) -> True: waits for every one."},
    {"Testall", KW(request_testall), STATIC,
     "Testall(requests, statuses=None) -> bool: whether every one completed."},
    {"Waitany", KW(request_waitany), STATIC,
     "Waitany(requests, status=None) -> index of one that completed (UNDEFINED: none)."},
    {"Testany", KW(request_testany), STATIC, "Testany(requests, status=None) -> (index, flag)"},
    {"Waitsome", KW(request_waitsome), STATIC,
     "Waitsome(requests, statuses=None) -> indices of those that completed, or None."},
    {"Testsome", KW(request_testsome), STATIC,
     "Testsome(requests, statuses=None) -> indices of those that completed, or None."},
    {"Get_status_all", KW(request_get_status_all), STATIC,
     "Get_status_all(requests, statuses=None) -> bool: whether every one completed, leaving "
     "them to Wait or Test."},
    {"Get_status_any", KW(request_get_status_any), STATIC,
     "Get_status_any(requests, status=None) -> (index, flag): one that completed, left to Wait "
     "or Test."},
    {"Get_status_some", KW(request_get_status_some), STATIC,
     "Get_status_some(requests, statuses=None) -> indices of those that completed (left to "
     "Wait or Test), or None."},
    {"get_status_all", KW(request_get_status_all), STATIC, "Get_status_all, lower case."},
    {"get_status_any", KW(request_get_status_any), STATIC, "Get_status_any, lower case."},
    {"get_status_some", KW(request_get_status_some), STATIC, "Get_status_some, lower case."},
    {"cancel", (PyCFunction)request_cancel, METH_NOARGS, "Cancel(), mpi4py's lower-case form."},
    {"waitsome", KW(request_waitsome_obj), STATIC,
     "waitsome(requests, statuses=None) -> (indices, objects), or (None, None)."},
    {"testsome", KW(request_testsome_obj), STATIC,
     "testsome(requests, statuses=None) -> (indices, objects), or (None, None)."},
    {"wait", KW(request_wait_obj), METH_VARARGS | METH_KEYWORDS,
     "wait(status=None) -> object: Wait, as mpi4py's lower-case form."},
    {"test", KW(request_test_obj), METH_VARARGS | METH_KEYWORDS,
     "test(status=None) -> (flag, object): Test, as mpi4py's lower-case form."},
    {"waitall", KW(request_waitall_obj), STATIC,
     "waitall(requests, statuses=None) -> list: each one's wait(), in order."},
    {"testall", KW(request_testall_obj), STATIC,
     "testall(requests, statuses=None) -> (flag, list or None)."},
    {"waitany", KW(request_waitany_obj), STATIC,
     "waitany(requests, status=None) -> (index, object)."},
    {"testany", KW(request_testany_obj), STATIC,
     "testany(requests, status=None) -> (index, flag, object)."},
    {"__reduce__", request_reduce, METH_NOARGS, NULL},
    {"_ready", (PyCFunction)request_ready, METH_NOARGS,
     "Whether it completed, without completing it for Wait (the lower-case forms' test)."},
    {NULL, NULL, 0, NULL},
};

static PyNumberMethods request_as_number = {
    .nb_bool = request_bool,
};

PyTypeObject py__RequestType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.Request",
    .tp_basicsize = sizeof(RequestObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A started non-blocking operation (Isend, Iallreduce, ...); REQUEST_NULL once "
              "it completed.",
    .tp_new = request_new,
    .tp_dealloc = (destructor)request_dealloc,
    .tp_as_number = &request_as_number,
    .tp_richcompare = request_richcompare,
    .tp_hash = request_hash,
    .tp_methods = request_methods,
    .tp_getset = request_getset,
};
