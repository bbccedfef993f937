/* datatype.c - the datatypes and ops of the Python package: shmcoll.INT32 ... (MPI.INT ...)
 * and shmcoll.SUM ... (MPI.SUM ...), objects naming the C API's element types and reductions. */
#include "shmcoll_py.h"

static PyObject *datatype_repr(PyObject *self)
{
	return PyUnicode_FromFormat("<shmcoll datatype %s>", ((DatatypeObject *)self)->name);
}

static PyObject *datatype_get_size(PyObject *self, PyObject *unused)
{
	return PyLong_FromSsize_t(((DatatypeObject *)self)->size);
}

static PyMethodDef datatype_methods[] = {
    {"Get_size", datatype_get_size, METH_NOARGS, "Bytes of one element."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef datatype_members[] = {
    {"size", T_PYSSIZET, offsetof(DatatypeObject, size), READONLY, "bytes of one element"},
    {"code", T_INT, offsetof(DatatypeObject, code), READONLY,
     "the C API's shmcoll_dtype, or -1 for raw bytes"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject py__DatatypeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.Datatype",
    .tp_basicsize = sizeof(DatatypeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An element type (shmcoll.FLOAT, MPI.DOUBLE, ...).",
    .tp_repr = datatype_repr,
    .tp_methods = datatype_methods,
    .tp_members = datatype_members,
};

static PyObject *op_repr(PyObject *self)
{
	return PyUnicode_FromFormat("<shmcoll op %s>", ((OpObject *)self)->name);
}

static PyMemberDef op_members[] = {
    {"code", T_INT, offsetof(OpObject, code), READONLY, "the C API's shmcoll_op"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject py__OpType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.Op",
    .tp_basicsize = sizeof(OpObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A reduction (shmcoll.SUM, MPI.MAX, ...).",
    .tp_repr = op_repr,
    .tp_members = op_members,
};

const char *const py__dtype_names[SHMCOLL_DTYPE_COUNT] = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",
    "uint64", "float16", "bfloat16", "float32", "float64",
};

/* The module's datatype objects, by shmcoll_dtype, and the bytes one. */
PyObject *py__dtypes[SHMCOLL_DTYPE_COUNT];
PyObject *py__bytes_type;
PyObject *py__ops[SHMCOLL_OP_COUNT];

int py__is_float(int dt)
{
	return dt == SHMCOLL_FLOAT16 || dt == SHMCOLL_BFLOAT16 || dt == SHMCOLL_FLOAT32 ||
	       dt == SHMCOLL_FLOAT64;
}

int py__get_op(PyObject *obj, int dt, shmcoll_op *op, const char *what)
{
	if (!PyObject_TypeCheck(obj, &py__OpType)) {
		PyErr_Format(PyExc_TypeError,
		             "%s: op must be a shmcoll op (SUM, MAX, ...), got %.100s", what,
		             Py_TYPE(obj)->tp_name);
		return -1;
	}
	*op = (shmcoll_op)((OpObject *)obj)->code;
	if ((*op == SHMCOLL_BAND || *op == SHMCOLL_BOR || *op == SHMCOLL_BXOR) &&
	    py__is_float(dt)) {
		PyErr_Format(PyExc_TypeError, "%s: %s is not defined on %s", what,
		             ((OpObject *)obj)->name, py__dtype_names[dt]);
		return -1;
	}
	return 0;
}

static PyObject *new_datatype(int code, Py_ssize_t size, const char *name)
{
	DatatypeObject *d = PyObject_New(DatatypeObject, &py__DatatypeType);

	if (d) {
		d->code = code;
		d->size = size;
		d->name = name;
	}
	return (PyObject *)d;
}

int py__datatypes_init(PyObject *m)
{
	static const char *const op_names[SHMCOLL_OP_COUNT] = {
	    "SUM", "PROD", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR",
	};
	static const char *const dtype_consts[SHMCOLL_DTYPE_COUNT] = {
	    "INT8",   "UINT8",   "INT32",    "UINT32",  "INT64",
	    "UINT64", "FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64",
	};
	int i;

	for (i = 0; i < SHMCOLL_DTYPE_COUNT; i++) {
		py__dtypes[i] = new_datatype(i, (Py_ssize_t)shmcoll_dtype_size((shmcoll_dtype)i),
		                             py__dtype_names[i]);
		if (py__add(m, dtype_consts[i], py__dtypes[i]) < 0)
			return -1;
	}
	py__bytes_type = new_datatype(BYTES, 1, "byte");
	if (py__add(m, "BYTE", py__bytes_type) < 0)
		return -1;
	for (i = 0; i < SHMCOLL_OP_COUNT; i++) {
		OpObject *o = PyObject_New(OpObject, &py__OpType);

		if (!o)
			return -1;
		o->code = i;
		o->name = op_names[i];
		py__ops[i] = (PyObject *)o;
		if (py__add(m, op_names[i], py__ops[i]) < 0)
			return -1;
	}
	return 0;
}
