/* module.c - the extension module _shmcoll, the C half of the Python package shmcoll
 * (python/shmcoll/): its types, constants and functions, and the errors every call raises.
 * The method names, argument order and defaults are mpi4py's (docs/PYTHON.md); the pure-Python
 * layer (shmcoll/__init__.py, shmcoll/MPI.py, shmcoll/_comm.py) adds the object methods and
 * the rest. */
#include "shmcoll_py.h"

#include <errno.h>

PyObject *py__Error;        /* shmcoll.Error(OSError) */
PyObject *py__TimeoutError; /* shmcoll.TimeoutError(shmcoll.Error, TimeoutError) */
PyObject *py__BufferError;  /* shmcoll.BufferError(ValueError, BufferError) */

/* Raises the library's error rc (negative) with its message on c (or the last create's). */
PyObject *py__raise_rc(const shmcoll_comm *c, int rc)
{
	const char *msg = shmcoll_last_error(c);
	PyObject *args;

	if (!msg || !*msg)
		msg = shmcoll_strerror(rc);
	args = Py_BuildValue("(is)", -rc, msg);
	if (args) {
		PyErr_SetObject(rc == -ETIMEDOUT ? py__TimeoutError : py__Error, args);
		Py_DECREF(args);
	}
	return NULL;
}

PyObject *py__raise_errno(int err, const char *msg)
{
	PyObject *args = Py_BuildValue("(is)", err, msg);

	if (args) {
		PyErr_SetObject(err == ETIMEDOUT ? py__TimeoutError : py__Error, args);
		Py_DECREF(args);
	}
	return NULL;
}

static PyObject *mod_init(PyObject *mod, PyObject *args)
{
	PyTypeObject *type = &py__CommType;
	shmcoll_comm *c = NULL;
	int rc;

	if (!PyArg_ParseTuple(args, "|O!:init", &PyType_Type, &type))
		return NULL;
	if (!PyType_IsSubtype(type, &py__CommType))
		return PyErr_Format(PyExc_TypeError, "init: %.100s is not a Comm class",
		                    type->tp_name);
	NOGIL(rc = shmcoll_init(&c));
	if (rc)
		return py__raise_rc(NULL, rc);
	return py__wrap(type, c);
}

static PyObject *mod_strerror(PyObject *mod, PyObject *args)
{
	int err;

	if (!PyArg_ParseTuple(args, "i:strerror", &err))
		return NULL;
	return PyUnicode_FromString(shmcoll_strerror(err));
}

/* The mpi4py major version shmcoll.MPI answers as where 3 and 4 differ (shmcoll/_api.py). */
int py__mpi4py_api = 4;

static PyObject *mod_mpi4py_api(PyObject *mod, PyObject *args)
{
	int major;

	if (!PyArg_ParseTuple(args, "i:_mpi4py_api", &major))
		return NULL;
	if (major != 3 && major != 4) {
		PyErr_Format(PyExc_ValueError, "_mpi4py_api: %d: expected 3 or 4", major);
		return NULL;
	}
	py__mpi4py_api = major;
	Py_RETURN_NONE;
}

static PyMethodDef mod_methods[] = {
    {"init", mod_init, METH_VARARGS, "init(cls=Comm): the launcher's job."},
    {"strerror", mod_strerror, METH_VARARGS, "The fixed text of an error code."},
    {"_mem", py__mem_info, METH_VARARGS,
     "_mem(obj, writable=False) -> (address, nbytes, readonly): a buffer's memory."},
    {"_mpi4py_api", mod_mpi4py_api, METH_VARARGS,
     "_mpi4py_api(major): answer as mpi4py 3 or 4 where they differ (shmcoll/_api.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_shmcoll",
    .m_doc = "The C half of shmcoll (python/src/).",
    .m_size = -1,
    .m_methods = mod_methods,
};

int py__add(PyObject *m, const char *name, PyObject *o)
{
	if (!o)
		return -1;
	Py_INCREF(o);
	if (PyModule_AddObject(m, name, o) < 0) {
		Py_DECREF(o);
		return -1;
	}
	return 0;
}

PyMODINIT_FUNC PyInit__shmcoll(void);
PyMODINIT_FUNC PyInit__shmcoll(void)
{
	PyObject *m, *bases;

	if (PyType_Ready(&py__DatatypeType) < 0 || PyType_Ready(&py__OpType) < 0 ||
	    py__comm_type_init() < 0 || PyType_Ready(&py__RequestType) < 0 ||
	    PyType_Ready(&py__SymBufType) < 0)
		return NULL;
	m = PyModule_Create(&module);
	if (!m)
		return NULL;
	/* An OSError (its errno), and a RuntimeError as mpi4py's MPI.Exception, which it is. */
	bases = PyTuple_Pack(2, PyExc_OSError, PyExc_RuntimeError);
	py__Error =
	    bases ? PyErr_NewExceptionWithDoc(
	                "shmcoll.Error",
	                "A failed call: .errno is the positive errno, the message the library's.",
	                bases, NULL)
	          : NULL;
	Py_XDECREF(bases);
	bases = py__Error ? PyTuple_Pack(2, py__Error, PyExc_TimeoutError) : NULL;
	py__TimeoutError =
	    bases ? PyErr_NewExceptionWithDoc("shmcoll.TimeoutError",
	                                      "A wait for a peer ran out of time.", bases, NULL)
	          : NULL;
	Py_XDECREF(bases);
	bases = PyTuple_Pack(2, PyExc_ValueError, PyExc_BufferError);
	py__BufferError =
	    bases ? PyErr_NewExceptionWithDoc(
	                "shmcoll.BufferError",
	                "A buffer that is not contiguous, writable or in CPU memory.", bases, NULL)
	          : NULL;
	Py_XDECREF(bases);
	if (py__add(m, "Error", py__Error) < 0 ||
	    py__add(m, "TimeoutError", py__TimeoutError) < 0 ||
	    py__add(m, "BufferError", py__BufferError) < 0 ||
	    py__add(m, "Datatype", (PyObject *)&py__DatatypeType) ||
	    py__add(m, "Op", (PyObject *)&py__OpType) ||
	    py__add(m, "_Comm", (PyObject *)&py__CommType) ||
	    py__add(m, "Request", (PyObject *)&py__RequestType) ||
	    py__add(m, "SymmetricBuffer", (PyObject *)&py__SymBufType))
		goto fail;
	if (py__datatypes_init(m) < 0)
		goto fail;
	if (py__msg_init(m) < 0 || py__ops_init(m) < 0 ||
	    PyModule_AddIntConstant(m, "ANY_SOURCE", SHMCOLL_ANY_SOURCE) < 0 ||
	    PyModule_AddIntConstant(m, "ANY_TAG", SHMCOLL_ANY_TAG) < 0 ||
	    PyModule_AddIntConstant(m, "UNDEFINED", SHMCOLL_UNDEFINED) < 0 ||
	    PyModule_AddIntConstant(m, "PROC_NULL", PROC_NULL) < 0 ||
	    PyModule_AddStringConstant(
	        m, "__version__",
	        Py_STRINGIFY(SHMCOLL_VERSION_MAJOR) "." Py_STRINGIFY(
	            SHMCOLL_VERSION_MINOR) "." Py_STRINGIFY(SHMCOLL_VERSION_PATCH)) < 0)
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
