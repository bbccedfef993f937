/* symbuf.c - symmetric memory: Comm._malloc, under python/shmcoll/_comm.py's malloc. */
#include "shmcoll_py.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* One shmcoll_malloc allocation of a communicator, exported as writable 1-D bytes through the
 * buffer protocol (python/shmcoll/_comm.py's malloc makes a NumPy array over it). It holds
 * its communicator object: the memory is the communicator's until the C communicator is
 * destroyed, which Free defers while any of these lives (comm_release). Nothing is freed
 * when one goes: shmcoll_free is collective, and a deallocation happens on each rank at its
 * own time, so the memory goes with the communicator. */
typedef struct {
	PyObject_HEAD PyObject *comm; /* the CommObject, NULL until the allocation succeeded */
	char *ptr;
	Py_ssize_t len;
} SymBufObject;

static int symbuf_getbuffer(SymBufObject *self, Py_buffer *view, int flags)
{
	return PyBuffer_FillInfo(view, (PyObject *)self, self->ptr, self->len, 0, flags);
}

static PyBufferProcs symbuf_as_buffer = {
    .bf_getbuffer = (getbufferproc)symbuf_getbuffer,
};

static void symbuf_dealloc(SymBufObject *self)
{
	CommObject *comm = (CommObject *)self->comm;

	if (comm && --comm->nsym == 0 && comm->parked) {
		/* The last buffer of a freed communicator: its memory goes now. No operation is
		 * outstanding (comm_release checked, and a parked one starts none). */
		shmcoll_comm_destroy(comm->parked);
		comm->parked = NULL;
	}
	Py_XDECREF(self->comm);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *symbuf_repr(SymBufObject *self)
{
	return PyUnicode_FromFormat("<shmcoll symmetric buffer of %zd bytes at %p>", self->len,
	                            (void *)self->ptr);
}

static PyObject *symbuf_get_address(SymBufObject *self, void *unused)
{
	return PyLong_FromVoidPtr(self->ptr);
}

static PyObject *symbuf_get_comm(SymBufObject *self, void *unused)
{
	Py_INCREF(self->comm);
	return self->comm;
}

static PyGetSetDef symbuf_getset[] = {
    {"address", (getter)symbuf_get_address, NULL, "where the memory starts (an int)", NULL},
    {"comm", (getter)symbuf_get_comm, NULL, "the communicator it belongs to", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef symbuf_members[] = {
    {"nbytes", T_PYSSIZET, offsetof(SymBufObject, len), READONLY, "its size in bytes"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject py__SymBufType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.SymmetricBuffer",
    .tp_basicsize = sizeof(SymBufObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Symmetric memory of a communicator (Comm._malloc), as writable bytes.",
    .tp_dealloc = (destructor)symbuf_dealloc,
    .tp_repr = (reprfunc)symbuf_repr,
    .tp_as_buffer = &symbuf_as_buffer,
    .tp_getset = symbuf_getset,
    .tp_members = symbuf_members,
};

/* shmcoll_malloc's NULL: shmcoll.Error with the library's message. shmcoll_malloc returns
 * no code, so the errno is inferred: ENOMEM when the communicator is still usable (no room);
 * else it broke, and a local call that finds it broken says so (shmcoll_free of NULL, after
 * the message is copied): ECANCELED, refined by the message to the codes of the failures
 * that break a collective (mismatched calls, a timeout, a dead peer). */
static PyObject *raise_malloc(shmcoll_comm *c)
{
	const char *m = shmcoll_last_error(c);
	char msg[512];
	PyObject *args;
	int err;

	snprintf(msg, sizeof(msg), "%s", m && *m ? m : "shmcoll_malloc failed");
	err = -shmcoll_free(c, NULL);
	if (err <= 0)
		err = ENOMEM;
	else if (strstr(msg, "mismatched"))
		err = EPROTO;
	else if (strstr(msg, "timed out"))
		err = ETIMEDOUT;
	else if (strstr(msg, " died"))
		err = EOWNERDEAD;
	args = Py_BuildValue("(is)", err, msg);
	if (args) {
		PyErr_SetObject(err == ETIMEDOUT ? py__TimeoutError : py__Error, args);
		Py_DECREF(args);
	}
	return NULL;
}

/* _malloc(nbytes) -> SymmetricBuffer: collective, every rank the same nbytes (> 0). */
static PyObject *comm_malloc(CommObject *self, PyObject *args)
{
	shmcoll_comm *c = py__live(self);
	SymBufObject *b;
	Py_ssize_t n;
	void *p;

	if (!c || !PyArg_ParseTuple(args, "n:_malloc", &n))
		return NULL;
	if (n <= 0)
		return PyErr_Format(PyExc_ValueError,
		                    "malloc: %zd bytes (shmcoll_malloc takes 1 or more)", n);
	/* Made first: no failure of this rank alone after the collective call. */
	b = PyObject_New(SymBufObject, &py__SymBufType);
	if (!b)
		return NULL;
	b->comm = NULL;
	b->ptr = NULL;
	b->len = n;
	NOGIL(p = shmcoll_malloc(c, (size_t)n));
	if (!p) {
		Py_DECREF(b);
		return raise_malloc(c);
	}
	b->ptr = p;
	Py_INCREF(self);
	b->comm = (PyObject *)self;
	self->nsym++;
	return (PyObject *)b;
}

PyMethodDef py__symbuf_methods[] = {
    {"_malloc", (PyCFunction)comm_malloc, METH_VARARGS,
     "_malloc(nbytes) -> SymmetricBuffer: shmcoll_malloc (collective), as writable bytes"},
    {NULL, NULL, 0, NULL},
};
