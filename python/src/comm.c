/* comm.c - the communicator type: made (Comm(rank, size, job, ...), init()), split, duplicated,
 * freed, aborted; a context manager; and mpi4py's null communicator (Comm()) and second
 * handles (Comm(comm)). Its collectives, point-to-point calls and symmetric memory are the
 * methods of coll.c, p2p.c and symbuf.c, joined into its type here. */
#include "shmcoll_py.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

static CommObject *owner_of(CommObject *self)
{
	return self->owner ? (CommObject *)self->owner : self;
}

shmcoll_comm *py__live(CommObject *self)
{
	if (self->owner)
		self->c = owner_of(self)->c;
	if (!self->c)
		py__raise_errno(EINVAL, self->size ? "the communicator was freed (COMM_NULL)"
		                                   : "a null communicator (COMM_NULL)");
	return self->c;
}

PyObject *py__wrap(PyTypeObject *type, shmcoll_comm *c)
{
	CommObject *o = (CommObject *)type->tp_alloc(type, 0);

	if (!o) {
		shmcoll_comm_destroy(c);
		return NULL;
	}
	o->c = c;
	o->rank = shmcoll_comm_rank(c);
	o->size = shmcoll_comm_size(c);
	return (PyObject *)o;
}

/* A second handle of comm (mpi4py's Comm(comm)): the same C communicator, and the same
 * Python attributes (its __dict__), of its first handle. */
static PyObject *comm_alias(PyTypeObject *type, CommObject *comm)
{
	CommObject *first = owner_of(comm), *o;

	o = (CommObject *)type->tp_alloc(type, 0);
	if (!o)
		return NULL;
	Py_INCREF(first);
	o->owner = (PyObject *)first;
	o->c = first->c;
	o->rank = first->rank;
	o->size = first->size;
	if (type->tp_dictoffset && Py_TYPE(first)->tp_dictoffset) {
		PyObject *d = PyObject_GenericGetDict((PyObject *)first, NULL);

		if (!d || PyObject_GenericSetDict((PyObject *)o, d, NULL) < 0) {
			Py_XDECREF(d);
			Py_DECREF(o);
			return NULL;
		}
		Py_DECREF(d);
	}
	return (PyObject *)o;
}

/* Comm(rank, size, job, arena_bytes=0, timeout_ms=0); Comm(): a null communicator
 * (MPI.COMM_NULL); Comm(comm): a second handle of comm. */
static PyObject *comm_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"rank", "size", "job", "arena_bytes", "timeout_ms", NULL};
	shmcoll_config cfg = {0};
	Py_ssize_t arena = 0, nargs = PyTuple_GET_SIZE(args);
	shmcoll_comm *c = NULL;
	const char *job;
	int rc;

	if (nargs == 0 && (!kw || PyDict_GET_SIZE(kw) == 0))
		return type->tp_alloc(type, 0);
	if (nargs == 1 && (!kw || PyDict_GET_SIZE(kw) == 0)) {
		PyObject *a = PyTuple_GET_ITEM(args, 0);

		if (PyObject_TypeCheck(a, &py__CommType))
			return comm_alias(type, (CommObject *)a);
		return PyErr_Format(PyExc_TypeError,
		                    "Comm() takes a communicator, or (rank, size, job), not %.100s",
		                    Py_TYPE(a)->tp_name);
	}
	if (!PyArg_ParseTupleAndKeywords(args, kw, "iis|ni:Comm", kwlist, &cfg.rank, &cfg.size,
	                                 &job, &arena, &cfg.timeout_ms))
		return NULL;
	if (arena < 0) {
		PyErr_SetString(PyExc_ValueError, "Comm: arena_bytes is negative");
		return NULL;
	}
	cfg.job = job;
	cfg.arena_bytes = (size_t)arena;
	NOGIL(rc = shmcoll_comm_create(&cfg, &c));
	if (rc)
		return py__raise_rc(NULL, rc);
	return py__wrap(type, c);
}

static void comm_dealloc(CommObject *self)
{
	if (self->weakrefs)
		PyObject_ClearWeakRefs((PyObject *)self);
	if (self->owner) {
		Py_CLEAR(self->owner); /* a second handle owns nothing */
	} else {
		/* Local: waits for no peer. Requests hold their communicator, so none is left. */
		if (self->c)
			shmcoll_comm_destroy(self->c);
		if (self->doomed)
			shmcoll_comm_destroy(self->doomed);
		if (self->parked)
			shmcoll_comm_destroy(self->parked); /* not reached: its buffers hold self */
	}
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The C communicator of a freed one goes: destroyed, or parked while symmetric buffers use
 * its memory (symbuf.c destroys it after the last). */
static void let_go(CommObject *self, shmcoll_comm *c)
{
	if (self->nsym > 0)
		self->parked = c;
	else
		shmcoll_comm_destroy(c);
}

/* Requests count on a communicator's first handle, whichever handle started them. */
void py__comm_req_start(CommObject *self)
{
	owner_of(self)->nreq++;
}

void py__comm_req_done(CommObject *self)
{
	CommObject *first = owner_of(self);

	if (--first->nreq == 0 && first->doomed) {
		shmcoll_comm *c = first->doomed;

		first->doomed = NULL;
		let_go(first, c);
	}
}

/* Lets go of the C communicator (Free, leaving a with-block): destroyed now; parked while
 * symmetric buffers still use its memory; or, with requests outstanding, kept until the last
 * completes (MPI: a freed communicator's operations complete). Either way self->c (and the
 * first handle's) is NULL after. 0, or a negative errno with the error raised. */
static int comm_release(CommObject *self)
{
	CommObject *first = owner_of(self);
	shmcoll_comm *c = first->c;
	int rc;

	first->c = NULL;
	self->c = NULL;
	if (first->nreq > 0) {
		first->doomed = c;
		return 0;
	}
	if (first->nsym > 0) {
		first->parked = c;
		return 0;
	}
	rc = shmcoll_comm_destroy(c);
	if (rc == -EBUSY) {
		/* Requests of a second handle: the communicator goes with the last handle. */
		first->doomed = c;
		return 0;
	}
	if (rc) {
		py__raise_rc(NULL, rc);
		return rc;
	}
	return 0;
}

/* rank and size, which a null or freed communicator (COMM_NULL) has not, as in MPI. */
static int sized(CommObject *self)
{
	if (owner_of(self)->c)
		return 0;
	py__raise_errno(EINVAL, self->size ? "the communicator was freed (COMM_NULL)"
	                                   : "a null communicator (COMM_NULL)");
	return -1;
}

static PyObject *comm_get_rank(CommObject *self, PyObject *unused)
{
	return sized(self) ? NULL : PyLong_FromLong(self->rank);
}

static PyObject *comm_get_size(CommObject *self, PyObject *unused)
{
	return sized(self) ? NULL : PyLong_FromLong(self->size);
}

/* Leaving on a failure: let go of the C communicator whatever it says (parked while
 * symmetric buffers live; kept while requests are outstanding). */
static void comm_drop(CommObject *self)
{
	CommObject *first = owner_of(self);
	shmcoll_comm *c = first->c;

	first->c = NULL;
	self->c = NULL;
	if (!c)
		return;
	if (first->nreq > 0)
		first->doomed = c;
	else
		let_go(first, c);
}

static PyObject *comm_free(CommObject *self, PyObject *unused)
{
	int rc;

	if (!py__live(self))
		return NULL;
	rc = comm_release(self);
	if (rc)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *comm_abort(CommObject *self, PyObject *args)
{
	int code = 1;

	if (!PyArg_ParseTuple(args, "|i:Abort", &code))
		return NULL;
	if (self->c)
		shmcoll_comm_abort(self->c);
	/* As MPI_Abort: this process ends here; its peers' calls fail with -ECANCELED. */
	fflush(NULL);
	_exit(code & 0xff);
}

/* Local: breaks the communicator for every rank (each rank's pending and later calls raise
 * shmcoll.Error(ECANCELED)). */
static PyObject *comm_break(CommObject *self, PyObject *unused)
{
	if (!py__live(self))
		return NULL;
	shmcoll_comm_abort(self->c);
	Py_RETURN_NONE;
}

static PyObject *comm_split(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"color", "key", NULL};
	shmcoll_comm *c = py__live(self), *nc = NULL;
	int color = 0, key = 0, rc;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, "|ii:Split", kwlist, &color, &key))
		return NULL;
	if (color < 0)
		color = SHMCOLL_UNDEFINED;
	NOGIL(rc = shmcoll_comm_split(c, color, key, &nc));
	if (rc)
		return py__raise_rc(c, rc);
	if (!nc)
		Py_RETURN_NONE; /* MPI.COMM_NULL in mpi4py; the pure-Python layer maps it */
	return py__wrap(Py_TYPE(self), nc);
}

static PyObject *comm_dup(CommObject *self, PyObject *unused)
{
	shmcoll_comm *c = py__live(self), *nc = NULL;
	int rc;

	if (!c)
		return NULL;
	NOGIL(rc = shmcoll_comm_dup(c, &nc));
	if (rc)
		return py__raise_rc(c, rc);
	return py__wrap(Py_TYPE(self), nc);
}

static PyObject *comm_enter(PyObject *self, PyObject *unused)
{
	Py_INCREF(self);
	return self;
}

/* Leaving a with-block: on an exception the communicator is broken for every rank (their
 * calls raise shmcoll.Error(ECANCELED) instead of waiting for this one), then freed; else
 * a barrier (the ranks leave together) and free. */
static PyObject *comm_exit(CommObject *self, PyObject *args)
{
	PyObject *et = Py_None, *ev = Py_None, *tb = Py_None, *r;

	if (!PyArg_ParseTuple(args, "|OOO:__exit__", &et, &ev, &tb))
		return NULL;
	if (self->owner)
		self->c = owner_of(self)->c;
	if (!self->c)
		Py_RETURN_FALSE;
	if (et != Py_None) {
		shmcoll_comm_abort(self->c);
		comm_drop(self);
		Py_RETURN_FALSE;
	}
	r = py__comm_barrier(self, NULL);
	if (!r) {
		comm_drop(self);
		return NULL;
	}
	Py_DECREF(r);
	r = comm_free(self, NULL);
	if (!r)
		return NULL;
	Py_DECREF(r);
	Py_RETURN_FALSE;
}

static PyObject *comm_get_rank_attr(CommObject *self, void *unused)
{
	return comm_get_rank(self, NULL);
}

static PyObject *comm_get_size_attr(CommObject *self, void *unused)
{
	return comm_get_size(self, NULL);
}

static PyObject *comm_get_freed(CommObject *self, void *unused)
{
	return PyBool_FromLong(owner_of(self)->c == NULL);
}

/* The first handle of this communicator (itself, but for a second handle): what MPI.Comm's
 * equality compares. */
static PyObject *comm_get_handle(CommObject *self, void *unused)
{
	PyObject *first = (PyObject *)owner_of(self);

	Py_INCREF(first);
	return first;
}

static PyGetSetDef comm_getset[] = {
    {"rank", (getter)comm_get_rank_attr, NULL, "this rank, 0 .. size-1", NULL},
    {"size", (getter)comm_get_size_attr, NULL, "the number of ranks", NULL},
    {"freed", (getter)comm_get_freed, NULL,
     "whether Free() was called (or it is a null communicator)", NULL},
    {"_handle", (getter)comm_get_handle, NULL, "the first handle of this communicator", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef comm_methods[] = {
    {"Get_rank", (PyCFunction)comm_get_rank, METH_NOARGS, "This rank."},
    {"Get_size", (PyCFunction)comm_get_size, METH_NOARGS, "The number of ranks."},
    {"Free", (PyCFunction)comm_free, METH_NOARGS, "Releases this rank's communicator."},
    {"Abort", (PyCFunction)comm_abort, METH_VARARGS,
     "Abort(errorcode=1): breaks the communicator for every rank and ends this process."},
    {"Break", (PyCFunction)comm_break, METH_NOARGS,
     "Breaks the communicator for every rank without ending this process."},
    {"Split", KW(comm_split), METH_VARARGS | METH_KEYWORDS, "Split(color=0, key=0)"},
    {"Dup", (PyCFunction)comm_dup, METH_NOARGS, "A new communicator over the same ranks."},
    {"__enter__", comm_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)comm_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject py__CommType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll._Comm",
    .tp_basicsize = sizeof(CommObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Comm(rank, size, job, arena_bytes=0, timeout_ms=0): one rank's communicator; "
              "Comm(): a null one; Comm(comm): a second handle of comm.",
    .tp_new = comm_new,
    .tp_dealloc = (destructor)comm_dealloc,
    .tp_getset = comm_getset,
    .tp_weaklistoffset = offsetof(CommObject, weakrefs),
};

/* The type's methods: this file's, then every other file's tables, made into one. */
int py__comm_type_init(void)
{
	static PyMethodDef *const tables[] = {comm_methods, py__coll_methods, py__p2p_methods,
	                                      py__symbuf_methods};
	static PyMethodDef *all;
	size_t n = 0, t, i, at = 0;

	for (t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (i = 0; tables[t][i].ml_name; i++)
			n++;
	all = PyMem_Calloc(n + 1, sizeof(*all));
	if (!all) {
		PyErr_NoMemory();
		return -1;
	}
	for (t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (i = 0; tables[t][i].ml_name; i++)
			all[at++] = tables[t][i];
	py__CommType.tp_methods = all;
	return PyType_Ready(&py__CommType);
}
