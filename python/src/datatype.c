/* datatype.c - datatypes: every predefined one mpi4py has (MPI.INT, MPI.DOUBLE_INT, ...,
 * and shmcoll's own FLOAT16 and BFLOAT16), and the derived ones made from them
 * (Create_contiguous, _vector, _hvector, _indexed, _hindexed, _indexed_block,
 * _hindexed_block, _struct, _subarray, _resized, Dup), with MPI's sizes, bounds and extents.
 *
 * A datatype is its type map kept as runs of bytes (struct run: where, from an element's
 * start, its data lies, in the map's order) and the one basic kind of all its basic
 * elements, if they have one. Messages whose datatype is contiguous move their buffer as it
 * is; others are packed into scratch memory with py__pack and unpacked with py__unpack, so
 * every call of the library sees contiguous bytes, or basic elements for a reduction. */
#include "shmcoll_py.h"

#include <errno.h>
#include <string.h>

/* MPI's combiners (Get_envelope), as mpi4py numbers them for Open MPI. */
enum {
	COMBINER_NAMED = 1,
	COMBINER_DUP,
	COMBINER_CONTIGUOUS,
	COMBINER_VECTOR,
	COMBINER_HVECTOR,
	COMBINER_INDEXED,
	COMBINER_HINDEXED,
	COMBINER_INDEXED_BLOCK,
	COMBINER_HINDEXED_BLOCK,
	COMBINER_STRUCT,
	COMBINER_SUBARRAY,
	COMBINER_DARRAY,
	COMBINER_RESIZED,
};

const Py_ssize_t py__basic_size[B_COUNT] = {
    [B_NONE] = 0,
    [B_BYTE] = 1,
    [B_BOOL] = 1,
    [B_I8] = 1,
    [B_I16] = 2,
    [B_I32] = 4,
    [B_I64] = 8,
    [B_U8] = 1,
    [B_U16] = 2,
    [B_U32] = 4,
    [B_U64] = 8,
    [B_F16] = 2,
    [B_BF16] = 2,
    [B_F32] = 4,
    [B_F64] = 8,
    [B_FLD] = sizeof(long double),
    [B_C64] = 8,
    [B_C128] = 16,
    [B_CLD] = 2 * sizeof(long double),
    [B_SHORT_INT] = 2 + 4,
    [B_2INT] = 4 + 4,
    [B_LONG_INT] = 8 + 4,
    [B_FLOAT_INT] = 4 + 4,
    [B_DOUBLE_INT] = 8 + 4,
    [B_LD_INT] = sizeof(long double) + 4,
    [B_MIXED] = 0,
};

int py__basic_cdt(int basic)
{
	switch (basic) {
	case B_I8:
		return SHMCOLL_INT8;
	case B_U8:
	case B_BYTE:
		return SHMCOLL_UINT8;
	case B_I32:
		return SHMCOLL_INT32;
	case B_U32:
		return SHMCOLL_UINT32;
	case B_I64:
		return SHMCOLL_INT64;
	case B_U64:
		return SHMCOLL_UINT64;
	case B_F16:
		return SHMCOLL_FLOAT16;
	case B_BF16:
		return SHMCOLL_BFLOAT16;
	case B_F32:
		return SHMCOLL_FLOAT32;
	case B_F64:
		return SHMCOLL_FLOAT64;
	default:
		return -1;
	}
}

/* ---- the predefined datatypes ---- */

/* A predefined datatype: its basic kind, and for the pairs with padding the offset of the
 * int and the extent (0: contiguous, the extent is the size). alias: another name of the
 * same datatype (one object), as MPI has (MPI_UNSIGNED and MPI_UNSIGNED_INT ...). */
struct predef {
	const char *name;
	int basic;
	Py_ssize_t int_at, extent;
	const char *alias;
};

#define LD ((Py_ssize_t)sizeof(long double))

static const struct predef predefs[] = {
    {"DATATYPE_NULL", B_NONE, 0, 0, NULL},
    {"PACKED", B_BYTE, 0, 0, NULL},
    {"BYTE", B_BYTE, 0, 0, NULL},
    {"AINT", B_I64, 0, 0, NULL},
    {"OFFSET", B_I64, 0, 0, NULL},
    {"COUNT", B_I64, 0, 0, NULL},
    {"CHAR", B_I8, 0, 0, NULL},
    {"WCHAR", B_I32, 0, 0, NULL},
    {"SIGNED_CHAR", B_I8, 0, 0, NULL},
    {"SHORT", B_I16, 0, 0, "SIGNED_SHORT"},
    {"INT", B_I32, 0, 0, "SIGNED_INT"},
    {"LONG", B_I64, 0, 0, "SIGNED_LONG"},
    {"LONG_LONG", B_I64, 0, 0, "LONG_LONG_INT"},
    {"UNSIGNED_CHAR", B_U8, 0, 0, NULL},
    {"UNSIGNED_SHORT", B_U16, 0, 0, NULL},
    {"UNSIGNED", B_U32, 0, 0, "UNSIGNED_INT"},
    {"UNSIGNED_LONG", B_U64, 0, 0, NULL},
    {"UNSIGNED_LONG_LONG", B_U64, 0, 0, NULL},
    {"FLOAT", B_F32, 0, 0, NULL},
    {"DOUBLE", B_F64, 0, 0, NULL},
    {"LONG_DOUBLE", B_FLD, 0, 0, NULL},
    {"C_BOOL", B_BOOL, 0, 0, NULL},
    {"INT8_T", B_I8, 0, 0, NULL},
    {"INT16_T", B_I16, 0, 0, NULL},
    {"INT32_T", B_I32, 0, 0, NULL},
    {"INT64_T", B_I64, 0, 0, NULL},
    {"UINT8_T", B_U8, 0, 0, NULL},
    {"UINT16_T", B_U16, 0, 0, NULL},
    {"UINT32_T", B_U32, 0, 0, NULL},
    {"UINT64_T", B_U64, 0, 0, NULL},
    {"C_FLOAT_COMPLEX", B_C64, 0, 0, "C_COMPLEX"},
    {"C_DOUBLE_COMPLEX", B_C128, 0, 0, NULL},
    {"C_LONG_DOUBLE_COMPLEX", B_CLD, 0, 0, NULL},
    {"CXX_BOOL", B_BOOL, 0, 0, NULL},
    {"CXX_FLOAT_COMPLEX", B_C64, 0, 0, NULL},
    {"CXX_DOUBLE_COMPLEX", B_C128, 0, 0, NULL},
    {"CXX_LONG_DOUBLE_COMPLEX", B_CLD, 0, 0, NULL},
    {"SHORT_INT", B_SHORT_INT, 4, 8, NULL},
    {"INT_INT", B_2INT, 4, 8, "TWOINT"},
    {"LONG_INT", B_LONG_INT, 8, 16, NULL},
    {"FLOAT_INT", B_FLOAT_INT, 4, 8, NULL},
    {"DOUBLE_INT", B_DOUBLE_INT, 8, 16, NULL},
    {"LONG_DOUBLE_INT", B_LD_INT, sizeof(long double), 2 * sizeof(long double), NULL},
    {"CHARACTER", B_BYTE, 0, 0, NULL},
    {"LOGICAL", B_I32, 0, 0, NULL},
    {"INTEGER", B_I32, 0, 0, NULL},
    {"REAL", B_F32, 0, 0, NULL},
    {"DOUBLE_PRECISION", B_F64, 0, 0, NULL},
    {"COMPLEX", B_C64, 0, 0, NULL},
    {"DOUBLE_COMPLEX", B_C128, 0, 0, NULL},
    {"LOGICAL1", B_I8, 0, 0, NULL},
    {"LOGICAL2", B_I16, 0, 0, NULL},
    {"LOGICAL4", B_I32, 0, 0, NULL},
    {"LOGICAL8", B_I64, 0, 0, NULL},
    {"INTEGER1", B_I8, 0, 0, NULL},
    {"INTEGER2", B_I16, 0, 0, NULL},
    {"INTEGER4", B_I32, 0, 0, NULL},
    {"INTEGER8", B_I64, 0, 0, NULL},
    {"REAL4", B_F32, 0, 0, NULL},
    {"REAL8", B_F64, 0, 0, NULL},
    {"COMPLEX8", B_C64, 0, 0, NULL},
    {"COMPLEX16", B_C128, 0, 0, NULL},
    /* shmcoll's, which MPI has no name for */
    {"FLOAT16", B_F16, 0, 0, NULL},
    {"BFLOAT16", B_BF16, 0, 0, NULL},
};

#define NPREDEF ((int)(sizeof(predefs) / sizeof(predefs[0])))

/* Names of the predefined datatypes a library may lack: mpi4py has them, as DATATYPE_NULL,
 * where the MPI does not (Open MPI lacks these). */
static const char *const null_names[] = {
    "LB", "UB", "INTEGER16", "REAL2", "REAL16", "COMPLEX4", "COMPLEX32",
};

/* mpi4py's aliases among its own names (the same object under another name). */
static const char *const aliases[][2] = {
    {"SIGNED_LONG_LONG", "LONG_LONG"},
    {"BOOL", "C_BOOL"},
    {"SINT8_T", "INT8_T"},
    {"SINT16_T", "INT16_T"},
    {"SINT32_T", "INT32_T"},
    {"SINT64_T", "INT64_T"},
    {"F_BOOL", "LOGICAL"},
    {"F_INT", "INTEGER"},
    {"F_FLOAT", "REAL"},
    {"F_DOUBLE", "DOUBLE_PRECISION"},
    {"F_COMPLEX", "COMPLEX"},
    {"F_FLOAT_COMPLEX", "COMPLEX"},
    {"F_DOUBLE_COMPLEX", "DOUBLE_COMPLEX"},
};

/* mpi4py's TypeDict: a typecode, the name of the datatype it maps to. */
static const char *const typecodes[][2] = {
    {"?", "C_BOOL"},
    {"c", "CHAR"},
    {"b", "SIGNED_CHAR"},
    {"h", "SHORT"},
    {"i", "INT"},
    {"l", "LONG"},
    {"q", "LONG_LONG"},
    {"B", "UNSIGNED_CHAR"},
    {"H", "UNSIGNED_SHORT"},
    {"I", "UNSIGNED"},
    {"L", "UNSIGNED_LONG"},
    {"Q", "UNSIGNED_LONG_LONG"},
    {"f", "FLOAT"},
    {"d", "DOUBLE"},
    {"g", "LONG_DOUBLE"},
    {"e", "FLOAT16"},
    {"Zf", "C_FLOAT_COMPLEX"},
    {"Zd", "C_DOUBLE_COMPLEX"},
    {"Zg", "C_LONG_DOUBLE_COMPLEX"},
    {"F", "C_FLOAT_COMPLEX"},
    {"D", "C_DOUBLE_COMPLEX"},
    {"G", "C_LONG_DOUBLE_COMPLEX"},
    {"b1", "C_BOOL"},
    {"i1", "INT8_T"},
    {"i2", "INT16_T"},
    {"i4", "INT32_T"},
    {"i8", "INT64_T"},
    {"u1", "UINT8_T"},
    {"u2", "UINT16_T"},
    {"u4", "UINT32_T"},
    {"u8", "UINT64_T"},
    {"f2", "FLOAT16"},
    {"f4", "FLOAT"},
    {"f8", "DOUBLE"},
    {"f16", "LONG_DOUBLE"},
    {"c8", "C_FLOAT_COMPLEX"},
    {"c16", "C_DOUBLE_COMPLEX"},
    {"c32", "C_LONG_DOUBLE_COMPLEX"},
    {"n", "LONG"},
    {"N", "UNSIGNED_LONG"},
    {"p", "LONG"},
    {"P", "UNSIGNED_LONG"},
    {"a", "CHAR"},
    {"S", "CHAR"},
    {"S1", "CHAR"},
    {"s", "CHAR"},
    {"1s", "CHAR"},
    {"U", "WCHAR"},
    {"U1", "WCHAR"},
    {"u", "UINT16_T"},
    {"1u", "UINT16_T"},
    {"w", "WCHAR"},
    {"1w", "WCHAR"},
    {"M", "INT64_T"},
    {"M8", "INT64_T"},
    {"m", "INT64_T"},
    {"m8", "INT64_T"},
};

static DatatypeObject *predef_obj[NPREDEF];
static PyObject *typedict;           /* mpi4py's _typedict */
static DatatypeObject *by_char[128]; /* its one-character keys */
DatatypeObject *py__dt_null, *py__dt_byte;
DatatypeObject *py__dt_c[SHMCOLL_DTYPE_COUNT];

static DatatypeObject *predef_named(const char *name)
{
	for (int i = 0; i < NPREDEF; i++)
		if (!strcmp(predefs[i].name, name))
			return predef_obj[i];
	return NULL;
}

/* ---- the object ---- */

static DatatypeObject *dt_alloc(PyTypeObject *type)
{
	DatatypeObject *t = (DatatypeObject *)type->tp_alloc(type, 0);

	if (t) {
		t->pre = -1;
		t->basic = B_NONE;
		t->combiner = COMBINER_NAMED;
	}
	return t;
}

static int is_null(const DatatypeObject *t)
{
	return t->freed || t->basic == B_NONE;
}

static void dt_dealloc(DatatypeObject *t)
{
	PyMem_Free(t->runs);
	Py_XDECREF(t->contents);
	Py_XDECREF(t->name);
	Py_TYPE(t)->tp_free((PyObject *)t);
}

/* Datatype(datatype=None): the same datatype (mpi4py copies the handle), or DATATYPE_NULL. */
static PyObject *dt_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"datatype", NULL};
	PyObject *o = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Datatype", kwlist, &o))
		return NULL;
	if (!o || o == Py_None)
		o = (PyObject *)py__dt_null;
	if (!PyObject_TypeCheck(o, &py__DatatypeType))
		return PyErr_Format(PyExc_TypeError, "Datatype: expected a Datatype, got %.100s",
		                    Py_TYPE(o)->tp_name);
	Py_INCREF(o);
	return o;
}

static PyObject *dt_richcompare(PyObject *a, PyObject *b, int op)
{
	int eq;

	if (!PyObject_TypeCheck(b, &py__DatatypeType) || (op != Py_EQ && op != Py_NE))
		Py_RETURN_NOTIMPLEMENTED;
	/* Every null datatype is DATATYPE_NULL (a freed one became it); else one handle each. */
	eq = a == b || (is_null((DatatypeObject *)a) && is_null((DatatypeObject *)b));
	return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t dt_hash(PyObject *a)
{
	return is_null((DatatypeObject *)a) ? 0 : _Py_HashPointer(a);
}

static int dt_bool(PyObject *a)
{
	return !is_null((DatatypeObject *)a);
}

static PyObject *dt_repr(PyObject *self)
{
	DatatypeObject *t = (DatatypeObject *)self;

	if (t->freed)
		return PyUnicode_FromString("<shmcoll.Datatype DATATYPE_NULL (freed)>");
	if (t->pre >= 0)
		return PyUnicode_FromFormat("<shmcoll.Datatype %s>", predefs[t->pre].name);
	return PyUnicode_FromFormat("<shmcoll.Datatype derived: %zd bytes, extent %zd>", t->size,
	                            py__extent(t));
}

/* Raises for a datatype that cannot be used (null or freed): NULL. */
static PyObject *null_error(const char *what)
{
	return py__raise_errno(EINVAL, what);
}

#define LIVE_OR_RAISE(t, what)                                                                     \
	do {                                                                                       \
		if (is_null(t))                                                                    \
			return null_error(what ": the datatype is DATATYPE_NULL");                 \
	} while (0)

static PyObject *dt_get_size(DatatypeObject *t, PyObject *unused)
{
	LIVE_OR_RAISE(t, "Get_size");
	return PyLong_FromSsize_t(t->size);
}

static PyObject *dt_get_extent(DatatypeObject *t, PyObject *unused)
{
	LIVE_OR_RAISE(t, "Get_extent");
	return Py_BuildValue("(nn)", t->lb, py__extent(t));
}

static PyObject *dt_get_true_extent(DatatypeObject *t, PyObject *unused)
{
	LIVE_OR_RAISE(t, "Get_true_extent");
	return Py_BuildValue("(nn)", t->true_lb, t->true_ub - t->true_lb);
}

static PyObject *dt_commit(DatatypeObject *t, PyObject *unused)
{
	LIVE_OR_RAISE(t, "Commit");
	t->committed = 1;
	Py_INCREF(t);
	return (PyObject *)t;
}

static PyObject *dt_free(DatatypeObject *t, PyObject *unused)
{
	LIVE_OR_RAISE(t, "Free");
	if (t->pre >= 0)
		return py__raise_errno(EINVAL, "Free: a predefined datatype cannot be freed");
	t->freed = 1;
	Py_RETURN_NONE;
}

static PyObject *dt_get_envelope(DatatypeObject *t, PyObject *unused)
{
	Py_ssize_t ni = 0, na = 0, nd = 0;

	LIVE_OR_RAISE(t, "Get_envelope");
	if (t->contents) {
		ni = PyList_GET_SIZE(PyTuple_GET_ITEM(t->contents, 0));
		na = PyList_GET_SIZE(PyTuple_GET_ITEM(t->contents, 1));
		nd = PyList_GET_SIZE(PyTuple_GET_ITEM(t->contents, 2));
	}
	return Py_BuildValue("(nnni)", ni, na, nd, t->combiner);
}

static PyObject *dt_get_contents(DatatypeObject *t, PyObject *unused)
{
	LIVE_OR_RAISE(t, "Get_contents");
	if (!t->contents)
		return py__raise_errno(EINVAL, "Get_contents: a predefined datatype has none");
	return Py_BuildValue("(NNN)", PySequence_List(PyTuple_GET_ITEM(t->contents, 0)),
	                     PySequence_List(PyTuple_GET_ITEM(t->contents, 1)),
	                     PySequence_List(PyTuple_GET_ITEM(t->contents, 2)));
}

static PyObject *dt_get_name(DatatypeObject *t, PyObject *unused)
{
	if (t->name) {
		Py_INCREF(t->name);
		return t->name;
	}
	if (t->freed)
		return PyUnicode_FromString("MPI_DATATYPE_NULL");
	if (t->pre >= 0)
		return PyUnicode_FromFormat("MPI_%s", predefs[t->pre].name);
	return PyUnicode_FromString("");
}

static PyObject *dt_set_name(DatatypeObject *t, PyObject *name)
{
	if (!PyUnicode_Check(name))
		return PyErr_Format(PyExc_TypeError, "Set_name: expected a str");
	Py_INCREF(name);
	Py_XSETREF(t->name, name);
	Py_RETURN_NONE;
}

/* ---- derived datatypes ---- */

/* A type map under construction: runs appended one placement of a base type at a time. */
struct build {
	struct run *runs;
	Py_ssize_t n, cap;
	Py_ssize_t size, nbasic;
	Py_ssize_t lb, ub, true_lb, true_ub, align;
	int basic, any;
};

static int add_run(struct build *b, Py_ssize_t disp, Py_ssize_t len)
{
	if (len == 0)
		return 0;
	if (b->n && b->runs[b->n - 1].disp + b->runs[b->n - 1].len == disp) {
		b->runs[b->n - 1].len += len; /* follows the last run: one run */
		return 0;
	}
	if (b->n == b->cap) {
		Py_ssize_t cap = b->cap ? 2 * b->cap : 8;
		struct run *r = PyMem_Realloc(b->runs, (size_t)cap * sizeof(*r));

		if (!r) {
			PyErr_NoMemory();
			return -1;
		}
		b->runs = r;
		b->cap = cap;
	}
	b->runs[b->n].disp = disp;
	b->runs[b->n].len = len;
	b->n++;
	return 0;
}

/* Places count elements of base one after another from byte at (one block). */
static int place(struct build *b, const DatatypeObject *base, Py_ssize_t at, Py_ssize_t count)
{
	Py_ssize_t ext = py__extent(base), i, r;

	if (count <= 0)
		return 0;
	for (i = 0; i < count; i++) {
		Py_ssize_t o = at + i * ext;

		if (base->contig && i > 0 && ext == base->size) {
			/* The rest of the block is one run: no need to go element by element. */
			if (add_run(b, o, (count - i) * base->size) < 0)
				return -1;
			break;
		}
		for (r = 0; r < base->nruns; r++)
			if (add_run(b, o + base->runs[r].disp, base->runs[r].len) < 0)
				return -1;
	}
	b->size += count * base->size;
	b->nbasic += count * base->nbasic;
	if (!b->any) {
		b->lb = at + base->lb;
		b->ub = at + (count - 1) * ext + base->ub;
		b->true_lb = at + base->true_lb;
		b->true_ub = at + (count - 1) * ext + base->true_ub;
		b->basic = base->basic;
		b->align = base->align;
		b->any = 1;
	} else {
		Py_ssize_t lo = at + base->lb, hi = at + (count - 1) * ext + base->ub;
		Py_ssize_t tlo = at + base->true_lb, thi = at + (count - 1) * ext + base->true_ub;

		if (ext < 0) { /* a negative extent places the elements downwards */
			Py_ssize_t t = lo;

			lo = at + (count - 1) * ext + base->lb;
			hi = t - base->lb + base->ub;
			tlo = at + (count - 1) * ext + base->true_lb;
			thi = at + base->true_ub;
		}
		b->lb = lo < b->lb ? lo : b->lb;
		b->ub = hi > b->ub ? hi : b->ub;
		b->true_lb = tlo < b->true_lb ? tlo : b->true_lb;
		b->true_ub = thi > b->true_ub ? thi : b->true_ub;
		if (b->basic != base->basic)
			b->basic = B_MIXED;
		if (base->align > b->align)
			b->align = base->align;
	}
	return 0;
}

/* The new datatype of a finished build, made from contents (integers, addresses, datatypes:
 * three lists, stolen) by combiner. */
static PyObject *finish(struct build *b, int combiner, PyObject *contents)
{
	DatatypeObject *t;

	if (!contents) {
		PyMem_Free(b->runs);
		return NULL;
	}
	t = dt_alloc(&py__DatatypeType);
	if (!t) {
		PyMem_Free(b->runs);
		Py_DECREF(contents);
		return NULL;
	}
	t->runs = b->runs;
	t->nruns = b->n;
	t->size = b->size;
	t->nbasic = b->nbasic;
	t->basic = b->any ? b->basic : B_BYTE; /* an empty type: no data, it moves nothing */
	t->lb = b->any ? b->lb : 0;
	t->ub = b->any ? b->ub : 0;
	t->true_lb = b->any ? b->true_lb : 0;
	t->true_ub = b->any ? b->true_ub : 0;
	t->align = b->any ? b->align : 1;
	t->contig = t->nruns <= 1 && t->lb == 0 && t->ub == t->size &&
	            (t->nruns == 0 || t->runs[0].disp == 0);
	t->combiner = combiner;
	t->contents = contents;
	return (PyObject *)t;
}

static PyObject *contents_of(PyObject *ints, PyObject *addrs, PyObject *types)
{
	if (!ints || !addrs || !types) {
		Py_XDECREF(ints);
		Py_XDECREF(addrs);
		Py_XDECREF(types);
		return NULL;
	}
	return Py_BuildValue("(NNN)", ints, addrs, types);
}

/* A sequence of n ints (n -1: any length, set): a PyMem array, or NULL with an exception. */
static Py_ssize_t *int_array(PyObject *obj, Py_ssize_t *n, const char *what)
{
	PyObject *seq = PySequence_Fast(obj, "expected a sequence of integers");
	Py_ssize_t i, len, *a;

	if (!seq)
		return NULL;
	len = PySequence_Fast_GET_SIZE(seq);
	if (*n >= 0 && len != *n) {
		Py_DECREF(seq);
		PyErr_Format(PyExc_ValueError, "%s: expected %zd items, got %zd", what, *n, len);
		return NULL;
	}
	a = PyMem_Malloc(sizeof(*a) * (size_t)(len ? len : 1));
	if (!a) {
		Py_DECREF(seq);
		PyErr_NoMemory();
		return NULL;
	}
	for (i = 0; i < len; i++) {
		a[i] = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i), PyExc_OverflowError);
		if (a[i] == -1 && PyErr_Occurred()) {
			PyMem_Free(a);
			Py_DECREF(seq);
			return NULL;
		}
	}
	Py_DECREF(seq);
	*n = len;
	return a;
}

static PyObject *list_of(const Py_ssize_t *a, Py_ssize_t n)
{
	PyObject *l = PyList_New(n);

	for (Py_ssize_t i = 0; l && i < n; i++) {
		PyObject *v = PyLong_FromSsize_t(a[i]);

		if (!v) {
			Py_CLEAR(l);
			break;
		}
		PyList_SET_ITEM(l, i, v);
	}
	return l;
}

/* The ints head, then a, then b (either may be NULL), as one list. */
static PyObject *ints_of(const Py_ssize_t *head, Py_ssize_t nh, const Py_ssize_t *a, Py_ssize_t na,
                         const Py_ssize_t *b, Py_ssize_t nb)
{
	PyObject *l = PyList_New(nh + na + nb);
	Py_ssize_t i, at = 0;

	for (i = 0; l && i < nh + na + nb; i++) {
		Py_ssize_t v = i < nh ? head[i] : i < nh + na ? a[i - nh] : b[i - nh - na];
		PyObject *o = PyLong_FromSsize_t(v);

		if (!o) {
			Py_CLEAR(l);
			break;
		}
		PyList_SET_ITEM(l, at++, o);
	}
	return l;
}

static PyObject *list1(DatatypeObject *t)
{
	return Py_BuildValue("[O]", (PyObject *)t);
}

static int negative(Py_ssize_t v, const char *what)
{
	if (v < 0) {
		PyErr_Format(PyExc_ValueError, "%s: negative count %zd", what, v);
		return 1;
	}
	return 0;
}

static PyObject *dt_contiguous(DatatypeObject *t, PyObject *args)
{
	struct build b = {0};
	Py_ssize_t count;

	LIVE_OR_RAISE(t, "Create_contiguous");
	if (!PyArg_ParseTuple(args, "n:Create_contiguous", &count) ||
	    negative(count, "Create_contiguous") || place(&b, t, 0, count) < 0) {
		PyMem_Free(b.runs);
		return NULL;
	}
	return finish(&b, COMBINER_CONTIGUOUS,
	              contents_of(Py_BuildValue("[n]", count), PyList_New(0), list1(t)));
}

/* Vector and hvector: count blocks of blocklength elements, stride apart (in extents, or in
 * bytes with bytes set). */
static PyObject *vector(DatatypeObject *t, PyObject *args, int bytes)
{
	const char *what = bytes ? "Create_hvector" : "Create_vector";
	Py_ssize_t count, bl, stride, i;
	struct build b = {0};

	LIVE_OR_RAISE(t, "Create_vector");
	if (!PyArg_ParseTuple(args, "nnn", &count, &bl, &stride) || negative(count, what) ||
	    negative(bl, what))
		return NULL;
	for (i = 0; i < count; i++)
		if (place(&b, t, i * (bytes ? stride : stride * py__extent(t)), bl) < 0) {
			PyMem_Free(b.runs);
			return NULL;
		}
	return finish(&b, bytes ? COMBINER_HVECTOR : COMBINER_VECTOR,
	              contents_of(bytes ? Py_BuildValue("[nn]", count, bl)
	                                : Py_BuildValue("[nnn]", count, bl, stride),
	                          bytes ? Py_BuildValue("[n]", stride) : PyList_New(0), list1(t)));
}

static PyObject *dt_vector(DatatypeObject *t, PyObject *args)
{
	return vector(t, args, 0);
}

static PyObject *dt_hvector(DatatypeObject *t, PyObject *args)
{
	return vector(t, args, 1);
}

/* Indexed, hindexed, and their _block forms: blocks of blocklengths[i] (or blocklength)
 * elements at displacements[i] (in extents, or bytes). */
static PyObject *indexed(DatatypeObject *t, PyObject *args, int bytes, int block)
{
	const char *what = bytes ? (block ? "Create_hindexed_block" : "Create_hindexed")
	                         : (block ? "Create_indexed_block" : "Create_indexed");
	PyObject *blo, *dso, *ints, *addrs;
	Py_ssize_t *bls = NULL, *ds = NULL, n = -1, nb, one = 0, i;
	struct build b = {0};

	LIVE_OR_RAISE(t, "Create_indexed");
	if (!PyArg_ParseTuple(args, "OO", &blo, &dso))
		return NULL;
	if (block) {
		one = PyNumber_AsSsize_t(blo, PyExc_OverflowError);
		if ((one == -1 && PyErr_Occurred()) || negative(one, what))
			return NULL;
	}
	if (!(ds = int_array(dso, &n, what)))
		return NULL;
	nb = n;
	if (!block && !(bls = int_array(blo, &nb, what)))
		goto fail;
	for (i = 0; i < n; i++) {
		Py_ssize_t len = block ? one : bls[i];

		if (negative(len, what) ||
		    place(&b, t, bytes ? ds[i] : ds[i] * py__extent(t), len) < 0)
			goto fail;
	}
	/* MPI's contents: count, the blocklength(s), and the displacements of the extent
	 * forms (the byte forms give theirs as addresses). */
	if (block)
		ints =
		    ints_of((Py_ssize_t[]){n, one}, 2, bytes ? NULL : ds, bytes ? 0 : n, NULL, 0);
	else
		ints = ints_of(&n, 1, bls, n, bytes ? NULL : ds, bytes ? 0 : n);
	addrs = bytes ? list_of(ds, n) : PyList_New(0);
	PyMem_Free(bls);
	PyMem_Free(ds);
	return finish(&b,
	              bytes ? (block ? COMBINER_HINDEXED_BLOCK : COMBINER_HINDEXED)
	                    : (block ? COMBINER_INDEXED_BLOCK : COMBINER_INDEXED),
	              contents_of(ints, addrs, list1(t)));
fail:
	PyMem_Free(b.runs);
	PyMem_Free(bls);
	PyMem_Free(ds);
	return NULL;
}

static PyObject *dt_indexed(DatatypeObject *t, PyObject *args)
{
	return indexed(t, args, 0, 0);
}

static PyObject *dt_hindexed(DatatypeObject *t, PyObject *args)
{
	return indexed(t, args, 1, 0);
}

static PyObject *dt_indexed_block(DatatypeObject *t, PyObject *args)
{
	return indexed(t, args, 0, 1);
}

static PyObject *dt_hindexed_block(DatatypeObject *t, PyObject *args)
{
	return indexed(t, args, 1, 1);
}

/* Create_struct(blocklengths, displacements, datatypes): a class method in mpi4py. Its
 * extent is padded to the largest alignment of its members, as a C struct's (MPI's
 * epsilon). */
static PyObject *dt_struct(PyObject *cls, PyObject *args)
{
	PyObject *blo, *dso, *tso, *types = NULL, *ints = NULL;
	Py_ssize_t *bls = NULL, *ds = NULL, n = -1, nb, i;
	struct build b = {0};

	if (!PyArg_ParseTuple(args, "OOO:Create_struct", &blo, &dso, &tso))
		return NULL;
	if (!(ds = int_array(dso, &n, "Create_struct")))
		return NULL;
	nb = n;
	if (!(bls = int_array(blo, &nb, "Create_struct")))
		goto fail;
	if (!(types = PySequence_List(tso)))
		goto fail;
	if (PyList_GET_SIZE(types) != n) {
		PyErr_Format(PyExc_ValueError, "Create_struct: %zd datatypes for %zd blocks",
		             PyList_GET_SIZE(types), n);
		goto fail;
	}
	for (i = 0; i < n; i++) {
		PyObject *o = PyList_GET_ITEM(types, i);

		if (!PyObject_TypeCheck(o, &py__DatatypeType)) {
			PyErr_Format(PyExc_TypeError, "Create_struct: item %zd is not a Datatype",
			             i);
			goto fail;
		}
		if (is_null((DatatypeObject *)o)) {
			py__raise_errno(EINVAL, "Create_struct: a datatype is DATATYPE_NULL");
			goto fail;
		}
		if (negative(bls[i], "Create_struct") ||
		    place(&b, (DatatypeObject *)o, ds[i], bls[i]) < 0)
			goto fail;
	}
	if (b.any && b.align > 1) {
		Py_ssize_t ext = b.ub - b.lb, pad = (b.align - ext % b.align) % b.align;

		b.ub += pad;
	}
	ints = ints_of(&n, 1, bls, n, NULL, 0);
	PyMem_Free(bls);
	{
		PyObject *addrs = list_of(ds, n);

		PyMem_Free(ds);
		return finish(&b, COMBINER_STRUCT, contents_of(ints, addrs, types));
	}
fail:
	Py_XDECREF(types);
	PyMem_Free(b.runs);
	PyMem_Free(bls);
	PyMem_Free(ds);
	return NULL;
}

/* Create_subarray(sizes, subsizes, starts, order=ORDER_C): the subarray of an array of
 * sizes; its extent is the whole array's. */
enum { ORDER_C = 0, ORDER_FORTRAN = 1 };

static int subarray_rec(struct build *b, const DatatypeObject *t, const Py_ssize_t *sizes,
                        const Py_ssize_t *subs, const Py_ssize_t *starts, Py_ssize_t nd,
                        Py_ssize_t d, Py_ssize_t at, const Py_ssize_t *stride, int fortran)
{
	Py_ssize_t k = fortran ? nd - 1 - d : d, i;

	if (d == nd - 1)
		return place(b, t, at + starts[k] * stride[k], subs[k]);
	for (i = 0; i < subs[k]; i++)
		if (subarray_rec(b, t, sizes, subs, starts, nd, d + 1,
		                 at + (starts[k] + i) * stride[k], stride, fortran) < 0)
			return -1;
	return 0;
}

static PyObject *dt_subarray(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"sizes", "subsizes", "starts", "order", NULL};
	PyObject *so, *sso, *sto;
	Py_ssize_t *sizes = NULL, *subs = NULL, *starts = NULL, *stride = NULL, nd = -1, n2, n3, i,
	           total = 1;
	int order = ORDER_C, any_empty = 0;
	struct build b = {0};
	PyObject *ints;

	LIVE_OR_RAISE(t, "Create_subarray");
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|i:Create_subarray", kwlist, &so, &sso, &sto,
	                                 &order))
		return NULL;
	if (!(sizes = int_array(so, &nd, "Create_subarray")))
		return NULL;
	n2 = n3 = nd;
	if (!(subs = int_array(sso, &n2, "Create_subarray")) ||
	    !(starts = int_array(sto, &n3, "Create_subarray")))
		goto fail;
	if (nd < 1) {
		PyErr_SetString(PyExc_ValueError, "Create_subarray: no dimensions");
		goto fail;
	}
	if (!(stride = PyMem_Malloc(sizeof(*stride) * (size_t)nd))) {
		PyErr_NoMemory();
		goto fail;
	}
	for (i = 0; i < nd; i++) {
		if (sizes[i] < 1 || subs[i] < 0 || starts[i] < 0 ||
		    starts[i] + subs[i] > sizes[i]) {
			PyErr_Format(PyExc_ValueError,
			             "Create_subarray: dimension %zd: size %zd, subsize %zd, "
			             "start %zd",
			             i, sizes[i], subs[i], starts[i]);
			goto fail;
		}
		any_empty |= subs[i] == 0;
		total *= sizes[i];
	}
	/* Bytes between consecutive indices of each dimension. */
	if (order == ORDER_FORTRAN) {
		Py_ssize_t s = py__extent(t);

		for (i = 0; i < nd; i++) {
			stride[i] = s;
			s *= sizes[i];
		}
	} else {
		Py_ssize_t s = py__extent(t);

		for (i = nd - 1; i >= 0; i--) {
			stride[i] = s;
			s *= sizes[i];
		}
	}
	if (!any_empty &&
	    subarray_rec(&b, t, sizes, subs, starts, nd, 0, 0, stride, order == ORDER_FORTRAN) < 0)
		goto fail;
	/* The extent is the whole array's, from 0. */
	b.lb = t->lb;
	b.ub = t->lb + total * py__extent(t);
	if (!b.any) {
		b.any = 1;
		b.basic = t->basic;
		b.align = t->align;
		b.true_lb = b.true_ub = 0;
	}
	{
		Py_ssize_t tail[1] = {order}, *ss = PyMem_Malloc(sizeof(*ss) * (size_t)(2 * nd));

		ints = NULL;
		if (ss) {
			memcpy(ss, subs, sizeof(*ss) * (size_t)nd);
			memcpy(ss + nd, starts, sizeof(*ss) * (size_t)nd);
			ints = ints_of(&nd, 1, sizes, nd, ss, 2 * nd);
			if (ints) {
				PyObject *o = PyLong_FromSsize_t(tail[0]);

				if (!o || PyList_Append(ints, o) < 0)
					Py_CLEAR(ints);
				Py_XDECREF(o);
			}
			PyMem_Free(ss);
		} else {
			PyErr_NoMemory();
		}
	}
	PyMem_Free(sizes);
	PyMem_Free(subs);
	PyMem_Free(starts);
	PyMem_Free(stride);
	return finish(&b, COMBINER_SUBARRAY, contents_of(ints, PyList_New(0), list1(t)));
fail:
	PyMem_Free(b.runs);
	PyMem_Free(sizes);
	PyMem_Free(subs);
	PyMem_Free(starts);
	PyMem_Free(stride);
	return NULL;
}

/* The same type map with new bounds. */
static PyObject *dt_resized(DatatypeObject *t, PyObject *args)
{
	struct build b = {0};
	Py_ssize_t lb, extent, r;

	LIVE_OR_RAISE(t, "Create_resized");
	if (!PyArg_ParseTuple(args, "nn:Create_resized", &lb, &extent))
		return NULL;
	for (r = 0; r < t->nruns; r++)
		if (add_run(&b, t->runs[r].disp, t->runs[r].len) < 0) {
			PyMem_Free(b.runs);
			return NULL;
		}
	b.size = t->size;
	b.nbasic = t->nbasic;
	b.basic = t->basic;
	b.align = t->align;
	b.true_lb = t->true_lb;
	b.true_ub = t->true_ub;
	b.lb = lb;
	b.ub = lb + extent;
	b.any = 1;
	return finish(&b, COMBINER_RESIZED,
	              contents_of(PyList_New(0), Py_BuildValue("[nn]", lb, extent), list1(t)));
}

static PyObject *dt_dup(DatatypeObject *t, PyObject *unused)
{
	struct build b = {0};
	Py_ssize_t r;
	PyObject *d;

	LIVE_OR_RAISE(t, "Dup");
	for (r = 0; r < t->nruns; r++)
		if (add_run(&b, t->runs[r].disp, t->runs[r].len) < 0) {
			PyMem_Free(b.runs);
			return NULL;
		}
	b.size = t->size;
	b.nbasic = t->nbasic;
	b.basic = t->basic;
	b.align = t->align;
	b.lb = t->lb;
	b.ub = t->ub;
	b.true_lb = t->true_lb;
	b.true_ub = t->true_ub;
	b.any = 1;
	d = finish(&b, COMBINER_DUP, contents_of(PyList_New(0), PyList_New(0), list1(t)));
	if (d)
		((DatatypeObject *)d)->committed = t->committed;
	return d;
}

/* ---- packing ---- */

void py__pack(const DatatypeObject *t, const char *src, Py_ssize_t count, char *dst)
{
	Py_ssize_t ext = py__extent(t), i, r;

	if (t->contig) {
		memcpy(dst, src, (size_t)(count * t->size));
		return;
	}
	for (i = 0; i < count; i++, src += ext)
		for (r = 0; r < t->nruns; r++) {
			memcpy(dst, src + t->runs[r].disp, (size_t)t->runs[r].len);
			dst += t->runs[r].len;
		}
}

void py__unpack(const DatatypeObject *t, const char *src, Py_ssize_t count, char *dst)
{
	Py_ssize_t ext = py__extent(t), i, r;

	if (t->contig) {
		memcpy(dst, src, (size_t)(count * t->size));
		return;
	}
	for (i = 0; i < count; i++, dst += ext)
		for (r = 0; r < t->nruns; r++) {
			memcpy(dst + t->runs[r].disp, src, (size_t)t->runs[r].len);
			src += t->runs[r].len;
		}
}

void py__unpack_bytes(const DatatypeObject *t, const char *src, Py_ssize_t nbytes, char *dst)
{
	Py_ssize_t ext = py__extent(t), r;

	if (t->contig) {
		memcpy(dst, src, (size_t)nbytes);
		return;
	}
	for (; nbytes > 0; dst += ext)
		for (r = 0; r < t->nruns && nbytes > 0; r++) {
			Py_ssize_t len = t->runs[r].len < nbytes ? t->runs[r].len : nbytes;

			memcpy(dst + t->runs[r].disp, src, (size_t)len);
			src += len;
			nbytes -= len;
		}
}

/* ---- Pack and Unpack ---- */

/* The bytes an element is swapped in for external32 (big-endian): the sizes of its parts
 * (a complex's halves, a pair's value and int), 0 for none; -1: not one basic kind. */
static int ext32_parts(int basic, Py_ssize_t parts[2])
{
	const Py_ssize_t ld = (Py_ssize_t)sizeof(long double);

	parts[0] = parts[1] = 0;
	switch (basic) {
	case B_BYTE:
	case B_BOOL:
	case B_I8:
	case B_U8:
		return 0;
	case B_I16:
	case B_U16:
	case B_F16:
	case B_BF16:
		parts[0] = 2;
		return 0;
	case B_I32:
	case B_U32:
	case B_F32:
		parts[0] = 4;
		return 0;
	case B_I64:
	case B_U64:
	case B_F64:
		parts[0] = 8;
		return 0;
	case B_FLD:
		parts[0] = ld;
		return 0;
	case B_C64:
		parts[0] = parts[1] = 4;
		return 0;
	case B_C128:
		parts[0] = parts[1] = 8;
		return 0;
	case B_CLD:
		parts[0] = parts[1] = ld;
		return 0;
	case B_SHORT_INT:
		parts[0] = 2;
		parts[1] = 4;
		return 0;
	case B_2INT:
	case B_FLOAT_INT:
		parts[0] = parts[1] = 4;
		return 0;
	case B_LONG_INT:
	case B_DOUBLE_INT:
		parts[0] = 8;
		parts[1] = 4;
		return 0;
	case B_LD_INT:
		parts[0] = ld;
		parts[1] = 4;
		return 0;
	default:
		return -1;
	}
}

static void reverse(char *p, Py_ssize_t n)
{
	for (Py_ssize_t i = 0, j = n - 1; i < j; i++, j--) {
		char t = p[i];

		p[i] = p[j];
		p[j] = t;
	}
}

/* Packed data of n basic elements of kind basic, from host order to big-endian (or back:
 * the same swaps). */
static void swap_basic(int basic, char *p, Py_ssize_t n)
{
	Py_ssize_t parts[2], i;

	ext32_parts(basic, parts);
	if (!parts[0] || (parts[0] == 1 && !parts[1]))
		return;
	for (i = 0; i < n; i++) {
		reverse(p, parts[0]);
		p += parts[0];
		if (parts[1]) {
			reverse(p, parts[1]);
			p += parts[1];
		}
	}
}

/* The memory of a raw buffer argument (no message form): 0 or -1 with the error. */
static int raw(PyObject *obj, int writable, struct mem *m)
{
	return py__mem_get(obj, writable, m);
}

/* Pack(inbuf, outbuf, position, comm) -> position: the elements of this datatype in inbuf
 * (as many as it holds whole) packed into outbuf from byte position; Unpack(inbuf, position,
 * outbuf, comm) -> position: as many elements as outbuf holds, unpacked from inbuf's byte
 * position. external: the packed side is big-endian (external32). */
static PyObject *pack(DatatypeObject *t, PyObject *in, PyObject *out, Py_ssize_t pos, int unpacking,
                      int external, const char *what)
{
	Py_ssize_t ext = py__extent(t), count, n;
	struct mem mi, mo, *data, *packed;
	PyObject *res = NULL;
	char *tmp = NULL;

	LIVE_OR_RAISE(t, "Pack");
	if (external && t->basic == B_MIXED)
		return PyErr_Format(PyExc_NotImplementedError,
		                    "%s: external32 of a datatype of several basic kinds", what);
	if (raw(in, 0, &mi) < 0)
		return NULL;
	if (raw(out, 1, &mo) < 0) {
		py__mem_release(&mi);
		return NULL;
	}
	data = unpacking ? &mo : &mi; /* the elements' side, and the packed bytes' */
	packed = unpacking ? &mi : &mo;
	count = ext > 0 ? data->len / ext : 0;
	n = count * t->size;
	if (pos < 0 || pos > packed->len || n > packed->len - pos) {
		PyErr_Format(PyExc_ValueError,
		             "%s: %zd packed bytes at position %zd do not fit the %zd bytes of %s",
		             what, n, pos, packed->len, unpacking ? "inbuf" : "outbuf");
		goto out;
	}
	if (!unpacking) {
		py__pack(t, mi.ptr, count, mo.ptr + pos);
		if (external)
			swap_basic(t->basic, mo.ptr + pos, count * t->nbasic);
	} else {
		if (external) {
			if (!(tmp = PyMem_Malloc((size_t)(n ? n : 1)))) {
				PyErr_NoMemory();
				goto out;
			}
			memcpy(tmp, mi.ptr + pos, (size_t)n);
			swap_basic(t->basic, tmp, count * t->nbasic);
		}
		py__unpack(t, tmp ? tmp : mi.ptr + pos, count, mo.ptr);
	}
	res = PyLong_FromSsize_t(pos + n);
out:
	PyMem_Free(tmp);
	py__mem_release(&mi);
	py__mem_release(&mo);
	return res;
}

static PyObject *dt_pack(DatatypeObject *t, PyObject *args)
{
	PyObject *in, *out, *comm;
	Py_ssize_t pos;

	if (!PyArg_ParseTuple(args, "OOnO:Pack", &in, &out, &pos, &comm))
		return NULL;
	return pack(t, in, out, pos, 0, 0, "Pack");
}

static PyObject *dt_unpack(DatatypeObject *t, PyObject *args)
{
	PyObject *in, *out, *comm;
	Py_ssize_t pos;

	if (!PyArg_ParseTuple(args, "OnOO:Unpack", &in, &pos, &out, &comm))
		return NULL;
	return pack(t, in, out, pos, 1, 0, "Unpack");
}

static int datarep_ok(const char *rep)
{
	if (!strcmp(rep, "external32"))
		return 0;
	PyErr_Format(PyExc_ValueError, "unknown data representation '%s' (external32 only)", rep);
	return -1;
}

static PyObject *dt_pack_external(DatatypeObject *t, PyObject *args)
{
	PyObject *in, *out;
	const char *rep;
	Py_ssize_t pos;

	if (!PyArg_ParseTuple(args, "sOOn:Pack_external", &rep, &in, &out, &pos) ||
	    datarep_ok(rep) < 0)
		return NULL;
	return pack(t, in, out, pos, 0, 1, "Pack_external");
}

static PyObject *dt_unpack_external(DatatypeObject *t, PyObject *args)
{
	PyObject *in, *out;
	const char *rep;
	Py_ssize_t pos;

	if (!PyArg_ParseTuple(args, "sOnO:Unpack_external", &rep, &in, &pos, &out) ||
	    datarep_ok(rep) < 0)
		return NULL;
	return pack(t, in, out, pos, 1, 1, "Unpack_external");
}

/* Pack_size(count, comm): the bytes count elements pack to (no overhead). */
static PyObject *dt_pack_size(DatatypeObject *t, PyObject *args)
{
	PyObject *comm;
	Py_ssize_t count;

	LIVE_OR_RAISE(t, "Pack_size");
	if (!PyArg_ParseTuple(args, "nO:Pack_size", &count, &comm))
		return NULL;
	if (count < 0)
		return PyErr_Format(PyExc_ValueError, "Pack_size: negative count %zd", count);
	return PyLong_FromSsize_t(count * t->size);
}

static PyObject *dt_pack_external_size(DatatypeObject *t, PyObject *args)
{
	const char *rep;
	Py_ssize_t count;

	LIVE_OR_RAISE(t, "Pack_external_size");
	if (!PyArg_ParseTuple(args, "sn:Pack_external_size", &rep, &count) || datarep_ok(rep) < 0)
		return NULL;
	if (count < 0)
		return PyErr_Format(PyExc_ValueError, "Pack_external_size: negative count %zd",
		                    count);
	return PyLong_FromSsize_t(count * t->size);
}

/* ---- lookups ---- */

DatatypeObject *py__dt_of_format(const char *format)
{
	PyObject *key, *v;

	if (!format)
		format = "B";
	switch (format[0]) {
	case '@':
	case '=':
	case '<':
		format++;
		break;
	case '>':
	case '!':
		if (format[1] && strchr("bBc?x", format[1]) && !format[2]) {
			format++; /* one byte has no byte order */
			break;
		}
		PyErr_Format(PyExc_ValueError, "format string '%s' with non-native byte order",
		             format);
		return NULL;
	default:
		break;
	}
	/* One character, the common case (NumPy's and array's formats): a table lookup. */
	if (format[0] && !format[1] && (unsigned char)format[0] < 128 &&
	    by_char[(unsigned char)format[0]])
		return by_char[(unsigned char)format[0]];
	v = PyDict_GetItemString(typedict, format);
	if (v)
		return (DatatypeObject *)v;
	key = PyUnicode_FromString(format);
	if (key) {
		PyErr_SetObject(PyExc_KeyError, key);
		Py_DECREF(key);
	}
	return NULL;
}

DatatypeObject *py__dt_get(PyObject *obj)
{
	PyObject *v, *code;

	if (PyObject_TypeCheck(obj, &py__DatatypeType))
		return (DatatypeObject *)obj;
	if (PyUnicode_Check(obj)) {
		v = PyDict_GetItemWithError(typedict, obj);
		if (!v && !PyErr_Occurred())
			PyErr_SetObject(PyExc_KeyError, obj);
		return (DatatypeObject *)v;
	}
	/* A NumPy dtype (or scalar type): by its typecode character. */
	code = PyObject_GetAttrString(obj, "char");
	if (!code) {
		PyErr_Clear();
		PyErr_SetObject(PyExc_KeyError, obj);
		return NULL;
	}
	v = PyUnicode_Check(code) ? PyDict_GetItemWithError(typedict, code) : NULL;
	Py_DECREF(code);
	if (!v && !PyErr_Occurred())
		PyErr_SetObject(PyExc_KeyError, obj);
	return (DatatypeObject *)v;
}

/* ---- the type ---- */

static PyObject *get_size(DatatypeObject *t, void *u)
{
	return dt_get_size(t, NULL);
}

static PyObject *get_extent(DatatypeObject *t, void *u)
{
	LIVE_OR_RAISE(t, "extent");
	return PyLong_FromSsize_t(py__extent(t));
}

static PyObject *get_lb(DatatypeObject *t, void *u)
{
	LIVE_OR_RAISE(t, "lb");
	return PyLong_FromSsize_t(t->lb);
}

static PyObject *get_ub(DatatypeObject *t, void *u)
{
	LIVE_OR_RAISE(t, "ub");
	return PyLong_FromSsize_t(t->ub);
}

static PyObject *get_true_extent(DatatypeObject *t, void *u)
{
	LIVE_OR_RAISE(t, "true_extent");
	return PyLong_FromSsize_t(t->true_ub - t->true_lb);
}

static PyObject *get_true_lb(DatatypeObject *t, void *u)
{
	LIVE_OR_RAISE(t, "true_lb");
	return PyLong_FromSsize_t(t->true_lb);
}

static PyObject *get_true_ub(DatatypeObject *t, void *u)
{
	LIVE_OR_RAISE(t, "true_ub");
	return PyLong_FromSsize_t(t->true_ub);
}

static PyObject *get_envelope(DatatypeObject *t, void *u)
{
	return dt_get_envelope(t, NULL);
}

static PyObject *get_combiner(DatatypeObject *t, void *u)
{
	LIVE_OR_RAISE(t, "combiner");
	return PyLong_FromLong(t->combiner);
}

static PyObject *get_is_named(DatatypeObject *t, void *u)
{
	return PyBool_FromLong(t->pre >= 0 && !t->freed);
}

static PyObject *get_is_predefined(DatatypeObject *t, void *u)
{
	return PyBool_FromLong(t->freed || t->pre >= 0);
}

static PyObject *get_name(DatatypeObject *t, void *u)
{
	return dt_get_name(t, NULL);
}

static int set_name(DatatypeObject *t, PyObject *v, void *u)
{
	PyObject *r;

	if (!v) {
		PyErr_SetString(PyExc_AttributeError, "cannot delete the name");
		return -1;
	}
	r = dt_set_name(t, v);
	Py_XDECREF(r);
	return r ? 0 : -1;
}

static PyObject *get_basic(DatatypeObject *t, void *u)
{
	return PyLong_FromLong(t->freed ? B_NONE : t->basic);
}

static PyObject *get_code(DatatypeObject *t, void *u)
{
	/* The C API's shmcoll_dtype of a predefined type the library reduces, or -1. */
	return PyLong_FromLong(t->pre >= 0 ? py__basic_cdt(t->basic) : -1);
}

static PyGetSetDef dt_getset[] = {
    {"size", (getter)get_size, NULL, "bytes of data of one element", NULL},
    {"extent", (getter)get_extent, NULL, "ub - lb", NULL},
    {"lb", (getter)get_lb, NULL, "the lower bound", NULL},
    {"ub", (getter)get_ub, NULL, "the upper bound", NULL},
    {"true_extent", (getter)get_true_extent, NULL, "the bytes the data spans", NULL},
    {"true_lb", (getter)get_true_lb, NULL, "where the data starts", NULL},
    {"true_ub", (getter)get_true_ub, NULL, "where the data ends", NULL},
    {"envelope", (getter)get_envelope, NULL, "Get_envelope()", NULL},
    {"combiner", (getter)get_combiner, NULL, "how it was made (COMBINER_*)", NULL},
    {"is_named", (getter)get_is_named, NULL, "whether it is a named predefined one", NULL},
    {"is_predefined", (getter)get_is_predefined, NULL, "whether it is predefined", NULL},
    {"name", (getter)get_name, (setter)set_name, "its name", NULL},
    {"_basic", (getter)get_basic, NULL, "the basic kind of its elements (datatype.c)", NULL},
    {"code", (getter)get_code, NULL, "the C API's shmcoll_dtype, or -1", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef dt_methods[] = {
    {"Get_size", (PyCFunction)dt_get_size, METH_NOARGS, "Bytes of data of one element."},
    {"Get_extent", (PyCFunction)dt_get_extent, METH_NOARGS, "(lb, extent)"},
    {"Get_true_extent", (PyCFunction)dt_get_true_extent, METH_NOARGS, "(true_lb, true_extent)"},
    {"Commit", (PyCFunction)dt_commit, METH_NOARGS, "Commit() -> self"},
    {"Free", (PyCFunction)dt_free, METH_NOARGS, "Makes it DATATYPE_NULL."},
    {"Dup", (PyCFunction)dt_dup, METH_NOARGS, "A new datatype of the same type map."},
    {"Get_envelope", (PyCFunction)dt_get_envelope, METH_NOARGS,
     "(num_integers, num_addresses, num_datatypes, combiner)"},
    {"Get_contents", (PyCFunction)dt_get_contents, METH_NOARGS, "(integers, addresses, datatypes)"},
    {"Get_name", (PyCFunction)dt_get_name, METH_NOARGS, "Its name."},
    {"Set_name", (PyCFunction)dt_set_name, METH_O, "Set_name(name)"},
    {"Create_contiguous", (PyCFunction)dt_contiguous, METH_VARARGS, "Create_contiguous(count)"},
    {"Create_vector", (PyCFunction)dt_vector, METH_VARARGS,
     "Create_vector(count, blocklength, stride)"},
    {"Create_hvector", (PyCFunction)dt_hvector, METH_VARARGS,
     "Create_hvector(count, blocklength, stride): stride in bytes"},
    {"Create_indexed", (PyCFunction)dt_indexed, METH_VARARGS,
     "Create_indexed(blocklengths, displacements)"},
    {"Create_hindexed", (PyCFunction)dt_hindexed, METH_VARARGS,
     "Create_hindexed(blocklengths, displacements): displacements in bytes"},
    {"Create_indexed_block", (PyCFunction)dt_indexed_block, METH_VARARGS,
     "Create_indexed_block(blocklength, displacements)"},
    {"Create_hindexed_block", (PyCFunction)dt_hindexed_block, METH_VARARGS,
     "Create_hindexed_block(blocklength, displacements): displacements in bytes"},
    {"Create_struct", (PyCFunction)dt_struct, METH_VARARGS | METH_CLASS,
     "Create_struct(blocklengths, displacements, datatypes)"},
    {"Create_subarray", KW(dt_subarray), METH_VARARGS | METH_KEYWORDS,
     "Create_subarray(sizes, subsizes, starts, order=ORDER_C)"},
    {"Create_resized", (PyCFunction)dt_resized, METH_VARARGS, "Create_resized(lb, extent)"},
    {"Create_dup", (PyCFunction)dt_dup, METH_NOARGS, "Dup()"},
    {"Pack", (PyCFunction)dt_pack, METH_VARARGS, "Pack(inbuf, outbuf, position, comm) -> position"},
    {"Unpack", (PyCFunction)dt_unpack, METH_VARARGS,
     "Unpack(inbuf, position, outbuf, comm) -> position"},
    {"Pack_size", (PyCFunction)dt_pack_size, METH_VARARGS, "Pack_size(count, comm) -> bytes"},
    {"Pack_external", (PyCFunction)dt_pack_external, METH_VARARGS,
     "Pack_external('external32', inbuf, outbuf, position) -> position (big-endian)"},
    {"Unpack_external", (PyCFunction)dt_unpack_external, METH_VARARGS,
     "Unpack_external('external32', inbuf, position, outbuf) -> position"},
    {"Pack_external_size", (PyCFunction)dt_pack_external_size, METH_VARARGS,
     "Pack_external_size('external32', count) -> bytes"},
    {"Resized", (PyCFunction)dt_resized, METH_VARARGS, "Create_resized(lb, extent)"},
    {NULL, NULL, 0, NULL},
};

static PyNumberMethods dt_as_number = {
    .nb_bool = dt_bool,
};

PyTypeObject py__DatatypeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.Datatype",
    .tp_basicsize = sizeof(DatatypeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A datatype: a predefined one (MPI.INT, shmcoll.FLOAT32, ...) or one made from "
              "them (Create_vector ...).",
    .tp_new = dt_new,
    .tp_dealloc = (destructor)dt_dealloc,
    .tp_repr = dt_repr,
    .tp_richcompare = dt_richcompare,
    .tp_hash = dt_hash,
    .tp_as_number = &dt_as_number,
    .tp_methods = dt_methods,
    .tp_getset = dt_getset,
};

/* ---- the module's datatypes ---- */

static DatatypeObject *make_predef(int i)
{
	const struct predef *p = &predefs[i];
	DatatypeObject *t = dt_alloc(&py__DatatypeType);
	Py_ssize_t vs;

	if (!t)
		return NULL;
	t->pre = i;
	t->basic = p->basic;
	t->size = py__basic_size[p->basic];
	t->nbasic = p->basic == B_NONE ? 0 : 1;
	t->committed = 1;
	t->true_lb = 0;
	if (p->int_at) {
		/* A pair: its value, then its int at int_at (padding between them and after). */
		vs = t->size - 4;
		t->nruns = p->int_at == vs ? 1 : 2;
		t->runs = PyMem_Malloc(sizeof(*t->runs) * 2);
		if (!t->runs) {
			Py_DECREF(t);
			PyErr_NoMemory();
			return NULL;
		}
		if (t->nruns == 1) {
			t->runs[0] = (struct run){0, t->size};
		} else {
			t->runs[0] = (struct run){0, vs};
			t->runs[1] = (struct run){p->int_at, 4};
		}
		t->ub = p->extent;
		t->true_ub = p->int_at + 4;
		t->align = vs > 4 ? (vs > 8 ? 16 : 8) : 4;
		t->contig = t->nruns == 1 && t->ub == t->size;
		return t;
	}
	if (t->size) {
		t->nruns = 1;
		t->runs = PyMem_Malloc(sizeof(*t->runs));
		if (!t->runs) {
			Py_DECREF(t);
			PyErr_NoMemory();
			return NULL;
		}
		t->runs[0] = (struct run){0, t->size};
	}
	t->ub = t->true_ub = t->size;
	t->contig = 1;
	/* A complex aligns as its parts; long double to 16. */
	vs = p->basic == B_C64 || p->basic == B_C128 || p->basic == B_CLD ? t->size / 2 : t->size;
	t->align = vs ? vs : 1;
	return t;
}

int py__datatypes_init(PyObject *m)
{
	static const char *const c_names[SHMCOLL_DTYPE_COUNT] = {
	    "INT8_T",   "UINT8_T", "INT32_T",  "UINT32_T", "INT64_T",
	    "UINT64_T", "FLOAT16", "BFLOAT16", "FLOAT",    "DOUBLE",
	};
	static const char *const c_consts[SHMCOLL_DTYPE_COUNT] = {
	    "INT8",   "UINT8",   "INT32",    "UINT32",  "INT64",
	    "UINT64", "FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64",
	};
	PyObject *all = PyDict_New();
	size_t k;
	int i;

	typedict = PyDict_New();
	if (!all || !typedict)
		goto fail;
	for (i = 0; i < NPREDEF; i++) {
		predef_obj[i] = make_predef(i);
		if (!predef_obj[i] ||
		    PyDict_SetItemString(all, predefs[i].name, (PyObject *)predef_obj[i]) < 0)
			goto fail;
		if (predefs[i].alias &&
		    PyDict_SetItemString(all, predefs[i].alias, (PyObject *)predef_obj[i]) < 0)
			goto fail;
	}
	py__dt_null = predef_named("DATATYPE_NULL");
	py__dt_byte = predef_named("BYTE");
	for (k = 0; k < sizeof(null_names) / sizeof(null_names[0]); k++)
		if (PyDict_SetItemString(all, null_names[k], (PyObject *)py__dt_null) < 0)
			goto fail;
	for (k = 0; k < sizeof(aliases) / sizeof(aliases[0]); k++)
		if (PyDict_SetItemString(all, aliases[k][0],
		                         (PyObject *)predef_named(aliases[k][1])) < 0)
			goto fail;
	for (k = 0; k < sizeof(typecodes) / sizeof(typecodes[0]); k++) {
		if (PyDict_SetItemString(typedict, typecodes[k][0],
		                         (PyObject *)predef_named(typecodes[k][1])) < 0)
			goto fail;
		if (!typecodes[k][0][1])
			by_char[(unsigned char)typecodes[k][0][0]] = predef_named(typecodes[k][1]);
	}
	for (i = 0; i < SHMCOLL_DTYPE_COUNT; i++) {
		py__dt_c[i] = predef_named(c_names[i]);
		if (PyDict_SetItemString(all, c_consts[i], (PyObject *)py__dt_c[i]) < 0)
			goto fail;
	}
	/* Every name as a module attribute too (shmcoll.INT32, MPI.py takes the MPI names). */
	{
		PyObject *key, *val;
		Py_ssize_t pos = 0;

		while (PyDict_Next(all, &pos, &key, &val))
			if (PyObject_SetAttr(m, key, val) < 0)
				goto fail;
	}
	if (py__add(m, "_datatypes", all) < 0 || py__add(m, "_typedict", typedict) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_NAMED", COMBINER_NAMED) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_DUP", COMBINER_DUP) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_CONTIGUOUS", COMBINER_CONTIGUOUS) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_VECTOR", COMBINER_VECTOR) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_HVECTOR", COMBINER_HVECTOR) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_INDEXED", COMBINER_INDEXED) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_HINDEXED", COMBINER_HINDEXED) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_INDEXED_BLOCK", COMBINER_INDEXED_BLOCK) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_HINDEXED_BLOCK", COMBINER_HINDEXED_BLOCK) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_STRUCT", COMBINER_STRUCT) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_SUBARRAY", COMBINER_SUBARRAY) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_DARRAY", COMBINER_DARRAY) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_RESIZED", COMBINER_RESIZED) < 0 ||
	    PyModule_AddIntConstant(m, "ORDER_C", ORDER_C) < 0 ||
	    PyModule_AddIntConstant(m, "ORDER_FORTRAN", ORDER_FORTRAN) < 0 ||
	    PyModule_AddIntConstant(m, "ORDER_F", ORDER_FORTRAN) < 0)
		goto fail;
	Py_DECREF(all);
	return 0;
fail:
	Py_XDECREF(all);
	return -1;
}
