/* message.c - message specifications, read exactly as mpi4py reads them (its msgbuffer),
 * in one place for every call:
 *
 *   buf                              a buffer alone: the datatype from its format, the
 *                                    count from its length
 *   [buf, datatype]                  datatype: a Datatype, or a typecode ("i", "d" ...)
 *   [buf, count]  [buf, (count, displ)]
 *   [buf, count, datatype]  [buf, (count, displ), datatype]  [buf, count, displ, datatype]
 *   [None, 0, datatype], [BOTTOM, count, datatype]   no buffer (absolute addresses)
 *
 * and for the variable-count calls the vector forms [buf, counts, displs, datatype],
 * [buf, (counts, displs), datatype], [buf, counts], [buf, datatype] and a buffer alone,
 * with counts inferred by splitting the buffer evenly, an int count meaning the same for
 * every block, an int displacement a stride. A count left out of a block message of n
 * blocks (Gather's receive, Scatter's and Alltoall's send) is the buffer's elements / n.
 *
 * The exceptions are mpi4py's: TypeError for what is not a message, ValueError for counts
 * and displacements that do not fit, KeyError for a typecode no datatype has. Every check
 * runs on the calling rank before it takes part in a call. */
#include "shmcoll_py.h"

#include <errno.h>
#include <string.h>

PyObject *py__in_place, *py__bottom;

/* BOTTOM and IN_PLACE are ints of MPI's values (0 and 1, as Open MPI's), of their own types
 * so that they print by name, as mpi4py's. */
static PyObject *const_repr(PyObject *self)
{
	return PyUnicode_FromString(self == py__bottom ? "BOTTOM" : "IN_PLACE");
}

static PyTypeObject BottomType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.BottomType",
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The type of BOTTOM: a buffer whose datatype holds absolute addresses.",
    .tp_repr = const_repr,
};

static PyTypeObject InPlaceType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.InPlaceType",
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The type of IN_PLACE: a call's data in its receive buffer.",
    .tp_repr = const_repr,
};

int py__msg_init(PyObject *m)
{
	BottomType.tp_base = &PyLong_Type;
	InPlaceType.tp_base = &PyLong_Type;
	if (PyType_Ready(&BottomType) < 0 || PyType_Ready(&InPlaceType) < 0)
		return -1;
	py__bottom = PyObject_CallFunction((PyObject *)&BottomType, "i", 0);
	py__in_place = PyObject_CallFunction((PyObject *)&InPlaceType, "i", 1);
	return py__add(m, "BOTTOM", py__bottom) < 0 || py__add(m, "IN_PLACE", py__in_place) < 0 ||
	               py__buffer_init(m) < 0
	           ? -1
	           : 0;
}

/* mpi4py's is_integral: an index that is not a sequence. */
static int is_integral(PyObject *o)
{
	if (!PyIndex_Check(o))
		return 0;
	if (!PySequence_Check(o))
		return 1;
	if (PySequence_Size(o) >= 0)
		return 0;
	PyErr_Clear();
	return 1;
}

/* mpi4py's is_datatype: a Datatype or a typecode string; and, beyond mpi4py, a NumPy dtype
 * (an object with a typecode in .char that is no integer), which py__dt_get maps. */
static int is_datatype(PyObject *o)
{
	if (PyObject_TypeCheck(o, &py__DatatypeType) || PyUnicode_Check(o))
		return 1;
	if (PyIndex_Check(o) || PyTuple_Check(o) || PyList_Check(o))
		return 0;
	return PyObject_HasAttrString(o, "char") && PyObject_HasAttrString(o, "itemsize");
}

static int as_ssize(PyObject *o, Py_ssize_t *v)
{
	*v = PyNumber_AsSsize_t(o, PyExc_OverflowError);
	return *v == -1 && PyErr_Occurred() ? -1 : 0;
}

/* A message about to be read from obj (held): every field as for nothing yet; the memory's
 * fields are set by py__mem_get, or here for a message without a buffer. A message is
 * read once per call, so this is on every call's path: no more than it needs. */
static void msg_start(struct msg *m, PyObject *obj)
{
	m->mem.held = 0;
	m->mem.ptr = NULL;
	m->mem.len = 0;
	m->mem.format = NULL;
	m->mem.dtype = NULL;
	m->mem.keep = NULL;
	m->ignored = m->inplace = 0;
	m->addr = NULL;
	m->count = 0;
	m->counts = m->displs = NULL;
	m->type = NULL;
	Py_INCREF(obj);
	m->obj = obj;
}

void py__msg_ignore(struct msg *m)
{
	memset(m, 0, sizeof(*m));
	m->ignored = 1;
}

void py__msg_in_place(struct msg *m)
{
	/* m is a call's (zeroed by py__call_init): nothing else to clear. */
	m->ignored = 0;
	m->inplace = 1;
}

void py__msg_release(struct msg *m)
{
	py__mem_release(&m->mem);
	PyMem_Free(m->counts);
	PyMem_Free(m->displs);
	Py_CLEAR(m->type);
	Py_CLEAR(m->obj);
	m->counts = m->displs = NULL;
}

/* None for a count, a displacement or a datatype means it is left out, as in mpi4py. */
static void absent(PyObject **count, PyObject **displ, PyObject **type)
{
	if (*count == Py_None)
		*count = NULL;
	if (*displ == Py_None)
		*displ = NULL;
	if (*type == Py_None)
		*type = NULL;
}

/* The parts of a message list: buf, count (or counts), displ (or displs), type; any may be
 * NULL. vector: a 2-item list's second item is counts unless a tuple (counts, displs), and
 * only a tuple splits (mpi4py's message_vector); simple: a list splits too. */
static int unpack_list(PyObject *obj, int vector, PyObject **buf, PyObject **count,
                       PyObject **displ, PyObject **type)
{
	Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
	PyObject **it = PySequence_Fast_ITEMS(obj);

	*count = *displ = *type = NULL;
	switch (n) {
	case 2:
		*buf = it[0];
		if (is_datatype(it[1]))
			*type = it[1];
		else
			*count = it[1];
		break;
	case 3:
		*buf = it[0];
		*count = it[1];
		*type = it[2];
		break;
	case 4:
		*buf = it[0];
		*count = it[1];
		*displ = it[2];
		*type = it[3];
		absent(count, displ, type);
		return 0;
	default:
		PyErr_SetString(PyExc_ValueError, "message: expecting 2 to 4 items");
		return -1;
	}
	if (*type == Py_None)
		*type = NULL; /* no datatype: the buffer's own */
	if (*count && (PyTuple_Check(*count) || (!vector && PyList_Check(*count)))) {
		/* (count, displ) */
		PyObject *pair = *count;

		if (PySequence_Fast_GET_SIZE(pair) != 2) {
			PyErr_Format(PyExc_ValueError,
			             "message: expecting (count, displacement), got %zd items",
			             PySequence_Fast_GET_SIZE(pair));
			return -1;
		}
		*count = PySequence_Fast_GET_ITEM(pair, 0);
		*displ = PySequence_Fast_GET_ITEM(pair, 1);
	}
	absent(count, displ, type);
	return 0;
}

/* The datatype of elements of n bytes that no datatype names (a NumPy record, a DLPack or
 * torch dtype without one, a typestr's void): n bytes, contiguous (BYTE for 1), made once
 * per size. Such a buffer moves as its bytes, and takes the bitwise ops, as shmcoll's
 * contract says (mpi4py raises KeyError for a format it cannot map); and a count counts its
 * elements, as for any buffer. A borrowed reference, or NULL with an exception set. */
static DatatypeObject *bytes_type(Py_ssize_t n)
{
	static PyObject *made; /* {n: Datatype} */
	PyObject *key, *t, *c;

	if (n <= 1)
		return py__dt_byte;
	if (!made && !(made = PyDict_New()))
		return NULL;
	if (!(key = PyLong_FromSsize_t(n)))
		return NULL;
	t = PyDict_GetItemWithError(made, key);
	if (!t && !PyErr_Occurred()) {
		c = PyObject_CallMethod((PyObject *)py__dt_byte, "Create_contiguous", "n", n);
		t = c ? PyObject_CallMethod(c, "Commit", NULL) : NULL;
		Py_XDECREF(t); /* Commit returns the type itself, which c holds */
		if (t && PyDict_SetItem(made, key, c) < 0)
			t = NULL;
		Py_XDECREF(c);
	}
	Py_DECREF(key);
	return (DatatypeObject *)t;
}

/* A buffer's format of non-native byte order, as the mpi4py chosen answers it: mpi4py 4
 * raises BufferError (shmcoll's, also a ValueError), mpi4py 3 KeyError with the format
 * (no datatype is named so). Either way nothing moves that a datatype would misread.
 * Returns NULL. */
static DatatypeObject *non_native(const char *format)
{
	PyObject *key;

	if (py__mpi4py_api >= 4) {
		PyErr_Format(py__BufferError,
		             "message: format '%s' with non-native byte order: pass a datatype "
		             "([buf, MPI.INT] ...) or a native array",
		             format);
		return NULL;
	}
	if ((key = PyUnicode_FromString(format))) {
		PyErr_SetObject(PyExc_KeyError, key);
		Py_DECREF(key);
	}
	return NULL;
}

/* The datatype a buffer names itself (no datatype given): a tensor's or DLPack array's
 * dtype, else its format's (py__dt_of_format: ValueError for a non-native byte order,
 * KeyError for a format no datatype has); one whose size is not the buffer's item size
 * gives way to bytes_type, so that the element is always the buffer's own. A borrowed
 * reference, or NULL. */
static DatatypeObject *own_type(const struct mem *mem)
{
	DatatypeObject *t = mem->dtype;
	Py_ssize_t n = mem->itemsize > 0 ? mem->itemsize : 1;

	if (!t && !(t = py__dt_of_format(mem->format))) {
		if (PyErr_ExceptionMatches(PyExc_ValueError)) {
			PyErr_Clear();
			return non_native(mem->format ? mem->format : "B");
		}
		if (!PyErr_ExceptionMatches(PyExc_KeyError))
			return NULL;
		PyErr_Clear();
	}
	return t && t->size == n ? t : bytes_type(n);
}

/* mpi4py's message_basic: the memory and the datatype. */
static int basic(PyObject *buf, PyObject *type, int readonly, struct msg *m)
{
	DatatypeObject *t;

	if (buf == Py_None || buf == py__bottom) {
		/* No buffer (BOTTOM: absolute addresses): the datatype must be given. */
		if (!type) {
			PyErr_SetObject(PyExc_KeyError, Py_None);
			return -1;
		}
		if (!(t = py__dt_get(type)))
			return -1;
		m->addr = NULL;
		Py_INCREF(t);
		m->type = t;
		return 0;
	}
	if (py__mem_get(buf, !readonly, &m->mem) < 0)
		return -1;
	t = type ? py__dt_get(type) : own_type(&m->mem);
	if (!t)
		return -1;
	Py_INCREF(t);
	m->type = t;
	m->addr = m->mem.ptr;
	return 0;
}

static int null_type(const DatatypeObject *t)
{
	return !PyObject_IsTrue((PyObject *)t);
}

/* Splits the message object into its parts: 0, or -1 with mpi4py's error. */
static int parts(PyObject *obj, int vector, PyObject **buf, PyObject **count, PyObject **displ,
                 PyObject **type)
{
	*buf = *count = *displ = *type = NULL;
	if (PyObject_CheckBuffer(obj)) {
		*buf = obj;
		return 0;
	}
	if (PyList_Check(obj) || PyTuple_Check(obj))
		return unpack_list(obj, vector, buf, count, displ, type);
	if (py__is_buffer(obj)) {
		*buf = obj;
		return 0;
	}
	PyErr_SetString(PyExc_TypeError, "message: expecting buffer or list/tuple");
	return -1;
}

int py__msg_simple(PyObject *obj, int readonly, int blocks, struct msg *m)
{
	PyObject *ob, *oc, *od, *ot;
	Py_ssize_t count = 0, displ = 0, extent, length;

	msg_start(m, obj);
	if (parts(obj, 0, &ob, &oc, &od, &ot) < 0 || basic(ob, ot, readonly, m) < 0)
		goto fail;
	extent = py__extent(m->type);
	length = m->mem.len;
	if (od) {
		if (as_ssize(od, &displ) < 0)
			goto fail;
		if (displ < 0) {
			PyErr_Format(PyExc_ValueError, "message: negative diplacement %zd", displ);
			goto fail;
		}
		if (displ > 0) {
			if (null_type(m->type)) {
				PyErr_SetString(
				    PyExc_ValueError,
				    "message: cannot handle diplacement, datatype is null");
				goto fail;
			}
			if (extent <= 0) {
				PyErr_Format(
				    PyExc_ValueError,
				    "message: cannot handle diplacement, datatype extent %zd "
				    "(lb:%zd, ub:%zd)",
				    extent, m->type->lb, m->type->ub);
				goto fail;
			}
			if (m->addr && displ * extent > length) {
				PyErr_Format(PyExc_ValueError,
				             "message: displacement %zd out of bounds, number of "
				             "datatype entries %zd",
				             displ, length / extent);
				goto fail;
			}
			m->addr = (char *)((uintptr_t)m->addr + (uintptr_t)(displ * extent));
			length -= displ * extent;
		}
	}
	if (oc) {
		if (as_ssize(oc, &count) < 0)
			goto fail;
		if (count < 0) {
			PyErr_Format(PyExc_ValueError, "message: negative count %zd", count);
			goto fail;
		}
		if (count > 0 && ob == Py_None) {
			PyErr_Format(PyExc_ValueError, "message: buffer is None but count is %zd",
			             count);
			goto fail;
		}
	} else if (length > 0) {
		if (null_type(m->type)) {
			PyErr_SetString(PyExc_ValueError,
			                "message: cannot infer count, datatype is null");
			goto fail;
		}
		if (extent <= 0) {
			PyErr_Format(PyExc_ValueError,
			             "message: cannot infer count, datatype extent %zd (lb:%zd, "
			             "ub:%zd)",
			             extent, m->type->lb, m->type->ub);
			goto fail;
		}
		if (length % extent) {
			PyErr_Format(PyExc_ValueError,
			             "message: cannot infer count, buffer length %zd is not a "
			             "multiple of datatype extent %zd (lb:%zd, ub:%zd)",
			             length, extent, m->type->lb, m->type->ub);
			goto fail;
		}
		count = length / extent;
		if (blocks > 1) {
			if (count % blocks) {
				PyErr_Format(
				    PyExc_ValueError,
				    "message: cannot infer count, number of entries %zd is "
				    "not a multiple of required number of blocks %d",
				    count, blocks);
				goto fail;
			}
			count /= blocks;
		}
	}
	if (count > 0 && null_type(m->type)) {
		py__raise_errno(EINVAL, "message: the datatype is DATATYPE_NULL");
		goto fail;
	}
	m->count = count;
	return 0;
fail:
	py__msg_release(m);
	return -1;
}

/* counts or displacements: a sequence of exactly n ints (mpi4py's chkarray). */
static Py_ssize_t *chkarray(PyObject *obj, Py_ssize_t n)
{
	PyObject *seq = PySequence_Fast(obj, "message: expecting a sequence of integers");
	Py_ssize_t i, *a;

	if (!seq)
		return NULL;
	if (PySequence_Fast_GET_SIZE(seq) != n) {
		PyErr_Format(PyExc_ValueError, "expecting %zd items, got %zd", n,
		             PySequence_Fast_GET_SIZE(seq));
		Py_DECREF(seq);
		return NULL;
	}
	a = PyMem_Malloc(sizeof(*a) * (size_t)(n ? n : 1));
	if (!a) {
		Py_DECREF(seq);
		PyErr_NoMemory();
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (as_ssize(PySequence_Fast_GET_ITEM(seq, i), &a[i]) < 0) {
			PyMem_Free(a);
			Py_DECREF(seq);
			return NULL;
		}
	Py_DECREF(seq);
	return a;
}

static Py_ssize_t *newarray(Py_ssize_t n)
{
	Py_ssize_t *a = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*a));

	if (!a)
		PyErr_NoMemory();
	return a;
}

int py__msg_vector(PyObject *obj, int readonly, int blocks, struct msg *m)
{
	PyObject *ob, *oc, *od, *ot;
	Py_ssize_t i, extent, v;

	msg_start(m, obj);
	if (parts(obj, 1, &ob, &oc, &od, &ot) < 0 || basic(ob, ot, readonly, m) < 0)
		goto fail;
	extent = py__extent(m->type);
	if (!oc) {
		Py_ssize_t total = 0;

		if (m->mem.len > 0) {
			if (null_type(m->type)) {
				PyErr_SetString(PyExc_ValueError,
				                "message: cannot infer count, datatype is null");
				goto fail;
			}
			if (extent <= 0) {
				PyErr_Format(
				    PyExc_ValueError,
				    "message: cannot infer count, datatype extent %zd (lb:%zd, "
				    "ub:%zd)",
				    extent, m->type->lb, m->type->ub);
				goto fail;
			}
			if (m->mem.len % extent) {
				PyErr_Format(
				    PyExc_ValueError,
				    "message: cannot infer count, buffer length %zd is not a "
				    "multiple of datatype extent %zd (lb:%zd, ub:%zd)",
				    m->mem.len, extent, m->type->lb, m->type->ub);
				goto fail;
			}
			total = m->mem.len / extent;
		}
		if (!(m->counts = newarray(blocks)))
			goto fail;
		for (i = 0; i < blocks; i++)
			m->counts[i] = total / blocks + (total % blocks > i);
	} else if (is_integral(oc)) {
		if (as_ssize(oc, &v) < 0 || !(m->counts = newarray(blocks)))
			goto fail;
		for (i = 0; i < blocks; i++)
			m->counts[i] = v;
	} else if (!(m->counts = chkarray(oc, blocks))) {
		goto fail;
	}
	if (!od) {
		if (!(m->displs = newarray(blocks)))
			goto fail;
		for (i = 0, v = 0; i < blocks; i++) {
			m->displs[i] = v;
			v += m->counts[i];
		}
	} else if (is_integral(od)) {
		if (as_ssize(od, &v) < 0 || !(m->displs = newarray(blocks)))
			goto fail;
		for (i = 0; i < blocks; i++)
			m->displs[i] = v * i;
	} else if (!(m->displs = chkarray(od, blocks))) {
		goto fail;
	}
	for (i = 0; i < blocks; i++) {
		if (m->counts[i] < 0) {
			PyErr_Format(PyExc_ValueError, "message: negative count %zd", m->counts[i]);
			goto fail;
		}
		if (m->counts[i] > 0 && ob == Py_None) {
			PyErr_Format(PyExc_ValueError, "message: buffer is None but count is %zd",
			             m->counts[i]);
			goto fail;
		}
		if (m->counts[i] > 0 && null_type(m->type)) {
			py__raise_errno(EINVAL, "message: the datatype is DATATYPE_NULL");
			goto fail;
		}
	}
	return 0;
fail:
	py__msg_release(m);
	return -1;
}

int py__msg_fits(const struct msg *m, Py_ssize_t first, Py_ssize_t n, const char *what)
{
	const DatatypeObject *t = m->type;
	Py_ssize_t ext, lo, hi;

	if (n <= 0 || !m->mem.ptr || !t)
		return 0; /* nothing, or no buffer to check against (BOTTOM) */
	ext = py__extent(t);
	/* The bytes the data of elements first .. first+n-1 spans, from the buffer's start:
	 * between the first's and the last's (an extent may be negative). */
	{
		Py_ssize_t base = m->addr - m->mem.ptr, a = base + first * ext,
		           b = base + (first + n - 1) * ext;

		lo = (a < b ? a : b) + t->true_lb;
		hi = (a > b ? a : b) + t->true_ub;
	}
	if (t->size == 0 || (lo >= 0 && hi <= m->mem.len))
		return 0;
	PyErr_Format(PyExc_ValueError,
	             "%s: %zd elements of %zd bytes of data (extent %zd) at element %zd need "
	             "bytes %zd to %zd of the buffer, which has %zd",
	             what, n, t->size, ext, first, lo, hi, m->mem.len);
	return -1;
}
