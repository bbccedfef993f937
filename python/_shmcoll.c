/* _shmcoll.c - the C half of the Python package shmcoll (python/shmcoll/): the communicator
 * type and its buffer methods, the datatypes and ops, and the errors. Every method resolves
 * and checks its buffers first (a bad one raises before any rank starts the call), then
 * calls the C library with the GIL released. It uses the public API only (include/shmcoll.h),
 * as the MPI interposer does.
 *
 * Buffers. A buffer argument is one of
 *   - an object with the buffer protocol, C-contiguous (NumPy arrays, memoryview, bytearray,
 *     array.array): its format gives the element type;
 *   - a CPU torch.Tensor, contiguous (its data_ptr, numel and dtype; bfloat16 too);
 *   - mpi4py's list forms: [buf, datatype], [buf, count, datatype], [buf, count].
 * Reductions need one of the ten element types of the C API (TypeError otherwise); calls that
 * only move data move any buffer as bytes when its type is none of them.
 *
 * The method names, argument order and defaults are mpi4py's (docs/PYTHON.md); the pure-Python
 * layer (shmcoll/__init__.py, shmcoll/MPI.py) adds the object methods and the rest. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <shmcoll.h>

/* Runs stmt with the GIL released: every call that can wait. */
#define NOGIL(stmt)                                                                                \
	do {                                                                                       \
		Py_BEGIN_ALLOW_THREADS stmt;                                                       \
		Py_END_ALLOW_THREADS                                                               \
	} while (0)

/* ---- errors ---- */

static PyObject *Error;      /* shmcoll.Error(OSError) */
static PyObject *TimeoutErr; /* shmcoll.TimeoutError(shmcoll.Error, TimeoutError) */
static PyObject *BufError;   /* shmcoll.BufferError(ValueError, BufferError) */

/* Raises the library's error rc (negative) with its message on c (or the last create's). */
static PyObject *raise_rc(const shmcoll_comm *c, int rc)
{
	const char *msg = shmcoll_last_error(c);
	PyObject *args;

	if (!msg || !*msg)
		msg = shmcoll_strerror(rc);
	args = Py_BuildValue("(is)", -rc, msg);
	if (args) {
		PyErr_SetObject(rc == -ETIMEDOUT ? TimeoutErr : Error, args);
		Py_DECREF(args);
	}
	return NULL;
}

/* ---- datatypes and ops ---- */

/* A datatype: one of the C API's ten element types, or BYTES: raw bytes, which only move. */
#define BYTES (-1)

typedef struct {
	PyObject_HEAD int code; /* shmcoll_dtype or BYTES */
	Py_ssize_t size;
	const char *name;
} DatatypeObject;

typedef struct {
	PyObject_HEAD int code; /* shmcoll_op */
	const char *name;
} OpObject;

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

static PyTypeObject DatatypeType = {
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

static PyTypeObject OpType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.Op",
    .tp_basicsize = sizeof(OpObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A reduction (shmcoll.SUM, MPI.MAX, ...).",
    .tp_repr = op_repr,
    .tp_members = op_members,
};

static const char *const dtype_names[SHMCOLL_DTYPE_COUNT] = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",
    "uint64", "float16", "bfloat16", "float32", "float64",
};

/* The module's datatype objects, by shmcoll_dtype, and the bytes one. */
static PyObject *dtypes[SHMCOLL_DTYPE_COUNT];
static PyObject *bytes_type;
static PyObject *ops[SHMCOLL_OP_COUNT];
static PyObject *in_place; /* shmcoll.IN_PLACE */

static int is_float(int dt)
{
	return dt == SHMCOLL_FLOAT16 || dt == SHMCOLL_BFLOAT16 || dt == SHMCOLL_FLOAT32 ||
	       dt == SHMCOLL_FLOAT64;
}

/* The element type of a buffer format character of itemsize bytes, or BYTES. */
static int format_dtype(const char *fmt, Py_ssize_t itemsize)
{
	int signed_int;

	if (!fmt)
		return itemsize == 1 ? SHMCOLL_UINT8 : BYTES;
	if (*fmt == '@' || *fmt == '=' || *fmt == '<' || *fmt == '!' || *fmt == '>') {
		/* Host byte order only: the library reduces in host order. */
		if ((*fmt == '>' || *fmt == '!') && itemsize > 1)
			return BYTES;
		fmt++;
	}
	if (!fmt[0] || fmt[1])
		return BYTES; /* a struct or a repeat count: not one scalar */
	switch (*fmt) {
	case 'e':
		return itemsize == 2 ? SHMCOLL_FLOAT16 : BYTES;
	case 'f':
		return itemsize == 4 ? SHMCOLL_FLOAT32 : BYTES;
	case 'd':
		return itemsize == 8 ? SHMCOLL_FLOAT64 : BYTES;
	case 'b':
		return SHMCOLL_INT8;
	case 'B':
	case 'c':
		return SHMCOLL_UINT8;
	case 'i':
	case 'l':
	case 'q':
	case 'n':
		signed_int = 1;
		break;
	case 'I':
	case 'L':
	case 'Q':
	case 'N':
		signed_int = 0;
		break;
	default:
		return BYTES; /* 'h', '?', complex, pointers: move as bytes, no reduction */
	}
	switch (itemsize) {
	case 4:
		return signed_int ? SHMCOLL_INT32 : SHMCOLL_UINT32;
	case 8:
		return signed_int ? SHMCOLL_INT64 : SHMCOLL_UINT64;
	default:
		return BYTES;
	}
}

/* ---- buffers ---- */

struct buf {
	Py_buffer view; /* held when held is set */
	int held;
	int inplace; /* MPI.IN_PLACE */
	int none;    /* None (where the call ignores the buffer) */
	char *ptr;
	size_t count; /* elements of dt (bytes when dt is BYTES) */
	int dt;
	size_t es;     /* bytes of one element (1 for BYTES) */
	PyObject *obj; /* the argument (borrowed): a request keeps it alive */
};

static void buf_release(struct buf *b)
{
	if (b->held)
		PyBuffer_Release(&b->view);
	b->held = 0;
}

static size_t es_of(int dt)
{
	return dt == BYTES ? 1 : shmcoll_dtype_size((shmcoll_dtype)dt);
}

/* torch's dtypes as shmcoll's: found by name the first time a dtype object is seen, then by
 * the object itself (torch's dtypes are singletons). BYTES for one shmcoll does not reduce;
 * es is its element size. */
static struct {
	PyObject *dtype; /* a reference held, so that its address names it for good */
	int dt;
	Py_ssize_t es;
} torch_dtypes[32];
static int torch_ndtypes;

static int torch_dtype(PyObject *obj, PyObject *dtype, int *dt, Py_ssize_t *es)
{
	static const struct {
		const char *name;
		int dt;
	} tt[] = {
	    {"torch.float32", SHMCOLL_FLOAT32}, {"torch.float64", SHMCOLL_FLOAT64},
	    {"torch.float16", SHMCOLL_FLOAT16}, {"torch.bfloat16", SHMCOLL_BFLOAT16},
	    {"torch.int8", SHMCOLL_INT8},       {"torch.uint8", SHMCOLL_UINT8},
	    {"torch.int32", SHMCOLL_INT32},     {"torch.int64", SHMCOLL_INT64},
	    {"torch.uint32", SHMCOLL_UINT32},   {"torch.uint64", SHMCOLL_UINT64},
	};
	PyObject *name, *r;
	const char *dname;
	int i;

	for (i = 0; i < torch_ndtypes; i++)
		if (torch_dtypes[i].dtype == dtype) {
			*dt = torch_dtypes[i].dt;
			*es = torch_dtypes[i].es;
			return 0;
		}
	if (!(name = PyObject_Str(dtype)))
		return -1;
	if (!(dname = PyUnicode_AsUTF8(name))) {
		Py_DECREF(name);
		return -1;
	}
	*dt = BYTES;
	for (size_t k = 0; k < sizeof(tt) / sizeof(tt[0]); k++)
		if (!strcmp(dname, tt[k].name))
			*dt = tt[k].dt;
	Py_DECREF(name);
	if (!(r = PyObject_CallMethod(obj, "element_size", NULL)))
		return -1;
	*es = PyLong_AsSsize_t(r);
	Py_DECREF(r);
	if (*es <= 0)
		return PyErr_Occurred()
		           ? -1
		           : (PyErr_SetString(PyExc_TypeError, "a tensor dtype without a size"),
		              -1);
	if (torch_ndtypes < (int)(sizeof(torch_dtypes) / sizeof(torch_dtypes[0]))) {
		Py_INCREF(dtype);
		torch_dtypes[torch_ndtypes].dtype = dtype;
		torch_dtypes[torch_ndtypes].dt = *dt;
		torch_dtypes[torch_ndtypes].es = *es;
		torch_ndtypes++;
	}
	return 0;
}

/* The names torch_buf asks a tensor for, made once. */
static PyObject *s_is_contiguous, *s_is_cpu, *s_dtype, *s_data_ptr, *s_numel;

static int torch_names(void)
{
	if (s_numel)
		return 0;
	s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
	s_is_cpu = PyUnicode_InternFromString("is_cpu");
	s_dtype = PyUnicode_InternFromString("dtype");
	s_data_ptr = PyUnicode_InternFromString("data_ptr");
	s_numel = PyUnicode_InternFromString("numel");
	return s_is_contiguous && s_is_cpu && s_dtype && s_data_ptr && s_numel ? 0 : -1;
}

/* An integer a method of obj returns: 0, or -1 with an exception set. */
static int call_ull(PyObject *obj, PyObject *name, unsigned long long *v)
{
	PyObject *r = PyObject_CallMethodNoArgs(obj, name);

	if (!r)
		return -1;
	*v = PyLong_AsUnsignedLongLong(r);
	Py_DECREF(r);
	return PyErr_Occurred() ? -1 : 0;
}

/* A CPU torch.Tensor (anything with is_contiguous, is_cpu, dtype, data_ptr and numel): 0, or
 * -1 with an exception set. It runs on every call that takes a tensor, so it asks only what
 * it needs, by names made once. */
static int torch_buf(PyObject *obj, struct buf *b, const char *what)
{
	PyObject *r = NULL;
	unsigned long long ptr, n;
	Py_ssize_t es;
	int ok, dt;

	if (torch_names() < 0 || !(r = PyObject_CallMethodNoArgs(obj, s_is_contiguous)))
		return -1;
	ok = PyObject_IsTrue(r);
	Py_DECREF(r);
	if (ok <= 0) {
		if (ok == 0)
			PyErr_Format(BufError,
			             "%s: the tensor is not contiguous (use .contiguous())", what);
		return -1;
	}
	if (!(r = PyObject_GetAttr(obj, s_is_cpu)))
		return -1;
	ok = PyObject_IsTrue(r);
	Py_DECREF(r);
	if (ok <= 0) {
		if (ok == 0)
			PyErr_Format(BufError, "%s: the tensor is not in CPU memory", what);
		return -1;
	}
	if (!(r = PyObject_GetAttr(obj, s_dtype)))
		return -1;
	ok = torch_dtype(obj, r, &dt, &es);
	Py_DECREF(r);
	if (ok < 0 || call_ull(obj, s_data_ptr, &ptr) < 0 || call_ull(obj, s_numel, &n) < 0)
		return -1;
	b->ptr = (char *)(uintptr_t)ptr;
	b->dt = dt;
	if (dt == BYTES) {
		b->count = (size_t)n * (size_t)es;
		b->es = 1;
	} else {
		b->count = (size_t)n;
		b->es = (size_t)es;
	}
	return 0;
}

/* The memory of obj (no list form): 0, or -1 with an exception set. */
static int plain_buf(PyObject *obj, struct buf *b, int writable, const char *what)
{
	int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);

	if (PyObject_CheckBuffer(obj)) {
		if (PyObject_GetBuffer(obj, &b->view, flags) < 0) {
			if (PyErr_ExceptionMatches(PyExc_BufferError) ||
			    PyErr_ExceptionMatches(PyExc_ValueError)) {
				PyObject *t, *v, *tb;

				PyErr_Fetch(&t, &v, &tb);
				PyErr_NormalizeException(&t, &v, &tb);
				PyErr_Format(
				    BufError,
				    "%s: the buffer is not %s (%S): pass a C-contiguous%s "
				    "array, e.g. numpy.ascontiguousarray(...)",
				    what, writable ? "C-contiguous and writable" : "C-contiguous",
				    v ? v : Py_None, writable ? ", writable" : "");
				Py_XDECREF(t);
				Py_XDECREF(v);
				Py_XDECREF(tb);
			}
			return -1;
		}
		b->held = 1;
		b->ptr = b->view.buf;
		b->dt = format_dtype(b->view.format, b->view.itemsize);
		b->es = es_of(b->dt);
		b->count = (size_t)b->view.len / b->es;
		return 0;
	}
	if (PyObject_HasAttrString(obj, "data_ptr") && PyObject_HasAttrString(obj, "numel"))
		return torch_buf(obj, b, what);
	PyErr_Format(PyExc_TypeError,
	             "%s: expected a buffer (a NumPy array, bytearray, memoryview, torch.Tensor, "
	             "or [buf, datatype]), got %.100s",
	             what, Py_TYPE(obj)->tp_name);
	return -1;
}

/* Resolves a buffer argument: obj, IN_PLACE (if inplace_ok), None (if none_ok), or a list
 * form. 0, or -1 with an exception set (b released). */
static int get_buf(PyObject *obj, struct buf *b, int writable, int inplace_ok, int none_ok,
                   const char *what)
{
	PyObject *first, *item;
	DatatypeObject *dto = NULL;
	Py_ssize_t n, i, count = -1;
	size_t bytes;

	memset(b, 0, sizeof(*b));
	b->obj = obj;
	if (obj == in_place) {
		if (!inplace_ok) {
			PyErr_Format(PyExc_ValueError, "%s: IN_PLACE is not allowed here", what);
			return -1;
		}
		b->inplace = 1;
		return 0;
	}
	if (obj == Py_None) {
		if (!none_ok) {
			PyErr_Format(PyExc_TypeError, "%s: the buffer is None", what);
			return -1;
		}
		b->none = 1;
		b->dt = BYTES;
		b->es = 1;
		return 0;
	}
	if (!PyList_Check(obj) && !PyTuple_Check(obj))
		return plain_buf(obj, b, writable, what);
	/* mpi4py's [buf, datatype], [buf, count, datatype], [buf, count] */
	n = PySequence_Fast_GET_SIZE(obj);
	if (n < 2 || n > 3) {
		PyErr_Format(PyExc_TypeError,
		             "%s: a buffer list is [buf, datatype], [buf, count, datatype] or "
		             "[buf, count]",
		             what);
		return -1;
	}
	first = PySequence_Fast_GET_ITEM(obj, 0);
	for (i = 1; i < n; i++) {
		item = PySequence_Fast_GET_ITEM(obj, i);
		if (PyObject_TypeCheck(item, &DatatypeType)) {
			dto = (DatatypeObject *)item;
		} else if (PyLong_Check(item)) {
			count = PyLong_AsSsize_t(item);
			if (count < 0) {
				if (!PyErr_Occurred())
					PyErr_Format(PyExc_ValueError, "%s: a negative count",
					             what);
				return -1;
			}
		} else {
			PyErr_Format(
			    PyExc_TypeError,
			    "%s: in a buffer list, expected a datatype or a count, got %.100s "
			    "(count-and-displacement lists belong to the v-calls)",
			    what, Py_TYPE(item)->tp_name);
			return -1;
		}
	}
	if (plain_buf(first, b, writable, what) < 0)
		return -1;
	bytes = b->count * b->es;
	if (dto) {
		b->dt = dto->code;
		b->es = (size_t)dto->size;
		b->count = bytes / b->es;
	}
	if (count >= 0) {
		if ((size_t)count > b->count) {
			PyErr_Format(PyExc_ValueError,
			             "%s: a count of %zd elements, but the buffer holds %zu", what,
			             count, b->count);
			buf_release(b);
			return -1;
		}
		b->count = (size_t)count;
	}
	return 0;
}

static void to_bytes(struct buf *b)
{
	b->count *= b->es;
	b->es = 1;
	b->dt = BYTES;
}

/* The same element type on both sides: the send buffer's. A reduction (red) needs one of the
 * ten; a move without one moves bytes. */
static int agree(struct buf *s, struct buf *r, int red, const char *what)
{
	if (red && s->dt == BYTES) {
		PyErr_Format(PyExc_TypeError,
		             "%s: the buffer's element type has no reduction: use int8, uint8, "
		             "int32, uint32, int64, uint64, float16, bfloat16, float32 or float64",
		             what);
		return -1;
	}
	if (r && !r->inplace && !r->none && r->dt != s->dt) {
		if (red || (r->dt != BYTES && s->dt != BYTES)) {
			PyErr_Format(PyExc_TypeError,
			             "%s: the send buffer holds %s and the receive buffer %s", what,
			             s->dt == BYTES ? "bytes" : dtype_names[s->dt],
			             r->dt == BYTES ? "bytes" : dtype_names[r->dt]);
			return -1;
		}
		/* A move between a typed buffer and bytes: count both in bytes. */
		to_bytes(s);
		to_bytes(r);
	}
	return 0;
}

/* Bytes move as uint8. */
static shmcoll_dtype cdt(int dt)
{
	return dt == BYTES ? SHMCOLL_UINT8 : (shmcoll_dtype)dt;
}

static int get_op(PyObject *obj, int dt, shmcoll_op *op, const char *what)
{
	if (!PyObject_TypeCheck(obj, &OpType)) {
		PyErr_Format(PyExc_TypeError,
		             "%s: op must be a shmcoll op (SUM, MAX, ...), got %.100s", what,
		             Py_TYPE(obj)->tp_name);
		return -1;
	}
	*op = (shmcoll_op)((OpObject *)obj)->code;
	if ((*op == SHMCOLL_BAND || *op == SHMCOLL_BOR || *op == SHMCOLL_BXOR) && is_float(dt)) {
		PyErr_Format(PyExc_TypeError, "%s: %s is not defined on %s", what,
		             ((OpObject *)obj)->name, dtype_names[dt]);
		return -1;
	}
	return 0;
}

static int need(const struct buf *b, size_t count, const char *what, const char *which)
{
	if (b->count < count) {
		PyErr_Format(PyExc_ValueError, "%s: the %s buffer holds %zu elements, %zu needed",
		             what, which, b->count, count);
		return -1;
	}
	return 0;
}

/* ---- the communicator ---- */

/* c is NULL once freed. A communicator freed while symmetric buffers (shmcoll.malloc) still
 * live keeps its C communicator in parked, mapped and unusable, until the last of them goes
 * (symbuf_dealloc destroys it then). */
typedef struct {
	PyObject_HEAD shmcoll_comm *c;
	int rank, size;
	PyObject *weakrefs;
	shmcoll_comm *parked;
	Py_ssize_t nsym; /* live SymBufObjects over its memory */
	Py_ssize_t nreq; /* requests started and not yet completed */
} CommObject;

static PyTypeObject CommType;

/* ---- requests ---- */

/* A started operation. It owns its buffers until it completes: the views stay held and the
 * objects referenced (a tensor has no view), and the communicator stays alive. */
typedef struct {
	PyObject_HEAD shmcoll_request *req; /* NULL once complete */
	PyObject *comm;
	struct buf bufs[2];
	PyObject *objs[2];
	int recv;    /* a receive: Wait fills a status */
	int counted; /* in its communicator's nreq until it completes */
} RequestObject;

static PyTypeObject RequestType;

static void request_done(RequestObject *r)
{
	int i;

	for (i = 0; i < 2; i++) {
		buf_release(&r->bufs[i]);
		Py_CLEAR(r->objs[i]);
	}
	if (r->counted && !r->req) {
		((CommObject *)r->comm)->nreq--;
		r->counted = 0;
	}
}

/* Wraps a started request; takes a and b (either may be NULL) from the caller. */
static PyObject *request_new(PyObject *comm, shmcoll_request *req, struct buf *a, struct buf *b,
                             int recv)
{
	RequestObject *r = PyObject_New(RequestObject, &RequestType);
	struct buf *src[2] = {a, b};
	int i;

	if (!r) {
		/* Out of memory: the operation is started; finish it before its buffers go. */
		NOGIL(shmcoll_wait(&req, NULL));
		for (i = 0; i < 2; i++)
			if (src[i])
				buf_release(src[i]);
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

static PyObject *status_fill(PyObject *status, const shmcoll_status *st);

/* What a completed request returns: None, or raises its error. */
static PyObject *request_finish(RequestObject *r, int rc, PyObject *status,
                                const shmcoll_status *st)
{
	request_done(r);
	if (rc)
		return raise_rc(((CommObject *)r->comm)->c, rc);
	if (r->recv && !status_fill(status, st))
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

	if (Py_IS_TYPE(r, &RequestType)) {
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

		if (r != Py_None && !PyObject_TypeCheck(r, &RequestType)) {
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
		if (!PyObject_TypeCheck(r, &RequestType)) {
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

static PyTypeObject RequestType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.Request",
    .tp_basicsize = sizeof(RequestObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A started non-blocking operation (Isend, Iallreduce, ...).",
    .tp_new = PyType_GenericNew, /* a complete request; subclasses are the object requests */
    .tp_dealloc = (destructor)request_dealloc,
    .tp_methods = request_methods,
    .tp_getset = request_getset,
};

static shmcoll_comm *live(CommObject *self)
{
	if (!self->c) {
		PyObject *args = Py_BuildValue("(is)", EINVAL, "the communicator was freed");

		if (args) {
			PyErr_SetObject(Error, args);
			Py_DECREF(args);
		}
	}
	return self->c;
}

static PyObject *wrap(PyTypeObject *type, shmcoll_comm *c)
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
		return raise_rc(NULL, rc);
	return wrap(type, c);
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
				PyErr_SetObject(Error, args);
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
		raise_rc(self->c, rc);
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

	if (!live(self))
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
	if (!live(self))
		return NULL;
	shmcoll_comm_abort(self->c);
	Py_RETURN_NONE;
}

static PyObject *comm_barrier(CommObject *self, PyObject *unused)
{
	shmcoll_comm *c = live(self);
	int rc;

	if (!c)
		return NULL;
	NOGIL(rc = shmcoll_barrier(c));
	if (rc)
		return raise_rc(c, rc);
	Py_RETURN_NONE;
}

static PyObject *called(PyObject *self, shmcoll_comm *c, int rc, shmcoll_request *req, int nb,
                        struct buf *a, struct buf *b, int recv);

static PyObject *comm_ibarrier(CommObject *self, PyObject *unused)
{
	shmcoll_comm *c = live(self);
	shmcoll_request *req = NULL;
	int rc;

	if (!c)
		return NULL;
	rc = shmcoll_ibarrier(c, &req);
	return called((PyObject *)self, c, rc, req, 1, NULL, NULL, 0);
}

static PyObject *comm_split(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"color", "key", NULL};
	shmcoll_comm *c = live(self), *nc = NULL;
	int color = 0, key = 0, rc;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, "|ii:Split", kwlist, &color, &key))
		return NULL;
	if (color < 0)
		color = SHMCOLL_UNDEFINED;
	NOGIL(rc = shmcoll_comm_split(c, color, key, &nc));
	if (rc)
		return raise_rc(c, rc);
	if (!nc)
		Py_RETURN_NONE; /* MPI.COMM_NULL in mpi4py; the pure-Python layer maps it */
	return wrap(Py_TYPE(self), nc);
}

static PyObject *comm_dup(CommObject *self, PyObject *unused)
{
	shmcoll_comm *c = live(self), *nc = NULL;
	int rc;

	if (!c)
		return NULL;
	NOGIL(rc = shmcoll_comm_dup(c, &nc));
	if (rc)
		return raise_rc(c, rc);
	return wrap(Py_TYPE(self), nc);
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

/* After a call of self with buffers a and b (either NULL): the blocking call's None, the
 * started call's request (which takes the buffers), or the error raised. */
static PyObject *called(PyObject *self, shmcoll_comm *c, int rc, shmcoll_request *req, int nb,
                        struct buf *a, struct buf *b, int recv)
{
	if (rc || !nb) {
		if (a)
			buf_release(a);
		if (b)
			buf_release(b);
		if (rc)
			return raise_rc(c, rc);
		Py_RETURN_NONE;
	}
	return request_new(self, req, a, b, recv);
}

static PyObject *reduction(CommObject *self, PyObject *args, PyObject *kw, enum red_kind k,
                           const char *fmt, const char *what, int nb)
{
	shmcoll_request *req = NULL;
	static char *kwlist[] = {"sendbuf", "recvbuf", "op", "root", NULL};
	static char *kwlist_rootless[] = {"sendbuf", "recvbuf", "op", NULL};
	PyObject *so, *ro, *opo = ops[SHMCOLL_SUM];
	shmcoll_comm *c = live(self);
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
	if (get_buf(so, &s, 0, is_root, 0, what) < 0)
		return NULL;
	if (get_buf(ro, &r, 1, 0, !is_root, what) < 0) {
		buf_release(&s);
		return NULL;
	}
	if (s.inplace) {
		/* The receive buffer holds this rank's contribution. */
		s.dt = r.dt;
		s.es = r.es;
		s.count = r.count;
	}
	if (agree(&s, &r, 1, what) < 0 || get_op(opo, s.dt, &op, what) < 0 ||
	    (!r.none && need(&r, s.count, what, "receive") < 0))
		goto fail;
	sp = s.inplace ? r.ptr : s.ptr;
	NOGIL(rc = run_reduction(k, sp, r.ptr, s.count, cdt(s.dt), op, root, c, nb ? &req : NULL));
	return called((PyObject *)self, c, rc, req, nb, &s, &r, 0);
fail:
	buf_release(&s);
	buf_release(&r);
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
	shmcoll_comm *c = live(self);
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
	if (get_buf(bo, &b, root != self->rank, 0, 0, what) < 0)
		return NULL;
	if (nb)
		NOGIL(rc = shmcoll_ibcast(b.ptr, b.count, cdt(b.dt), root, c, &req));
	else
		NOGIL(rc = shmcoll_bcast(b.ptr, b.count, cdt(b.dt), root, c));
	return called((PyObject *)self, c, rc, req, nb, &b, NULL, 0);
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
	shmcoll_comm *c = live(self);
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
	if (get_buf(so, &s, 0, is_root && k != M_ALLTOALL, k == M_SCATTER && !is_root, what) < 0)
		return NULL;
	if (get_buf(ro, &r, 1, k == M_SCATTER && is_root, k == M_GATHER && !is_root, what) < 0) {
		buf_release(&s);
		return NULL;
	}
	if (k == M_SCATTER) {
		if (r.inplace) { /* the root keeps its block where it is */
			r.dt = s.dt;
			r.es = s.es;
			r.count = s.count / P;
		}
		if (!s.none && agree(&r, &s, 0, what) < 0)
			goto fail;
		n = r.count;
		if (!s.none && need(&s, n * P, what, "send") < 0)
			goto fail;
		if (r.inplace)
			r.ptr = s.ptr + (size_t)root * n * s.es;
		NOGIL(rc = run_move(k, s.ptr, r.ptr, n, cdt(r.dt), root, c, nb ? &req : NULL));
		goto done;
	}
	if (s.inplace) { /* this rank's block is in place in recvbuf */
		s.dt = r.dt;
		s.es = r.es;
		s.count = r.count / P;
	}
	if (agree(&s, &r, 0, what) < 0)
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
	if (!r.none && need(&r, n * P, what, "receive") < 0)
		goto fail;
	sp = s.inplace ? r.ptr + (size_t)self->rank * n * r.es : s.ptr;
	NOGIL(rc = run_move(k, sp, r.ptr, n, cdt(s.dt), root, c, nb ? &req : NULL));
done:
	return called((PyObject *)self, c, rc, req, nb, &s, &r, 0);
fail:
	buf_release(&s);
	buf_release(&r);
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
	PyObject *so, *ro, *opo = ops[SHMCOLL_SUM];
	shmcoll_comm *c = live(self);
	struct buf s, r;
	shmcoll_op op;
	size_t n;
	int rc;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, "OO|O:Reduce_scatter_block", kwlist, &so,
	                                       &ro, &opo))
		return NULL;
	if (get_buf(so, &s, 0, 0, 0, what) < 0)
		return NULL;
	if (get_buf(ro, &r, 1, 0, 0, what) < 0) {
		buf_release(&s);
		return NULL;
	}
	if (agree(&s, &r, 1, what) < 0 || get_op(opo, s.dt, &op, what) < 0)
		goto fail;
	n = r.count;
	if (need(&s, n * (size_t)self->size, what, "send") < 0)
		goto fail;
	NOGIL(rc = shmcoll_reduce_scatter(s.ptr, r.ptr, n, cdt(s.dt), op, c));
	buf_release(&s);
	buf_release(&r);
	if (rc)
		return raise_rc(c, rc);
	Py_RETURN_NONE;
fail:
	buf_release(&s);
	buf_release(&r);
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
		rc = shmcoll_allreduce(s->ptr, r->ptr, s->count, cdt(s->dt), SHMCOLL_SUM, c);
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
	shmcoll_comm *c = live(self);
	PyObject *so, *ro;
	struct buf s, r;
	Py_ssize_t iters;
	double secs = 0;
	int rc;

	if (!c || !PyArg_ParseTuple(args, "OOn:_allreduce_loop", &so, &ro, &iters))
		return NULL;
	if (get_buf(so, &s, 0, 0, 0, "_allreduce_loop") < 0)
		return NULL;
	if (get_buf(ro, &r, 1, 0, 0, "_allreduce_loop") < 0) {
		buf_release(&s);
		return NULL;
	}
	if (agree(&s, &r, 1, "_allreduce_loop") < 0 ||
	    need(&r, s.count, "_allreduce_loop", "receive") < 0) {
		buf_release(&s);
		buf_release(&r);
		return NULL;
	}
	NOGIL(rc = allreduce_loop(c, &s, iters, &r, &secs));
	buf_release(&s);
	buf_release(&r);
	if (rc)
		return raise_rc(c, rc);
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
	shmcoll_comm *c = live(self);
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
	if (get_buf(so, &s, 0, kind != V_ALLTOALLV && (kind != V_SCATTERV || is_root),
	            kind == V_SCATTERV && !is_root, what) < 0)
		return NULL;
	if (get_buf(ro, &r, 1, kind == V_SCATTERV && is_root, kind == V_GATHERV && !is_root, what) <
	    0) {
		buf_release(&s);
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
	} else if (agree(&s, &r, kind == V_REDUCE_SCATTER, what) < 0) {
		goto out;
	}
	if (kind == V_REDUCE_SCATTER &&
	    (agree(&s, NULL, 1, what) < 0 || get_op(opo, s.dt, &op, what) < 0))
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
			NOGIL(rc = shmcoll_allgatherv(s.ptr, s.count, r.ptr, rc_, rd, cdt(dt), c));
		else
			NOGIL(rc = shmcoll_gatherv(s.ptr, s.count, r.ptr, is_root ? rc_ : NULL,
			                           is_root ? rd : NULL, cdt(dt), root, c));
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
		                            r.count, cdt(dt), root, c));
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
		NOGIL(rc = shmcoll_alltoallv(s.ptr, sc, sd, r.ptr, rc_, rd, cdt(dt), c));
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
			if (need(&r, total, what, "receive") < 0)
				goto out;
			NOGIL(rc = shmcoll_reduce_scatterv(r.ptr, r.ptr + before * r.es, rc_,
			                                   cdt(dt), op, c));
			if (!rc && before)
				memmove(r.ptr, r.ptr + before * r.es, rc_[self->rank] * r.es);
			break;
		}
		if (need(&s, total, what, "send") < 0 ||
		    need(&r, rc_[self->rank], what, "receive") < 0)
			goto out;
		NOGIL(rc = shmcoll_reduce_scatterv(s.ptr, r.ptr, rc_, cdt(dt), op, c));
		break;
	}
	}
	if (rc)
		raise_rc(c, rc);
	else
		res = Py_NewRef(Py_None);
out:
	buf_release(&s);
	buf_release(&r);
	PyMem_Free(sc);
	PyMem_Free(sd);
	PyMem_Free(rc_);
	PyMem_Free(rd);
	return res;
}

/* ---- point to point ---- */

static PyObject *status_fill(PyObject *status, const shmcoll_status *st)
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

/* MPI's null rank: a send to it and a receive from it do nothing (a receive's status says
 * source PROC_NULL, tag ANY_TAG, no bytes). */
#define PROC_NULL (-2)

static const shmcoll_status null_status = {.source = PROC_NULL, .tag = SHMCOLL_ANY_TAG};

/* Messages travel as bytes: a receive takes up to its buffer's bytes. */
static PyObject *send(CommObject *self, PyObject *args, PyObject *kw, int nb)
{
	static char *kwlist[] = {"buf", "dest", "tag", NULL};
	const char *what = nb ? "Isend" : "Send";
	shmcoll_comm *c = live(self);
	shmcoll_request *req = NULL;
	PyObject *bo;
	struct buf b;
	int dest, tag = 0, rc;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, nb ? "Oi|i:Isend" : "Oi|i:Send", kwlist,
	                                       &bo, &dest, &tag))
		return NULL;
	if (get_buf(bo, &b, 0, 0, 0, what) < 0)
		return NULL;
	if (dest == PROC_NULL) /* a request that is complete already */
		return called((PyObject *)self, c, 0, NULL, nb, &b, NULL, 0);
	if (nb)
		NOGIL(rc = shmcoll_isend(b.ptr, b.count * b.es, SHMCOLL_UINT8, dest, tag, c, &req));
	else
		NOGIL(rc = shmcoll_send(b.ptr, b.count * b.es, SHMCOLL_UINT8, dest, tag, c));
	return called((PyObject *)self, c, rc, req, nb, &b, NULL, 0);
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
	shmcoll_comm *c = live(self);
	shmcoll_request *req = NULL;
	int src = SHMCOLL_ANY_SOURCE, tag = SHMCOLL_ANY_TAG, rc;
	PyObject *bo;
	struct buf b;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, "O|ii:Irecv", kwlist, &bo, &src, &tag))
		return NULL;
	if (get_buf(bo, &b, 1, 0, 0, "Irecv") < 0)
		return NULL;
	if (src == PROC_NULL)
		return called((PyObject *)self, c, 0, NULL, 1, &b, NULL, 0);
	NOGIL(rc = shmcoll_irecv(b.ptr, b.count * b.es, SHMCOLL_UINT8, src, tag, c, &req));
	return called((PyObject *)self, c, rc, req, 1, &b, NULL, 1);
}

static PyObject *comm_recv(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"buf", "source", "tag", "status", NULL};
	shmcoll_comm *c = live(self);
	PyObject *bo, *so = Py_None;
	shmcoll_status st = {0};
	struct buf b;
	int src = SHMCOLL_ANY_SOURCE, tag = SHMCOLL_ANY_TAG, rc;

	if (!c ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "O|iiO:Recv", kwlist, &bo, &src, &tag, &so))
		return NULL;
	if (get_buf(bo, &b, 1, 0, 0, "Recv") < 0)
		return NULL;
	if (src == PROC_NULL) {
		rc = 0;
		st = null_status;
	} else {
		NOGIL(rc = shmcoll_recv(b.ptr, b.count * b.es, SHMCOLL_UINT8, src, tag, c, &st));
	}
	buf_release(&b);
	if (rc)
		return raise_rc(c, rc);
	if (!status_fill(so, &st))
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *comm_sendrecv(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"sendbuf", "dest",    "sendtag", "recvbuf",
	                         "source",  "recvtag", "status",  NULL};
	shmcoll_comm *c = live(self);
	PyObject *so, *ro = Py_None, *sto = Py_None;
	shmcoll_status st = {0};
	struct buf s, r;
	int dest, stag = 0, src = SHMCOLL_ANY_SOURCE, rtag = SHMCOLL_ANY_TAG, rc;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, "Oi|iOiiO:Sendrecv", kwlist, &so, &dest,
	                                       &stag, &ro, &src, &rtag, &sto))
		return NULL;
	if (get_buf(so, &s, 0, 0, 0, "Sendrecv") < 0)
		return NULL;
	if (get_buf(ro, &r, 1, 0, 0, "Sendrecv") < 0) {
		buf_release(&s);
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
	buf_release(&s);
	buf_release(&r);
	if (rc)
		return raise_rc(c, rc);
	if (!status_fill(sto, &st))
		return NULL;
	Py_RETURN_NONE;
}

/* Probe(source=ANY_SOURCE, tag=ANY_TAG, status=None): waits for a matching message; Iprobe
 * returns whether one is there. The status's nbytes is the message's size. */
static PyObject *probe(CommObject *self, PyObject *args, PyObject *kw, int blocking)
{
	static char *kwlist[] = {"source", "tag", "status", NULL};
	shmcoll_comm *c = live(self);
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
		return raise_rc(c, rc);
	if (flag && !status_fill(so, &st))
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

/* ---- symmetric memory (shmcoll.malloc) ---- */

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

static PyTypeObject SymBufType;

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

static PyTypeObject SymBufType = {
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
		PyErr_SetObject(err == ETIMEDOUT ? TimeoutErr : Error, args);
		Py_DECREF(args);
	}
	return NULL;
}

/* _malloc(nbytes) -> SymmetricBuffer: collective, every rank the same nbytes (> 0). */
static PyObject *comm_malloc(CommObject *self, PyObject *args)
{
	shmcoll_comm *c = live(self);
	SymBufObject *b;
	Py_ssize_t n;
	void *p;

	if (!c || !PyArg_ParseTuple(args, "n:_malloc", &n))
		return NULL;
	if (n <= 0)
		return PyErr_Format(PyExc_ValueError,
		                    "malloc: %zd bytes (shmcoll_malloc takes 1 or more)", n);
	/* Made first: no failure of this rank alone after the collective call. */
	b = PyObject_New(SymBufObject, &SymBufType);
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
	r = comm_barrier(self, NULL);
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

#define KW(f) ((PyCFunction)(void (*)(void))(f))
static PyMethodDef comm_methods[] = {
    {"Get_rank", (PyCFunction)comm_get_rank, METH_NOARGS, "This rank."},
    {"Get_size", (PyCFunction)comm_get_size, METH_NOARGS, "The number of ranks."},
    {"Free", (PyCFunction)comm_free, METH_NOARGS, "Releases this rank's communicator."},
    {"Abort", (PyCFunction)comm_abort, METH_VARARGS,
     "Abort(errorcode=1): breaks the communicator for every rank and ends this process."},
    {"Break", (PyCFunction)comm_break, METH_NOARGS,
     "Breaks the communicator for every rank without ending this process."},
    {"Barrier", (PyCFunction)comm_barrier, METH_NOARGS, "Waits for every rank."},
    {"Split", KW(comm_split), METH_VARARGS | METH_KEYWORDS, "Split(color=0, key=0)"},
    {"Dup", (PyCFunction)comm_dup, METH_NOARGS, "A new communicator over the same ranks."},
    {"Bcast", KW(comm_bcast), METH_VARARGS | METH_KEYWORDS, "Bcast(buf, root=0)"},
    {"Ibcast", KW(comm_ibcast), METH_VARARGS | METH_KEYWORDS, "Ibcast(buf, root=0) -> Request"},
    {"Ibarrier", (PyCFunction)comm_ibarrier, METH_NOARGS, "Ibarrier() -> Request"},
    {"Iallreduce", KW(comm_iallreduce), METH_VARARGS | METH_KEYWORDS,
     "Iallreduce(sendbuf, recvbuf, op=SUM) -> Request"},
    {"Ireduce", KW(comm_ireduce), METH_VARARGS | METH_KEYWORDS,
     "Ireduce(sendbuf, recvbuf, op=SUM, root=0) -> Request"},
    {"Iscan", KW(comm_iscan), METH_VARARGS | METH_KEYWORDS, "Iscan(sendbuf, recvbuf, op=SUM)"},
    {"Iexscan", KW(comm_iexscan), METH_VARARGS | METH_KEYWORDS,
     "Iexscan(sendbuf, recvbuf, op=SUM)"},
    {"Iallgather", KW(comm_iallgather), METH_VARARGS | METH_KEYWORDS,
     "Iallgather(sendbuf, recvbuf) -> Request"},
    {"Igather", KW(comm_igather), METH_VARARGS | METH_KEYWORDS,
     "Igather(sendbuf, recvbuf, root=0) -> Request"},
    {"Iscatter", KW(comm_iscatter), METH_VARARGS | METH_KEYWORDS,
     "Iscatter(sendbuf, recvbuf, root=0) -> Request"},
    {"Ialltoall", KW(comm_ialltoall), METH_VARARGS | METH_KEYWORDS,
     "Ialltoall(sendbuf, recvbuf) -> Request"},
    {"_allreduce_loop", (PyCFunction)comm_allreduce_loop, METH_VARARGS,
     "_allreduce_loop(sendbuf, recvbuf, iters) -> seconds: the same calls made from C"},
    {"_malloc", (PyCFunction)comm_malloc, METH_VARARGS,
     "_malloc(nbytes) -> SymmetricBuffer: shmcoll_malloc (collective), as writable bytes"},
    {"_vcall", (PyCFunction)comm_vcall, METH_VARARGS,
     "_vcall(kind, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, root, op)"},
    {"Isend", KW(comm_isend), METH_VARARGS | METH_KEYWORDS, "Isend(buf, dest, tag=0) -> Request"},
    {"Irecv", KW(comm_irecv), METH_VARARGS | METH_KEYWORDS,
     "Irecv(buf, source=ANY_SOURCE, tag=ANY_TAG) -> Request"},
    {"Allreduce", KW(comm_allreduce), METH_VARARGS | METH_KEYWORDS,
     "Allreduce(sendbuf, recvbuf, op=SUM)"},
    {"Reduce", KW(comm_reduce), METH_VARARGS | METH_KEYWORDS,
     "Reduce(sendbuf, recvbuf, op=SUM, root=0)"},
    {"Scan", KW(comm_scan), METH_VARARGS | METH_KEYWORDS, "Scan(sendbuf, recvbuf, op=SUM)"},
    {"Exscan", KW(comm_exscan), METH_VARARGS | METH_KEYWORDS, "Exscan(sendbuf, recvbuf, op=SUM)"},
    {"Allgather", KW(comm_allgather), METH_VARARGS | METH_KEYWORDS, "Allgather(sendbuf, recvbuf)"},
    {"Gather", KW(comm_gather), METH_VARARGS | METH_KEYWORDS, "Gather(sendbuf, recvbuf, root=0)"},
    {"Scatter", KW(comm_scatter), METH_VARARGS | METH_KEYWORDS,
     "Scatter(sendbuf, recvbuf, root=0)"},
    {"Alltoall", KW(comm_alltoall), METH_VARARGS | METH_KEYWORDS, "Alltoall(sendbuf, recvbuf)"},
    {"Reduce_scatter_block", KW(comm_reduce_scatter_block), METH_VARARGS | METH_KEYWORDS,
     "Reduce_scatter_block(sendbuf, recvbuf, op=SUM)"},
    {"Send", KW(comm_send), METH_VARARGS | METH_KEYWORDS, "Send(buf, dest, tag=0)"},
    {"Recv", KW(comm_recv), METH_VARARGS | METH_KEYWORDS,
     "Recv(buf, source=ANY_SOURCE, tag=ANY_TAG, status=None)"},
    {"Sendrecv", KW(comm_sendrecv), METH_VARARGS | METH_KEYWORDS,
     "Sendrecv(sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, "
     "status=None)"},
    {"Probe", KW(comm_probe), METH_VARARGS | METH_KEYWORDS,
     "Probe(source=ANY_SOURCE, tag=ANY_TAG, status=None)"},
    {"Iprobe", KW(comm_iprobe), METH_VARARGS | METH_KEYWORDS,
     "Iprobe(source=ANY_SOURCE, tag=ANY_TAG, status=None) -> bool"},
    {"__enter__", comm_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)comm_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CommType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll._Comm",
    .tp_basicsize = sizeof(CommObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Comm(rank, size, job, arena_bytes=0, timeout_ms=0): one rank's communicator.",
    .tp_new = comm_new,
    .tp_dealloc = (destructor)comm_dealloc,
    .tp_methods = comm_methods,
    .tp_getset = comm_getset,
    .tp_weaklistoffset = offsetof(CommObject, weakrefs),
};

/* init(cls) -> cls: the launcher's job (shmcoll_init). */
static PyObject *mod_init(PyObject *mod, PyObject *args)
{
	PyTypeObject *type = &CommType;
	shmcoll_comm *c = NULL;
	int rc;

	if (!PyArg_ParseTuple(args, "|O!:init", &PyType_Type, &type))
		return NULL;
	if (!PyType_IsSubtype(type, &CommType))
		return PyErr_Format(PyExc_TypeError, "init: %.100s is not a Comm class",
		                    type->tp_name);
	NOGIL(rc = shmcoll_init(&c));
	if (rc)
		return raise_rc(NULL, rc);
	return wrap(type, c);
}

static PyObject *mod_strerror(PyObject *mod, PyObject *args)
{
	int err;

	if (!PyArg_ParseTuple(args, "i:strerror", &err))
		return NULL;
	return PyUnicode_FromString(shmcoll_strerror(err));
}

static PyMethodDef mod_methods[] = {
    {"init", mod_init, METH_VARARGS, "init(cls=Comm): the launcher's job."},
    {"strerror", mod_strerror, METH_VARARGS, "The fixed text of an error code."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_shmcoll",
    .m_doc = "The C half of shmcoll (python/_shmcoll.c).",
    .m_size = -1,
    .m_methods = mod_methods,
};

static PyObject *new_datatype(int code, Py_ssize_t size, const char *name)
{
	DatatypeObject *d = PyObject_New(DatatypeObject, &DatatypeType);

	if (d) {
		d->code = code;
		d->size = size;
		d->name = name;
	}
	return (PyObject *)d;
}

static int add(PyObject *m, const char *name, PyObject *o)
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
	static const char *const op_names[SHMCOLL_OP_COUNT] = {
	    "SUM", "PROD", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR",
	};
	static const char *const dtype_consts[SHMCOLL_DTYPE_COUNT] = {
	    "INT8",   "UINT8",   "INT32",    "UINT32",  "INT64",
	    "UINT64", "FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64",
	};
	PyObject *m, *bases;
	int i;

	if (PyType_Ready(&DatatypeType) < 0 || PyType_Ready(&OpType) < 0 ||
	    PyType_Ready(&CommType) < 0 || PyType_Ready(&RequestType) < 0 ||
	    PyType_Ready(&SymBufType) < 0)
		return NULL;
	m = PyModule_Create(&module);
	if (!m)
		return NULL;
	Error = PyErr_NewExceptionWithDoc(
	    "shmcoll.Error",
	    "A failed call: .errno is the positive errno, the message the library's.",
	    PyExc_OSError, NULL);
	bases = Error ? PyTuple_Pack(2, Error, PyExc_TimeoutError) : NULL;
	TimeoutErr =
	    bases ? PyErr_NewExceptionWithDoc("shmcoll.TimeoutError",
	                                      "A wait for a peer ran out of time.", bases, NULL)
	          : NULL;
	Py_XDECREF(bases);
	bases = PyTuple_Pack(2, PyExc_ValueError, PyExc_BufferError);
	BufError =
	    bases ? PyErr_NewExceptionWithDoc(
	                "shmcoll.BufferError",
	                "A buffer that is not contiguous, writable or in CPU memory.", bases, NULL)
	          : NULL;
	Py_XDECREF(bases);
	if (add(m, "Error", Error) < 0 || add(m, "TimeoutError", TimeoutErr) < 0 ||
	    add(m, "BufferError", BufError) < 0 || add(m, "Datatype", (PyObject *)&DatatypeType) ||
	    add(m, "Op", (PyObject *)&OpType) || add(m, "_Comm", (PyObject *)&CommType) ||
	    add(m, "Request", (PyObject *)&RequestType) ||
	    add(m, "SymmetricBuffer", (PyObject *)&SymBufType))
		goto fail;
	for (i = 0; i < SHMCOLL_DTYPE_COUNT; i++) {
		dtypes[i] = new_datatype(i, (Py_ssize_t)shmcoll_dtype_size((shmcoll_dtype)i),
		                         dtype_names[i]);
		if (add(m, dtype_consts[i], dtypes[i]) < 0)
			goto fail;
	}
	bytes_type = new_datatype(BYTES, 1, "byte");
	if (add(m, "BYTE", bytes_type) < 0)
		goto fail;
	for (i = 0; i < SHMCOLL_OP_COUNT; i++) {
		OpObject *o = PyObject_New(OpObject, &OpType);

		if (!o)
			goto fail;
		o->code = i;
		o->name = op_names[i];
		ops[i] = (PyObject *)o;
		if (add(m, op_names[i], ops[i]) < 0)
			goto fail;
	}
	in_place = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
	if (add(m, "IN_PLACE", in_place) < 0 ||
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
