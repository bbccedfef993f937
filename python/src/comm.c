/* comm.c - the communicator type: made (Comm(rank, size, job, ...), init()), split, duplicated,
 * freed, aborted; a context manager. Its collectives, point-to-point calls and symmetric memory
 * are the methods of coll.c, p2p.c and symbuf.c, joined into its type here. */
#include "shmcoll_py.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

shmcoll_comm *py__live(CommObject *self)
{
	if (!self->c) {
		PyObject *args = Py_BuildValue("(is)", EINVAL, "the communicator was freed");

		if (args) {
			PyErr_SetObject(py__Error, args);
			Py_DECREF(args);
		}
	}
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

/* Comm(rank, size, job, arena_bytes=0, timeout_ms=0) */
static PyObject *comm_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"rank", "size", "job", "arena_bytes", "timeout_ms", NULL};
	shmcoll_config cfg = {0};
	Py_ssize_t arena = 0;
	shmcoll_comm *c = NULL;
	const char *job;
	int rc;

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
	if (self->c)
		shmcoll_comm_destroy(self->c); /* local: waits for no peer */
	if (self->parked)
		shmcoll_comm_destroy(self->parked); /* not reached: its buffers hold self */
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Lets go of the C communicator (Free, leaving a with-block): destroyed now, or, while
 * symmetric buffers still use its memory, parked until the last of them goes; either way
 * self->c is NULL after. 0, or a negative errno with self->c kept (operations outstanding:
 * -EBUSY, as shmcoll_comm_destroy, whose message a parked one gets from here). */
static int comm_release(CommObject *self)
{
	int rc;

	if (self->nsym > 0) {
		if (self->nreq > 0) {
			PyObject *args = Py_BuildValue(
			    "(is)", EBUSY,
			    "Free: operations still outstanding (requests not yet completed by "
			    "Wait or Test)");

			if (args) {
				PyErr_SetObject(py__Error, args);
				Py_DECREF(args);
			}
			return -EBUSY;
		}
		self->parked = self->c;
		self->c = NULL;
		return 0;
	}
	rc = shmcoll_comm_destroy(self->c);
	if (rc) {
		py__raise_rc(self->c, rc);
		return rc;
	}
	self->c = NULL;
	return 0;
}

static PyObject *comm_get_rank(CommObject *self, PyObject *unused)
{
	return PyLong_FromLong(self->rank);
}

static PyObject *comm_get_size(CommObject *self, PyObject *unused)
{
	return PyLong_FromLong(self->size);
}

/* Leaving on a failure: let go of the C communicator whatever it says (parked while
 * symmetric buffers live). */
static void comm_drop(CommObject *self)
{
	if (self->nsym > 0)
		self->parked = self->c;
	else
		shmcoll_comm_destroy(self->c);
	self->c = NULL;
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
	return PyLong_FromLong(self->rank);
}

static PyObject *comm_get_size_attr(CommObject *self, void *unused)
{
	return PyLong_FromLong(self->size);
}

static PyObject *comm_get_freed(CommObject *self, void *unused)
{
	return PyBool_FromLong(self->c == NULL);
}

static PyGetSetDef comm_getset[] = {
    {"rank", (getter)comm_get_rank_attr, NULL, "this rank, 0 .. size-1", NULL},
    {"size", (getter)comm_get_size_attr, NULL, "the number of ranks", NULL},
    {"freed", (getter)comm_get_freed, NULL, "whether Free() was called", NULL},
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
    .tp_doc = "Comm(rank, size, job, arena_bytes=0, timeout_ms=0): one rank's communicator.",
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
