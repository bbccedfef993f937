/* op.c - ops, as mpi4py's Op: the predefined reductions (MPI.SUM ... MPI.NO_OP, OP_NULL and
 * shmcoll's AVG) and user ones (Op.Create); which data each is defined on (py__op_check),
 * which the library reduces itself (py__op_native), and the fold of the others (py__op_fold,
 * fold.c's kernels or the user's function). */
#include "shmcoll_py.h"

#include "fold.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* An op object: the contract's OpObject, then what only this file reads. A handle is what
 * MPI's MPI_Op is: Op(op) copies one into a new object, equality compares handles, Free
 * nulls the object it is called on (its copies keep the dead handle, as in mpi4py). */
struct op {
	OpObject op;
	int slot;     /* a user op's slot in the registry (1 .. MAX_USER), else 0 */
	unsigned gen; /* the slot's generation when the op was made: a handle's identity */
	int owner;    /* made by Create: its deallocation frees the slot if Free did not */
	int anon;     /* made from an int (f2py ...): mpi4py cannot pickle those */
	PyObject *weakrefs;
};

static const char *const names[OP_COUNT] = {
    [OP_NULL] = "OP_NULL",  [OP_SUM] = "SUM",           [OP_PROD] = "PROD",
    [OP_MIN] = "MIN",       [OP_MAX] = "MAX",           [OP_AVG] = "AVG",
    [OP_LAND] = "LAND",     [OP_BAND] = "BAND",         [OP_LOR] = "LOR",
    [OP_BOR] = "BOR",       [OP_LXOR] = "LXOR",         [OP_BXOR] = "BXOR",
    [OP_MAXLOC] = "MAXLOC", [OP_MINLOC] = "MINLOC",     [OP_REPLACE] = "REPLACE",
    [OP_NO_OP] = "NO_OP",   [OP_USER] = "user-defined",
};

/* What a basic kind is, for the errors of py__op_check. */
static const char *const basic_names[B_COUNT] = {
    [B_NONE] = "no",
    [B_BYTE] = "byte",
    [B_BOOL] = "C_BOOL",
    [B_I8] = "int8",
    [B_I16] = "int16",
    [B_I32] = "int32",
    [B_I64] = "int64",
    [B_U8] = "uint8",
    [B_U16] = "uint16",
    [B_U32] = "uint32",
    [B_U64] = "uint64",
    [B_F16] = "float16",
    [B_BF16] = "bfloat16",
    [B_F32] = "float32",
    [B_F64] = "float64",
    [B_FLD] = "long double",
    [B_C64] = "float complex",
    [B_C128] = "double complex",
    [B_CLD] = "long double complex",
    [B_SHORT_INT] = "(short, int) pair",
    [B_2INT] = "(int, int) pair",
    [B_LONG_INT] = "(long, int) pair",
    [B_FLOAT_INT] = "(float, int) pair",
    [B_DOUBLE_INT] = "(double, int) pair",
    [B_LD_INT] = "(long double, int) pair",
    [B_MIXED] = "mixed (several basic kinds)",
};

OpObject *py__op[OP_COUNT];

/* ---- user ops: mpi4py's registry ----
 * A process has at most MAX_USER user ops alive, as in mpi4py (Create raises RuntimeError
 * beyond). A slot holds the function for its handle; gen grows each time the slot is taken,
 * so a handle of an op freed before does not name its successor. The GIL guards it. */
#define MAX_USER 32

static struct {
	PyObject *func; /* NULL: free */
	int commute;
	unsigned gen;
} slots[MAX_USER + 1];

static int is_null(const struct op *o)
{
	return o->op.freed || o->op.kind == OP_NULL;
}

/* The predefined op objects of the module: Free and free leave them as they are. */
static int is_const(const struct op *o)
{
	return o->op.kind < OP_USER && (const struct op *)py__op[o->op.kind] == o;
}

/* Whether o's handle is still the one in its slot (a user op not yet freed). */
static int slot_live(const struct op *o)
{
	return o->op.kind == OP_USER && o->slot > 0 && slots[o->slot].func &&
	       slots[o->slot].gen == o->gen;
}

static void slot_release(int s)
{
	Py_CLEAR(slots[s].func);
}

/* MPI's handle of o as an int, >= 0: the kind of a predefined op (OP_NULL is 0), past them
 * a user op's slot. */
static long handle_of(const struct op *o)
{
	if (is_null(o))
		return OP_NULL;
	if (o->op.kind == OP_USER)
		return OP_COUNT + o->slot;
	return o->op.kind;
}

/* o becomes OP_NULL (Free, free). */
static void nullify(struct op *o)
{
	o->op.kind = OP_NULL;
	o->op.freed = 1;
	o->op.name = names[OP_NULL];
	o->slot = 0;
	o->owner = 0;
	Py_CLEAR(o->op.func);
}

static struct op *op_alloc(PyTypeObject *type)
{
	struct op *o = (struct op *)type->tp_alloc(type, 0);

	if (o) {
		o->op.kind = OP_NULL;
		o->op.name = names[OP_NULL];
	}
	return o;
}

/* A new object of type with src's handle. */
static PyObject *op_copy(PyTypeObject *type, const struct op *src)
{
	struct op *o = op_alloc(type);

	if (!o || is_null(src))
		return (PyObject *)o;
	o->op.kind = src->op.kind;
	o->op.commute = src->op.commute;
	o->op.name = src->op.name;
	o->op.func = src->op.func;
	Py_XINCREF(o->op.func);
	o->slot = src->slot;
	o->gen = src->gen;
	o->anon = src->anon;
	return (PyObject *)o;
}

/* ---- the memory a user function sees ----
 * mpi4py hands a user function its `buffer` objects: bytes (format 'B'), indexable, and a
 * slice of them takes the bytes of any buffer of its length (`b[:] = array('i', ...)`), which
 * a memoryview refuses. They are valid during the call only: released after it, as the data
 * may be scratch memory. (Views a function keeps of them outlive the data, as in mpi4py.) */
typedef struct {
	PyObject_HEAD char *ptr;
	Py_ssize_t len;
	int readonly;
	int released;
} BufObject;

static PyTypeObject buf_type;

static int buf_live(BufObject *b)
{
	if (!b->released)
		return 0;
	PyErr_SetString(PyExc_ValueError, "operation forbidden on released buffer object");
	return -1;
}

static int buf_getbuffer(BufObject *b, Py_buffer *view, int flags)
{
	if (buf_live(b) < 0) {
		view->obj = NULL;
		return -1;
	}
	return PyBuffer_FillInfo(view, (PyObject *)b, b->ptr, b->len, b->readonly, flags);
}

static Py_ssize_t buf_length(BufObject *b)
{
	return b->released ? 0 : b->len;
}

/* Reads go through a memoryview of it: an int for an index, a view for a slice. */
static PyObject *buf_subscript(BufObject *b, PyObject *key)
{
	PyObject *mv, *r;

	if (buf_live(b) < 0)
		return NULL;
	mv = PyMemoryView_FromObject((PyObject *)b);
	if (!mv)
		return NULL;
	r = PyObject_GetItem(mv, key);
	Py_DECREF(mv);
	return r;
}

static int buf_ass_subscript(BufObject *b, PyObject *key, PyObject *value)
{
	Py_ssize_t start, stop, step, n, i;
	Py_buffer src;

	if (buf_live(b) < 0)
		return -1;
	if (!value) {
		PyErr_SetString(PyExc_TypeError, "cannot delete buffer items");
		return -1;
	}
	if (b->readonly) {
		PyErr_SetString(PyExc_TypeError, "cannot modify read-only buffer");
		return -1;
	}
	if (PyIndex_Check(key)) {
		long v;

		i = PyNumber_AsSsize_t(key, PyExc_IndexError);
		if (i == -1 && PyErr_Occurred())
			return -1;
		if (i < 0)
			i += b->len;
		if (i < 0 || i >= b->len) {
			PyErr_SetString(PyExc_IndexError, "buffer index out of range");
			return -1;
		}
		v = PyLong_AsLong(value);
		if (v == -1 && PyErr_Occurred())
			return -1;
		if (v < 0 || v > 255) {
			PyErr_SetString(PyExc_ValueError, "byte must be in range(0, 256)");
			return -1;
		}
		b->ptr[i] = (char)(unsigned char)v;
		return 0;
	}
	if (!PySlice_Check(key)) {
		PyErr_Format(PyExc_TypeError,
		             "buffer indices must be integers or slices, not %.100s",
		             Py_TYPE(key)->tp_name);
		return -1;
	}
	if (PySlice_Unpack(key, &start, &stop, &step) < 0)
		return -1;
	n = PySlice_AdjustIndices(b->len, &start, &stop, step);
	if (PyObject_GetBuffer(value, &src, PyBUF_SIMPLE) < 0)
		return -1;
	if (src.len != n) {
		PyErr_Format(PyExc_ValueError, "buffer length %zd does not match slice length %zd",
		             src.len, n);
		PyBuffer_Release(&src);
		return -1;
	}
	if (step == 1)
		memmove(b->ptr + start, src.buf, (size_t)n);
	else
		for (i = 0; i < n; i++)
			b->ptr[start + i * step] = ((const char *)src.buf)[i];
	PyBuffer_Release(&src);
	return 0;
}

static PyObject *buf_tobytes(BufObject *b, PyObject *unused)
{
	if (buf_live(b) < 0)
		return NULL;
	return PyBytes_FromStringAndSize(b->ptr, b->len);
}

static PyObject *buf_repr(BufObject *b)
{
	return PyUnicode_FromFormat("<shmcoll.buffer of %zd bytes%s%s>", b->len,
	                            b->readonly ? ", read-only" : "",
	                            b->released ? ", released" : "");
}

static PyBufferProcs buf_as_buffer = {
    .bf_getbuffer = (getbufferproc)buf_getbuffer,
};

static PyMappingMethods buf_as_mapping = {
    .mp_length = (lenfunc)buf_length,
    .mp_subscript = (binaryfunc)buf_subscript,
    .mp_ass_subscript = (objobjargproc)buf_ass_subscript,
};

static PyMethodDef buf_methods[] = {
    {"tobytes", (PyCFunction)buf_tobytes, METH_NOARGS, "The bytes, as a bytes object."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject buf_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.buffer",
    .tp_basicsize = sizeof(BufObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The data a user op's function reduces (mpi4py's buffer): bytes, valid during "
              "the call.",
    .tp_repr = (reprfunc)buf_repr,
    .tp_as_buffer = &buf_as_buffer,
    .tp_as_mapping = &buf_as_mapping,
    .tp_methods = buf_methods,
};

static PyObject *buf_new(char *ptr, Py_ssize_t len, int readonly)
{
	BufObject *b = PyObject_New(BufObject, &buf_type);

	if (b) {
		b->ptr = ptr;
		b->len = len;
		b->readonly = readonly;
		b->released = 0;
	}
	return (PyObject *)b;
}

static void buf_release(PyObject *o)
{
	BufObject *b = (BufObject *)o;

	if (b) {
		b->released = 1;
		b->ptr = NULL;
		b->len = 0;
	}
}

/* ---- the contract ---- */

OpObject *py__op_get(PyObject *obj, const char *what)
{
	if (PyObject_TypeCheck(obj, &py__OpType))
		return (OpObject *)obj;
	PyErr_Format(PyExc_TypeError,
	             "%s: op must be an Op (MPI.SUM, Op.Create(...) ...), got %.100s", what,
	             Py_TYPE(obj)->tp_name);
	return NULL;
}

/* Raises shmcoll.Error(EINVAL, "what: fmt ..."): -1. */
static int raise_einval(const char *what, const char *why)
{
	char msg[200];

	PyOS_snprintf(msg, sizeof(msg), "%s: %s", what, why);
	py__raise_errno(EINVAL, msg);
	return -1;
}

int py__op_check(const OpObject *op, const DatatypeObject *t, const char *what)
{
	int kind = op->freed ? OP_NULL : op->kind;

	if (kind == OP_NULL)
		return raise_einval(what, "the op is OP_NULL");
	if (t->freed || t->basic == B_NONE)
		return raise_einval(what, "the datatype is DATATYPE_NULL");
	/* User ops take anything, REPLACE and NO_OP move or keep it. */
	if (kind == OP_USER || kind == OP_REPLACE || kind == OP_NO_OP)
		return 0;
	if (py__fold_lookup(kind, t->basic))
		return 0;
	PyErr_Format(PyExc_TypeError, "%s: %s is not defined on %s data (%R)", what, names[kind],
	             (unsigned)t->basic < B_COUNT ? basic_names[t->basic] : "unknown",
	             (PyObject *)t);
	return -1;
}

int py__op_native(const OpObject *op, const DatatypeObject *t, shmcoll_dtype *cdt, shmcoll_op *cop,
                  Py_ssize_t *mult)
{
	int basic = t->basic, cd;
	Py_ssize_t m = 1;
	shmcoll_op c;

	if (op->freed || t->freed)
		return 0;
	switch (op->kind) {
	case OP_SUM:
		c = SHMCOLL_SUM;
		break;
	case OP_PROD:
		c = SHMCOLL_PROD;
		break;
	case OP_MIN:
		c = SHMCOLL_MIN;
		break;
	case OP_MAX:
		c = SHMCOLL_MAX;
		break;
	case OP_AVG:
		c = SHMCOLL_AVG;
		break;
	case OP_BAND:
		c = SHMCOLL_BAND;
		break;
	case OP_BOR:
		c = SHMCOLL_BOR;
		break;
	case OP_BXOR:
		c = SHMCOLL_BXOR;
		break;
	default:
		return 0;
	}
	/* Only where the op is defined: bytes reduce bitwise only, no op on bools here. */
	if (!py__fold_lookup(op->kind, basic))
		return 0;
	/* A complex sum is the sum of its parts, and so is its mean. */
	if ((c == SHMCOLL_SUM || c == SHMCOLL_AVG) && (basic == B_C64 || basic == B_C128)) {
		basic = basic == B_C64 ? B_F32 : B_F64;
		m = 2;
	}
	cd = py__basic_cdt(basic);
	if (cd < 0)
		return 0;
	*cdt = (shmcoll_dtype)cd;
	*cop = c;
	*mult = m * t->nbasic;
	return 1;
}

/* A user op's fold: function(inbuf, inoutbuf, datatype), with mpi4py's buffer objects over
 * the packed data (count * size bytes; mpi4py's span count * extent of the MPI's layout). */
static int user_fold(const OpObject *op, const DatatypeObject *t, const char *in, char *inout,
                     Py_ssize_t count)
{
	Py_ssize_t n = count * t->size;
	PyObject *a = buf_new((char *)in, n, 1), *b = buf_new(inout, n, 0), *r = NULL;
	PyObject *func = op->func;

	/* Held across the call: a thread the function lets run may Free the op. */
	Py_INCREF(func);
	if (a && b)
		r = PyObject_CallFunctionObjArgs(func, a, b, (PyObject *)t, NULL);
	Py_DECREF(func);
	buf_release(a);
	buf_release(b);
	Py_XDECREF(a);
	Py_XDECREF(b);
	if (!r)
		return -1;
	Py_DECREF(r);
	return 0;
}

int py__op_fold(const OpObject *op, const DatatypeObject *t, const char *in, char *inout,
                Py_ssize_t count)
{
	Py_ssize_t bytes;
	py__fold_fn f;
	char *tmp = NULL;

	if (count <= 0)
		return 0;
	if (op->freed || op->kind == OP_NULL)
		return raise_einval("reduction", "the op is OP_NULL");
	if (t->size > 0 && count > PY_SSIZE_T_MAX / t->size) {
		PyErr_SetString(PyExc_OverflowError, "reduction: count * datatype size overflows");
		return -1;
	}
	bytes = count * t->size;
	switch (op->kind) {
	case OP_NO_OP:
		return 0;
	case OP_REPLACE:
		memmove(inout, in, (size_t)bytes);
		return 0;
	case OP_USER:
		return user_fold(op, t, in, inout, count);
	default:
		break;
	}
	f = py__fold_lookup(op->kind, t->basic);
	if (!f)
		return py__op_check(op, t, "reduction") < 0 ? -1
		                                            : raise_einval("reduction", "no fold");
	/* The kernels take in and inout apart (restrict): an overlap folds a copy of in. */
	if ((uintptr_t)in < (uintptr_t)inout + (uintptr_t)bytes &&
	    (uintptr_t)inout < (uintptr_t)in + (uintptr_t)bytes) {
		tmp = PyMem_Malloc((size_t)bytes);
		if (!tmp) {
			PyErr_NoMemory();
			return -1;
		}
		memcpy(tmp, in, (size_t)bytes);
		in = tmp;
	}
	f(in, inout, (size_t)(count * t->nbasic));
	PyMem_Free(tmp);
	return 0;
}

void py__op_avg_finish(const DatatypeObject *t, char *buf, Py_ssize_t count, int size)
{
	if (count > 0 && size > 0)
		py__fold_avg(t->basic, buf, (size_t)(count * t->nbasic), size);
}

/* ---- the object ---- */

static int op_traverse(struct op *o, visitproc visit, void *arg)
{
	Py_VISIT(o->op.func);
	return 0;
}

static int op_clear(struct op *o)
{
	Py_CLEAR(o->op.func);
	return 0;
}

static void op_dealloc(struct op *o)
{
	PyTypeObject *type = Py_TYPE(o);

	PyObject_GC_UnTrack(o);
	if (o->weakrefs)
		PyObject_ClearWeakRefs((PyObject *)o);
	/* An op Create made and nobody freed: its slot goes with it, so that ops dropped
	 * without Free do not use up the registry. */
	if (o->owner && slot_live(o))
		slot_release(o->slot);
	Py_CLEAR(o->op.func);
	type->tp_free((PyObject *)o);
}

/* Op(op=None): a new object with op's handle (OP_NULL's when None), as mpi4py's. */
static PyObject *op_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"op", NULL};
	PyObject *src = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Op", kwlist, &src))
		return NULL;
	if (!src || src == Py_None)
		src = (PyObject *)py__op[OP_NULL];
	if (!PyObject_TypeCheck(src, &py__OpType))
		return PyErr_Format(PyExc_TypeError, "Op: expected an Op, got %.100s",
		                    Py_TYPE(src)->tp_name);
	return op_copy(type, (struct op *)src);
}

static PyObject *op_richcompare(PyObject *a, PyObject *b, int cmp)
{
	const struct op *x = (const struct op *)a, *y = (const struct op *)b;
	int eq;

	if (!PyObject_TypeCheck(b, &py__OpType) || (cmp != Py_EQ && cmp != Py_NE))
		Py_RETURN_NOTIMPLEMENTED;
	eq = handle_of(x) == handle_of(y) && (x->op.kind != OP_USER || x->gen == y->gen);
	return PyBool_FromLong(cmp == Py_EQ ? eq : !eq);
}

static int op_bool(PyObject *a)
{
	return !is_null((struct op *)a);
}

static PyObject *op_repr(PyObject *self)
{
	struct op *o = (struct op *)self;
	const char *tn = Py_TYPE(self)->tp_name;

	if (o->op.kind == OP_USER && !is_null(o))
		return PyUnicode_FromFormat("<%s user-defined #%d %R%s>", tn, o->slot, o->op.func,
		                            o->op.commute ? ", commutative" : "");
	return PyUnicode_FromFormat("<%s %s%s>", tn, names[is_null(o) ? OP_NULL : o->op.kind],
	                            o->op.freed ? " (freed)" : "");
}

/* Binary MAXLOC and MINLOC on (value, index) pairs, as mpi4py's: the better value, or of
 * equal ones the smaller index. cmp: Py_GT for MAXLOC, Py_LT for MINLOC. */
static PyObject *call_loc(PyObject *x, PyObject *y, int cmp)
{
	PyObject *a = NULL, *b = NULL, *r = NULL, *u, *i, *v, *j;
	int c;

	a = PySequence_Fast(x, "MAXLOC/MINLOC: expecting a (value, index) pair");
	if (a)
		b = PySequence_Fast(y, "MAXLOC/MINLOC: expecting a (value, index) pair");
	if (!b)
		goto out;
	if (PySequence_Fast_GET_SIZE(a) != 2 || PySequence_Fast_GET_SIZE(b) != 2) {
		PyErr_SetString(PyExc_ValueError, "MAXLOC/MINLOC: expecting a (value, index) pair");
		goto out;
	}
	u = PySequence_Fast_GET_ITEM(a, 0);
	i = PySequence_Fast_GET_ITEM(a, 1);
	v = PySequence_Fast_GET_ITEM(b, 0);
	j = PySequence_Fast_GET_ITEM(b, 1);
	if ((c = PyObject_RichCompareBool(u, v, cmp)) < 0)
		goto out;
	if (c) {
		r = PyTuple_Pack(2, u, i);
		goto out;
	}
	if ((c = PyObject_RichCompareBool(v, u, cmp)) < 0)
		goto out;
	if (!c && (c = PyObject_RichCompareBool(j, i, Py_LT)) < 0)
		goto out;
	r = c ? PyTuple_Pack(2, v, j) : PyTuple_Pack(2, u, i);
out:
	Py_XDECREF(a);
	Py_XDECREF(b);
	return r;
}

/* Binary MIN and MAX, as mpi4py's: y when strictly better, else x. */
static PyObject *call_better(PyObject *x, PyObject *y, int cmp)
{
	int c = PyObject_RichCompareBool(y, x, cmp);
	PyObject *r = c ? y : x;

	if (c < 0)
		return NULL;
	Py_INCREF(r);
	return r;
}

static PyObject *call_logical(PyObject *x, PyObject *y, int kind)
{
	int a = PyObject_IsTrue(x), b;

	if (a < 0 || (b = PyObject_IsTrue(y)) < 0)
		return NULL;
	return PyBool_FromLong(kind == OP_LAND ? a & b : kind == OP_LOR ? a | b : a ^ b);
}

/* op(x, y): the op on two Python objects, as mpi4py's (a user op calls its function with
 * datatype None). */
static PyObject *op_call(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"x", "y", NULL};
	struct op *o = (struct op *)self;
	PyObject *x, *y;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:Op", kwlist, &x, &y))
		return NULL;
	switch (is_null(o) ? OP_NULL : o->op.kind) {
	case OP_SUM:
		return PyNumber_Add(x, y);
	case OP_PROD:
		return PyNumber_Multiply(x, y);
	case OP_MIN:
		return call_better(x, y, Py_LT);
	case OP_MAX:
		return call_better(x, y, Py_GT);
	case OP_LAND:
	case OP_LOR:
	case OP_LXOR:
		return call_logical(x, y, o->op.kind);
	case OP_BAND:
		return PyNumber_And(x, y);
	case OP_BOR:
		return PyNumber_Or(x, y);
	case OP_BXOR:
		return PyNumber_Xor(x, y);
	case OP_MAXLOC:
		return call_loc(x, y, Py_GT);
	case OP_MINLOC:
		return call_loc(x, y, Py_LT);
	case OP_REPLACE:
		Py_INCREF(y);
		return y;
	case OP_NO_OP:
		Py_INCREF(x);
		return x;
	case OP_USER: {
		PyObject *func = o->op.func, *r;

		Py_INCREF(func); /* as in user_fold */
		r = PyObject_CallFunctionObjArgs(func, x, y, Py_None, NULL);
		Py_DECREF(func);
		return r;
	}
	case OP_AVG:
		PyErr_SetString(PyExc_ValueError,
		                "cannot call AVG on two objects: it is a sum divided by the ranks");
		return NULL;
	default:
		PyErr_SetString(PyExc_ValueError, "cannot call OP_NULL");
		return NULL;
	}
}

/* Op.Create(function, commute=False), a classmethod. */
static PyObject *op_Create(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"function", "commute", NULL};
	PyObject *func;
	int commute = 0, s;
	struct op *o;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:Create", kwlist, &func, &commute))
		return NULL;
	if (!PyCallable_Check(func))
		return PyErr_Format(PyExc_TypeError,
		                    "Create: function must be callable, got %.100s",
		                    Py_TYPE(func)->tp_name);
	for (s = 1; s <= MAX_USER && slots[s].func; s++)
		;
	if (s > MAX_USER) {
		PyErr_SetString(PyExc_RuntimeError,
		                "cannot create too many user-defined reduction operations");
		return NULL;
	}
	o = op_alloc((PyTypeObject *)cls);
	if (!o)
		return NULL;
	Py_INCREF(func);
	slots[s].func = func;
	slots[s].commute = commute;
	slots[s].gen++;
	Py_INCREF(func);
	o->op.kind = OP_USER;
	o->op.commute = commute;
	o->op.func = func;
	o->op.name = names[OP_USER];
	o->slot = s;
	o->gen = slots[s].gen;
	o->owner = 1;
	return (PyObject *)o;
}

static PyObject *op_Free(PyObject *self, PyObject *unused)
{
	struct op *o = (struct op *)self;

	if (is_null(o))
		return py__raise_errno(EINVAL, "Free: the op is OP_NULL");
	if (o->op.kind != OP_USER)
		return py__raise_errno(EINVAL, "Free: a predefined op cannot be freed");
	if (!slot_live(o))
		return py__raise_errno(EINVAL, "Free: the op was freed already (through a copy)");
	slot_release(o->slot);
	nullify(o);
	Py_RETURN_NONE;
}

/* free(): mpi4py 4's safe free: the module's constants stay, others become OP_NULL (a user
 * op's handle freed if it is still live); again and again. */
static PyObject *op_free(PyObject *self, PyObject *unused)
{
	struct op *o = (struct op *)self;

	if (is_const(o))
		Py_RETURN_NONE;
	if (slot_live(o))
		slot_release(o->slot);
	if (!is_null(o))
		nullify(o);
	Py_RETURN_NONE;
}

static PyObject *op_Is_commutative(PyObject *self, PyObject *unused)
{
	struct op *o = (struct op *)self;

	if (is_null(o))
		return py__raise_errno(EINVAL, "Is_commutative: the op is OP_NULL");
	return PyBool_FromLong(o->op.commute);
}

static PyObject *get_is_commutative(PyObject *self, void *closure)
{
	return op_Is_commutative(self, NULL);
}

static PyObject *get_is_predefined(PyObject *self, void *closure)
{
	struct op *o = (struct op *)self;

	return PyBool_FromLong(is_null(o) || o->op.kind != OP_USER);
}

static PyObject *get_handle(PyObject *self, void *closure)
{
	return PyLong_FromLong(handle_of((struct op *)self));
}

static PyObject *op_toint(PyObject *self, PyObject *unused)
{
	return get_handle(self, NULL);
}

/* Op.f2py(h), fromint, fromhandle: the op of a handle. A predefined one is the module's
 * object (Op's; a subclass gets a new one), a user one a new object of its live handle. */
static PyObject *op_fromint(PyObject *cls, PyObject *arg)
{
	PyTypeObject *type = (PyTypeObject *)cls;
	long h = PyLong_AsLong(arg);
	struct op *o;
	int s;

	if (h == -1 && PyErr_Occurred())
		return NULL;
	if (h >= 0 && h < OP_USER) {
		if (type == &py__OpType) {
			Py_INCREF(py__op[h]);
			return (PyObject *)py__op[h];
		}
		return op_copy(type, (struct op *)py__op[h]);
	}
	s = h > OP_COUNT && h <= OP_COUNT + MAX_USER ? (int)(h - OP_COUNT) : 0;
	if (!s || !slots[s].func)
		return PyErr_Format(PyExc_ValueError, "no op has handle %ld", h);
	o = op_alloc(type);
	if (!o)
		return NULL;
	Py_INCREF(slots[s].func);
	o->op.kind = OP_USER;
	o->op.commute = slots[s].commute;
	o->op.func = slots[s].func;
	o->op.name = names[OP_USER];
	o->slot = s;
	o->gen = slots[s].gen;
	o->anon = 1;
	return (PyObject *)o;
}

/* Pickling, as mpi4py 4's: a module's op is itself again, another object a new one with its
 * handle; a user op is made again by Create with its function (that function must pickle),
 * but not one made from an int, whose function mpi4py does not know: ValueError as mpi4py 4,
 * TypeError as mpi4py 3 (whose handles do not pickle), as the other handles (MPI.py). */
static PyObject *op_reduce(PyObject *self, PyObject *unused)
{
	struct op *o = (struct op *)self;
	PyObject *f, *r;
	int k = is_null(o) ? OP_NULL : o->op.kind;

	if (k == OP_USER) {
		if (o->anon) {
			PyErr_SetString(py__mpi4py_api >= 4 ? PyExc_ValueError : PyExc_TypeError,
			                "cannot pickle user-defined reduction operation");
			return NULL;
		}
		f = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "Create");
		r = f ? Py_BuildValue("(O(OO))", f, o->op.func, o->op.commute ? Py_True : Py_False)
		      : NULL;
		Py_XDECREF(f);
		return r;
	}
	if (is_const(o)) {
		f = PyObject_GetAttrString((PyObject *)&py__OpType, "f2py");
		r = f ? Py_BuildValue("(O(i))", f, k) : NULL;
		Py_XDECREF(f);
		return r;
	}
	return Py_BuildValue("(O(O))", (PyObject *)Py_TYPE(self), (PyObject *)py__op[k]);
}

/* Reduce_local(inbuf, inoutbuf): inoutbuf = inbuf op inoutbuf, message specifications as
 * mpi4py takes them: the same count and datatype on both sides. */
static PyObject *op_Reduce_local(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"inbuf", "inoutbuf", NULL};
	const OpObject *op = (const OpObject *)self;
	PyObject *inbuf, *inoutbuf, *ret = NULL;
	struct msg s, r;
	const DatatypeObject *t;
	Py_ssize_t n;
	char *pin = NULL, *pio = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:Reduce_local", kwlist, &inbuf, &inoutbuf))
		return NULL;
	if (op->kind == OP_AVG) {
		/* A fold of AVG is a sum: the mean needs the ranks of a collective. */
		PyErr_SetString(PyExc_ValueError,
		                "Reduce_local: AVG has no local form (it divides by the ranks)");
		return NULL;
	}
	if (py__msg_simple(inbuf, 1, 1, &s) < 0)
		return NULL;
	if (py__msg_simple(inoutbuf, 0, 1, &r) < 0) {
		py__msg_release(&s);
		return NULL;
	}
	t = r.type;
	if (s.count != r.count) {
		PyErr_Format(PyExc_ValueError, "mismatch in inbuf count %zd and inoutbuf count %zd",
		             s.count, r.count);
		goto out;
	}
	if (s.type != r.type) {
		PyErr_SetString(PyExc_ValueError, "mismatch in inbuf and inoutbuf MPI datatypes");
		goto out;
	}
	if (py__msg_fits(&s, 0, s.count, "Reduce_local") < 0 ||
	    py__msg_fits(&r, 0, r.count, "Reduce_local") < 0 ||
	    py__op_check(op, t, "Reduce_local") < 0)
		goto out;
	if (r.count == 0 || t->size == 0) {
		ret = Py_None;
		goto out;
	}
	if (t->contig && s.addr && r.addr) {
		if (py__op_fold(op, t, s.addr, r.addr, r.count) == 0)
			ret = Py_None;
		goto out;
	}
	/* Other layouts (and BOTTOM's absolute addresses) fold packed copies. */
	if (r.count > PY_SSIZE_T_MAX / t->size) {
		PyErr_SetString(PyExc_OverflowError,
		                "Reduce_local: count * datatype size overflows");
		goto out;
	}
	n = r.count * t->size;
	pin = PyMem_Malloc((size_t)n);
	pio = PyMem_Malloc((size_t)n);
	if (!pin || !pio) {
		PyErr_NoMemory();
		goto out;
	}
	py__pack(t, s.addr, r.count, pin);
	py__pack(t, r.addr, r.count, pio);
	if (py__op_fold(op, t, pin, pio, r.count) < 0)
		goto out;
	py__unpack(t, pio, r.count, r.addr);
	ret = Py_None;
out:
	PyMem_Free(pin);
	PyMem_Free(pio);
	py__msg_release(&r);
	py__msg_release(&s);
	Py_XINCREF(ret);
	return ret;
}

static PyMethodDef op_methods[] = {
    {"Create", KW(op_Create), METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Create(function, commute=False): a user-defined op; function(inbuf, inoutbuf, "
     "datatype) computes inoutbuf = inbuf op inoutbuf."},
    {"Free", op_Free, METH_NOARGS, "Free a user-defined op: it becomes OP_NULL."},
    {"free", op_free, METH_NOARGS, "Free if not a predefined constant (any number of times)."},
    {"Is_commutative", op_Is_commutative, METH_NOARGS, "Whether the op is commutative."},
    {"Reduce_local", KW(op_Reduce_local), METH_VARARGS | METH_KEYWORDS,
     "Reduce_local(inbuf, inoutbuf): inoutbuf = inbuf op inoutbuf, on this process."},
    {"__reduce__", op_reduce, METH_NOARGS, "Pickling."},
    {"py2f", op_toint, METH_NOARGS, "The handle as an int."},
    {"toint", op_toint, METH_NOARGS, "The handle as an int."},
    {"tohandle", op_toint, METH_NOARGS, "The handle as an int."},
    {"f2py", op_fromint, METH_O | METH_CLASS, "The op of a handle (an int)."},
    {"fromint", op_fromint, METH_O | METH_CLASS, "The op of a handle (an int)."},
    {"fromhandle", op_fromint, METH_O | METH_CLASS, "The op of a handle (an int)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef op_getset[] = {
    {"is_commutative", get_is_commutative, NULL, "is commutative", NULL},
    {"is_predefined", get_is_predefined, NULL, "is a predefined operation", NULL},
    {"handle", get_handle, NULL, "the handle, an int", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyNumberMethods op_as_number = {
    .nb_bool = op_bool,
};

/* Ops are dict and set keys in programs (and in shmcoll/torch.py), so they hash, by handle
 * as they compare: Op(SUM) finds SUM. mpi4py's are unhashable (its test_objmodel asks so). */
static Py_hash_t op_hash(PyObject *self)
{
	const struct op *o = (const struct op *)self;
	Py_hash_t h = (Py_hash_t)handle_of(o);

	if (o->op.kind == OP_USER && !is_null(o))
		h += (Py_hash_t)o->gen * 1000003;
	return h == -1 ? -2 : h;
}

PyTypeObject py__OpType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.Op",
    .tp_basicsize = sizeof(struct op),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A reduction operation (MPI.SUM ..., Op.Create(function)), as mpi4py's Op.",
    .tp_new = op_new,
    .tp_dealloc = (destructor)op_dealloc,
    .tp_traverse = (traverseproc)op_traverse,
    .tp_clear = (inquiry)op_clear,
    .tp_repr = op_repr,
    .tp_call = op_call,
    .tp_hash = op_hash,
    .tp_richcompare = op_richcompare,
    .tp_as_number = &op_as_number,
    .tp_weaklistoffset = offsetof(struct op, weakrefs),
    .tp_methods = op_methods,
    .tp_getset = op_getset,
};

int py__ops_init(PyObject *m)
{
	PyObject *ops;
	int k;

	if (PyType_Ready(&py__OpType) < 0 || PyType_Ready(&buf_type) < 0)
		return -1;
	ops = PyDict_New();
	if (!ops)
		return -1;
	for (k = 0; k < OP_USER; k++) {
		if (!py__op[k]) {
			struct op *o = op_alloc(&py__OpType);

			if (!o)
				goto fail;
			o->op.kind = k;
			o->op.name = names[k];
			/* REPLACE and NO_OP keep one side: a op b is not b op a. */
			o->op.commute = k != OP_REPLACE && k != OP_NO_OP;
			py__op[k] = &o->op;
		}
		if (PyDict_SetItemString(ops, names[k], (PyObject *)py__op[k]) < 0 ||
		    py__add(m, names[k], (PyObject *)py__op[k]) < 0)
			goto fail;
	}
	if (py__add(m, "_ops", ops) < 0 || py__add(m, "Op", (PyObject *)&py__OpType) < 0)
		goto fail;
	Py_DECREF(ops);
	return 0;
fail:
	Py_DECREF(ops);
	return -1;
}
