/* buffer.c - the memory of a buffer argument. A buffer argument is one of
 *   - an object with the buffer protocol, C-contiguous (NumPy arrays, memoryview, bytearray,
 *     array.array): its format gives the element type;
 *   - a CPU torch.Tensor, contiguous (its data_ptr, numel and dtype; bfloat16 too);
 *   - mpi4py's list forms: [buf, datatype], [buf, count, datatype], [buf, count].
 * Reductions need one of the ten element types of the C API (TypeError otherwise); calls that
 * only move data move any buffer as bytes when its type is none of them. */
#include "shmcoll_py.h"

#include <string.h>

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

void py__buf_release(struct buf *b)
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
			PyErr_Format(py__BufferError,
			             "%s: the tensor is not contiguous (use .contiguous())", what);
		return -1;
	}
	if (!(r = PyObject_GetAttr(obj, s_is_cpu)))
		return -1;
	ok = PyObject_IsTrue(r);
	Py_DECREF(r);
	if (ok <= 0) {
		if (ok == 0)
			PyErr_Format(py__BufferError, "%s: the tensor is not in CPU memory", what);
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
				    py__BufferError,
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
int py__get_buf(PyObject *obj, struct buf *b, int writable, int inplace_ok, int none_ok,
                const char *what)
{
	PyObject *first, *item;
	DatatypeObject *dto = NULL;
	Py_ssize_t n, i, count = -1;
	size_t bytes;

	memset(b, 0, sizeof(*b));
	b->obj = obj;
	if (obj == py__in_place) {
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
		if (PyObject_TypeCheck(item, &py__DatatypeType)) {
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
			py__buf_release(b);
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
int py__agree(struct buf *s, struct buf *r, int red, const char *what)
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
			             s->dt == BYTES ? "bytes" : py__dtype_names[s->dt],
			             r->dt == BYTES ? "bytes" : py__dtype_names[r->dt]);
			return -1;
		}
		/* A move between a typed buffer and bytes: count both in bytes. */
		to_bytes(s);
		to_bytes(r);
	}
	return 0;
}

int py__need(const struct buf *b, size_t count, const char *what, const char *which)
{
	if (b->count < count) {
		PyErr_Format(PyExc_ValueError, "%s: the %s buffer holds %zu elements, %zu needed",
		             what, which, b->count, count);
		return -1;
	}
	return 0;
}
