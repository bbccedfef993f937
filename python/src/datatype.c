/* datatype.c - datatypes: every predefined one mpi4py has (MPI.INT, MPI.DOUBLE_INT, ...,
 * and shmcoll's own FLOAT16 and BFLOAT16), and the derived ones made from them
 * (Create_contiguous, _vector, _hvector, _indexed, _hindexed, _indexed_block,
 * _hindexed_block, _struct, _subarray, _darray, _resized, Dup, and the Fortran ones of
 * Create_f90_*), with MPI's sizes, bounds and extents, envelopes and contents, attributes,
 * typecodes and pickling.
 *
 * A datatype is its type map kept as runs of bytes (struct run: where, from an element's
 * start, its data lies, in the map's order) and the one basic kind of all its basic
 * elements, if they have one. Messages whose datatype is contiguous move their buffer as it
 * is; others are packed into scratch memory with py__pack and unpacked with py__unpack, so
 * every call of the library sees contiguous bytes, or basic elements for a reduction. */
#include "shmcoll_py.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <wchar.h>

/* MPI's combiners (Get_envelope), numbered as Open MPI numbers them (what Debian's mpi4py
 * shows). VALUE_INDEX is MPI 4.1's, which no datatype here has: Get_value_index gives the
 * predefined pairs only, as mpi4py 4 over Open MPI 5 does. */
enum {
	COMBINER_NAMED = 0,
	COMBINER_DUP = 1,
	COMBINER_CONTIGUOUS = 2,
	COMBINER_VECTOR = 3,
	COMBINER_HVECTOR = 5,
	COMBINER_INDEXED = 6,
	COMBINER_HINDEXED = 8,
	COMBINER_INDEXED_BLOCK = 9,
	COMBINER_STRUCT = 11,
	COMBINER_SUBARRAY = 12,
	COMBINER_DARRAY = 13,
	COMBINER_F90_REAL = 14,
	COMBINER_F90_COMPLEX = 15,
	COMBINER_F90_INTEGER = 16,
	COMBINER_RESIZED = 17,
	COMBINER_HINDEXED_BLOCK = 18,
	COMBINER_VALUE_INDEX = 19,
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
    {"n", "COUNT"}, /* ssize_t: MPI_Count's size, as mpi4py maps it */
    {"N", "UNSIGNED_LONG"},
    {"p", "AINT"}, /* intptr_t: MPI_Aint's */
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

/* A datatype object: the contract's DatatypeObject, then what only this file reads. An
 * object is a handle, as an MPI_Datatype is: Datatype(t), and the datatypes Get_contents and
 * decode give, are new handles of t's datatype, equal to t. They share its type map (the
 * root's runs, which they keep alive), its name and its attributes. Free nulls the handle it
 * is called on; a handle of Get_contents' is a reference of its own, as MPI's are: freeing it
 * leaves the datatype to its other handles. */
struct dt {
	DatatypeObject t;
	struct dt *root; /* the handle the datatype was made as: itself, or one held */
	int ref;         /* Get_contents' and decode's: Free releases this handle only */
	char f90;        /* Create_f90_*'s ('i', 'f', 'c'): predefined, though not named */
	PyObject *attrs; /* the root's: keyval -> (value, copy_fn, delete_fn), or NULL */
};

#define DT(t)   ((struct dt *)(t))
#define ROOT(t) (DT(t)->root)

static DatatypeObject *dt_alloc(PyTypeObject *type)
{
	DatatypeObject *t = (DatatypeObject *)type->tp_alloc(type, 0);

	if (t) {
		t->pre = -1;
		t->basic = B_NONE;
		t->combiner = COMBINER_NAMED;
		ROOT(t) = DT(t);
	}
	return t;
}

static int is_null(const DatatypeObject *t)
{
	return t->freed || t->basic == B_NONE;
}

static int dt_traverse(DatatypeObject *t, visitproc visit, void *arg)
{
	if (ROOT(t) != DT(t))
		Py_VISIT((PyObject *)ROOT(t));
	Py_VISIT(t->contents);
	Py_VISIT(t->name);
	Py_VISIT(DT(t)->attrs);
	return 0;
}

/* Only attributes can close a cycle (a value that holds its datatype). */
static int dt_clear(DatatypeObject *t)
{
	Py_CLEAR(DT(t)->attrs);
	return 0;
}

static void dt_dealloc(DatatypeObject *t)
{
	PyObject_GC_UnTrack(t);
	if (ROOT(t) != DT(t))
		Py_DECREF((PyObject *)ROOT(t)); /* the runs are the root's */
	else
		PyMem_Free(t->runs);
	Py_XDECREF(t->contents);
	Py_XDECREF(t->name);
	Py_XDECREF(DT(t)->attrs);
	Py_TYPE(t)->tp_free((PyObject *)t);
}

/* A new handle of src's datatype (of DATATYPE_NULL when src is null); ref: a reference of
 * its own (Get_contents'). */
static DatatypeObject *dt_copy(const DatatypeObject *src, int ref)
{
	DatatypeObject *t;
	struct dt *root;

	if (is_null(src))
		src = py__dt_null;
	root = ROOT(src);
	t = dt_alloc(&py__DatatypeType);
	if (!t)
		return NULL;
	t->pre = src->pre;
	t->basic = src->basic;
	t->size = src->size;
	t->nbasic = src->nbasic;
	t->lb = src->lb;
	t->ub = src->ub;
	t->true_lb = src->true_lb;
	t->true_ub = src->true_ub;
	t->align = src->align;
	t->nruns = src->nruns;
	t->runs = src->runs;
	t->contig = src->contig;
	t->committed = src->committed;
	t->combiner = src->combiner;
	t->contents = src->contents;
	Py_XINCREF(t->contents);
	Py_INCREF((PyObject *)root);
	ROOT(t) = root;
	DT(t)->ref = ref;
	DT(t)->f90 = DT(src)->f90;
	return t;
}

/* Datatype(datatype=None): a new handle of datatype's datatype, or of DATATYPE_NULL (as
 * mpi4py's, a new object either way). */
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
	return (PyObject *)dt_copy((DatatypeObject *)o, 0);
}

static PyObject *dt_richcompare(PyObject *a, PyObject *b, int op)
{
	const DatatypeObject *x = (const DatatypeObject *)a, *y = (const DatatypeObject *)b;
	int eq;

	if (!PyObject_TypeCheck(b, &py__DatatypeType) || (op != Py_EQ && op != Py_NE))
		Py_RETURN_NOTIMPLEMENTED;
	/* Every null handle is DATATYPE_NULL (a freed one became it); others are equal when
	 * they are handles of one datatype. */
	if (is_null(x) || is_null(y))
		eq = is_null(x) && is_null(y);
	else
		eq = ROOT(x) == ROOT(y);
	return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t dt_hash(PyObject *a)
{
	return is_null((DatatypeObject *)a) ? 0 : _Py_HashPointer(ROOT(a));
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

/* Raises shmcoll.Error(EINVAL, message) of MPI error class cls ("ERR_TYPE" ...), as
 * shmcoll/_errors.py's raise_mpi does: NULL. */
static PyObject *mpi_error(const char *cls, const char *fmt, ...)
{
	PyObject *mod, *codes = NULL, *code = NULL, *msg, *r = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = PyUnicode_FromFormatV(fmt, ap);
	va_end(ap);
	if (!msg)
		return NULL;
	mod = PyImport_ImportModule("shmcoll._errors");
	if (mod)
		codes = PyObject_GetAttrString(mod, "CODES");
	if (codes)
		code = PyMapping_GetItemString(codes, cls);
	if (code)
		r = PyObject_CallMethod(mod, "raise_mpi", "OO", code, msg);
	Py_XDECREF(r); /* it raises: r is NULL */
	Py_XDECREF(code);
	Py_XDECREF(codes);
	Py_XDECREF(mod);
	Py_DECREF(msg);
	return NULL;
}

#define LIVE_OR_RAISE(t, what)                                                                     \
	do {                                                                                       \
		if (is_null(t))                                                                    \
			return mpi_error("ERR_TYPE", what ": the datatype is DATATYPE_NULL");      \
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

/* Whether t is predefined: named, or a Fortran one of Create_f90_* (which MPI forbids
 * freeing). */
static int predefined(const DatatypeObject *t)
{
	return t->pre >= 0 || DT(t)->f90;
}

static int delete_attrs(DatatypeObject *t);

static PyObject *dt_free(DatatypeObject *t, PyObject *unused)
{
	LIVE_OR_RAISE(t, "Free");
	if (predefined(t))
		return mpi_error("ERR_TYPE", "Free: a predefined datatype cannot be freed");
	/* The datatype goes with its last handle; its attributes go now (MPI calls their
	 * delete_fn at MPI_Type_free), unless this is a reference of Get_contents'. */
	if (!DT(t)->ref && delete_attrs(t) < 0)
		return NULL;
	t->freed = 1;
	Py_RETURN_NONE;
}

/* free(): mpi4py 4's safe free: the predefined datatypes stay, others become
 * DATATYPE_NULL; again and again. */
static PyObject *dt_safe_free(DatatypeObject *t, PyObject *unused)
{
	if (is_null(t) || predefined(t))
		Py_RETURN_NONE;
	return dt_free(t, NULL);
}

static PyObject *dt_get_name(DatatypeObject *t, PyObject *unused)
{
	PyObject *name = ROOT(t)->t.name;

	if (t->freed)
		return PyUnicode_FromString("MPI_DATATYPE_NULL");
	if (name) {
		Py_INCREF(name);
		return name;
	}
	if (t->pre >= 0)
		return PyUnicode_FromFormat("MPI_%s", predefs[t->pre].name);
	return PyUnicode_FromString("");
}

static PyObject *dt_set_name(DatatypeObject *t, PyObject *name)
{
	LIVE_OR_RAISE(t, "Set_name");
	if (!PyUnicode_Check(name))
		return PyErr_Format(PyExc_TypeError, "Set_name: expected a str");
	Py_INCREF(name);
	Py_XSETREF(ROOT(t)->t.name, name);
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

/* [t] for contents: a reference of its own, so that freeing t leaves this datatype's base
 * alive, as in MPI. */
static PyObject *list1(DatatypeObject *t)
{
	return Py_BuildValue("[N]", (PyObject *)dt_copy(t, 1));
}

static int negative(Py_ssize_t v, const char *what)
{
	if (v < 0) {
		PyErr_Format(PyExc_ValueError, "%s: negative count %zd", what, v);
		return 1;
	}
	return 0;
}

static PyObject *dt_contiguous(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"count", NULL};
	struct build b = {0};
	Py_ssize_t count;

	LIVE_OR_RAISE(t, "Create_contiguous");
	if (!PyArg_ParseTupleAndKeywords(args, kw, "n:Create_contiguous", kwlist, &count) ||
	    negative(count, "Create_contiguous") || place(&b, t, 0, count) < 0) {
		PyMem_Free(b.runs);
		return NULL;
	}
	return finish(&b, COMBINER_CONTIGUOUS,
	              contents_of(Py_BuildValue("[n]", count), PyList_New(0), list1(t)));
}

/* Vector and hvector: count blocks of blocklength elements, stride apart (in extents, or in
 * bytes with bytes set). */
static PyObject *vector(DatatypeObject *t, PyObject *args, PyObject *kw, int bytes)
{
	static char *kwlist[] = {"count", "blocklength", "stride", NULL};
	const char *what = bytes ? "Create_hvector" : "Create_vector";
	Py_ssize_t count, bl, stride, i;
	struct build b = {0};

	LIVE_OR_RAISE(t, "Create_vector");
	if (!PyArg_ParseTupleAndKeywords(args, kw, "nnn", kwlist, &count, &bl, &stride) ||
	    negative(count, what) || negative(bl, what))
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

static PyObject *dt_vector(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	return vector(t, args, kw, 0);
}

static PyObject *dt_hvector(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	return vector(t, args, kw, 1);
}

/* Indexed, hindexed, and their _block forms: blocks of blocklengths[i] (or blocklength)
 * elements at displacements[i] (in extents, or bytes). */
static PyObject *indexed(DatatypeObject *t, PyObject *args, PyObject *kw, int bytes, int block)
{
	static char *kwlist[] = {"blocklengths", "displacements", NULL};
	static char *kwlist1[] = {"blocklength", "displacements", NULL};
	const char *what = bytes ? (block ? "Create_hindexed_block" : "Create_hindexed")
	                         : (block ? "Create_indexed_block" : "Create_indexed");
	PyObject *blo, *dso, *ints, *addrs;
	Py_ssize_t *bls = NULL, *ds = NULL, n = -1, nb, one = 0, i;
	struct build b = {0};

	LIVE_OR_RAISE(t, "Create_indexed");
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO", block ? kwlist1 : kwlist, &blo, &dso))
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

static PyObject *dt_indexed(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	return indexed(t, args, kw, 0, 0);
}

static PyObject *dt_hindexed(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	return indexed(t, args, kw, 1, 0);
}

static PyObject *dt_indexed_block(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	return indexed(t, args, kw, 0, 1);
}

static PyObject *dt_hindexed_block(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	return indexed(t, args, kw, 1, 1);
}

/* Create_struct(blocklengths, displacements, datatypes): a class method in mpi4py. Its
 * extent is padded to the largest alignment of its members, as a C struct's (MPI's
 * epsilon). */
static PyObject *dt_struct(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"blocklengths", "displacements", "datatypes", NULL};
	PyObject *blo, *dso, *tso, *types = NULL, *ints = NULL;
	Py_ssize_t *bls = NULL, *ds = NULL, n = -1, nb, i;
	struct build b = {0};

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:Create_struct", kwlist, &blo, &dso, &tso))
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
	/* The contents keep references of their own (list1). */
	for (i = 0; i < n; i++) {
		PyObject *o = (PyObject *)dt_copy((DatatypeObject *)PyList_GET_ITEM(types, i), 1);

		if (!o || PyList_SetItem(types, i, o) < 0)
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

/* Create_darray(size, rank, gsizes, distribs, dargs, psizes, order=ORDER_C): the part of an
 * array of gsizes that process rank of a grid of psizes processes owns (HPF's distributed
 * arrays). The grid is row-major, as a Cartesian communicator's, whatever the array's
 * order. Per dimension: DISTRIBUTE_BLOCK gives each process one block of darg indices
 * (ceil(gsize / psize) by default), DISTRIBUTE_CYCLIC deals blocks of darg (1 by default)
 * round the processes, DISTRIBUTE_NONE does not distribute it (its psize is 1). The type
 * map is the owned elements in the array's order (ORDER_C: the last dimension fastest), and
 * the extent the whole array's, as MPI's darray. */
enum { DISTRIBUTE_BLOCK = 0, DISTRIBUTE_CYCLIC = 1, DISTRIBUTE_NONE = 2 };
#define DISTRIBUTE_DFLT_DARG (-1)

/* Places the elements owned in dimensions d.. (in the array's order: dims[d] is the d-th
 * outermost) at byte at. own[k]: the indices owned in dimension k, nown[k] of them. */
static int darray_rec(struct build *b, const DatatypeObject *t, Py_ssize_t **own,
                      const Py_ssize_t *nown, const Py_ssize_t *stride, const Py_ssize_t *dims,
                      Py_ssize_t nd, Py_ssize_t d, Py_ssize_t at)
{
	Py_ssize_t k = dims[d], i, j;

	for (i = 0; i < nown[k]; i = j) {
		if (d < nd - 1) {
			if (darray_rec(b, t, own, nown, stride, dims, nd, d + 1,
			               at + own[k][i] * stride[k]) < 0)
				return -1;
			j = i + 1;
			continue;
		}
		/* The innermost dimension: its runs of consecutive indices are blocks. */
		for (j = i + 1; j < nown[k] && own[k][j] == own[k][j - 1] + 1; j++)
			;
		if (place(b, t, at + own[k][i] * stride[k], j - i) < 0)
			return -1;
	}
	return 0;
}

static PyObject *dt_darray(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"size",  "rank",   "gsizes", "distribs",
	                         "dargs", "psizes", "order",  NULL};
	PyObject *go, *dio, *dao, *po, *ints = NULL;
	Py_ssize_t *g = NULL, *dist = NULL, *darg = NULL, *ps = NULL, *nown = NULL, *stride = NULL,
	           *dims = NULL, **own = NULL, nd = -1, n2, n3, n4, i, j, total = 1, grid = 1, rest;
	int size, rank, order = ORDER_C;
	struct build b = {0};

	LIVE_OR_RAISE(t, "Create_darray");
	if (!PyArg_ParseTupleAndKeywords(args, kw, "iiOOOO|i:Create_darray", kwlist, &size, &rank,
	                                 &go, &dio, &dao, &po, &order))
		return NULL;
	if (!(g = int_array(go, &nd, "Create_darray")))
		return NULL;
	n2 = n3 = n4 = nd;
	if (!(dist = int_array(dio, &n2, "Create_darray")) ||
	    !(darg = int_array(dao, &n3, "Create_darray")) ||
	    !(ps = int_array(po, &n4, "Create_darray")))
		goto out;
	if (nd < 1 || size < 1 || rank < 0 || rank >= size ||
	    (order != ORDER_C && order != ORDER_FORTRAN)) {
		mpi_error("ERR_ARG", "Create_darray: %zd dimensions, process %d of %d, order %d",
		          nd, rank, size, order);
		goto out;
	}
	nown = PyMem_Calloc((size_t)nd, sizeof(*nown));
	stride = PyMem_Calloc((size_t)nd, sizeof(*stride));
	dims = PyMem_Calloc((size_t)nd, sizeof(*dims));
	own = PyMem_Calloc((size_t)nd, sizeof(*own));
	if (!nown || !stride || !dims || !own) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < nd; i++)
		grid *= ps[i] > 0 ? ps[i] : 0;
	for (i = 0; i < nd; i++) {
		Py_ssize_t blk = darg[i];

		if (g[i] < 1 || ps[i] < 1 || grid != size ||
		    (dist[i] != DISTRIBUTE_BLOCK && dist[i] != DISTRIBUTE_CYCLIC &&
		     dist[i] != DISTRIBUTE_NONE) ||
		    (dist[i] == DISTRIBUTE_NONE && ps[i] != 1) ||
		    (blk != DISTRIBUTE_DFLT_DARG && blk < 1) ||
		    (dist[i] == DISTRIBUTE_BLOCK && blk != DISTRIBUTE_DFLT_DARG &&
		     blk * ps[i] < g[i])) {
			mpi_error("ERR_ARG",
			          "Create_darray: dimension %zd: gsize %zd, distrib %zd, darg %zd, "
			          "psize %zd (a grid of %zd processes)",
			          i, g[i], dist[i], blk, ps[i], grid);
			goto out;
		}
		total *= g[i];
	}
	/* This process's place in the grid, row-major; the indices it owns in each dimension. */
	rest = rank;
	for (i = nd - 1; i >= 0; i--) {
		Py_ssize_t c = rest % ps[i], blk = darg[i], step;

		rest /= ps[i];
		if (dist[i] == DISTRIBUTE_NONE) {
			blk = g[i];
			c = 0;
		} else if (blk == DISTRIBUTE_DFLT_DARG) {
			blk = dist[i] == DISTRIBUTE_BLOCK ? (g[i] + ps[i] - 1) / ps[i] : 1;
		}
		step = dist[i] == DISTRIBUTE_CYCLIC ? blk * ps[i] : g[i] + blk * ps[i];
		if (!(own[i] = PyMem_Malloc(sizeof(**own) * (size_t)g[i]))) {
			PyErr_NoMemory();
			goto out;
		}
		for (j = c * blk; j < g[i]; j += step)
			for (Py_ssize_t x = j; x < j + blk && x < g[i]; x++)
				own[i][nown[i]++] = x;
	}
	/* Bytes between consecutive indices of each dimension, and the dimensions from the
	 * outermost in. */
	for (i = 0; i < nd; i++) {
		Py_ssize_t k = order == ORDER_C ? nd - 1 - i : i;

		stride[k] = i ? stride[order == ORDER_C ? k + 1 : k - 1] *
		                    g[order == ORDER_C ? k + 1 : k - 1]
		              : py__extent(t);
		dims[nd - 1 - i] = k;
	}
	if (darray_rec(&b, t, own, nown, stride, dims, nd, 0, 0) < 0)
		goto out;
	b.lb = 0;
	b.ub = total * py__extent(t);
	if (!b.any) {
		b.any = 1;
		b.basic = t->basic;
		b.align = t->align;
		b.true_lb = b.true_ub = 0;
	}
	ints = ints_of((Py_ssize_t[]){size, rank, nd}, 3, g, nd, dist, nd);
	if (ints) {
		PyObject *more = ints_of(darg, nd, ps, nd, (Py_ssize_t[]){order}, 1);

		if (!more ||
		    PyList_SetSlice(ints, PyList_GET_SIZE(ints), PyList_GET_SIZE(ints), more) < 0)
			Py_CLEAR(ints);
		Py_XDECREF(more);
	}
	if (ints) {
		PyObject *r =
		    finish(&b, COMBINER_DARRAY, contents_of(ints, PyList_New(0), list1(t)));

		b.runs = NULL; /* finish took them */
		ints = r;
	}
out:
	PyMem_Free(b.runs);
	for (i = 0; own && i < nd; i++)
		PyMem_Free(own[i]);
	PyMem_Free(own);
	PyMem_Free(dims);
	PyMem_Free(stride);
	PyMem_Free(nown);
	PyMem_Free(ps);
	PyMem_Free(darg);
	PyMem_Free(dist);
	PyMem_Free(g);
	return ints;
}

/* The same type map with new bounds. */
static PyObject *dt_resized(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"lb", "extent", NULL};
	struct build b = {0};
	Py_ssize_t lb, extent, r;

	LIVE_OR_RAISE(t, "Create_resized");
	if (!PyArg_ParseTupleAndKeywords(args, kw, "nn:Create_resized", kwlist, &lb, &extent))
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

/* A new datatype of t's type map and bounds, made by combiner from contents (stolen). */
static DatatypeObject *same_map(const DatatypeObject *t, int combiner, PyObject *contents)
{
	struct build b = {0};
	Py_ssize_t r;

	for (r = 0; r < t->nruns; r++)
		if (add_run(&b, t->runs[r].disp, t->runs[r].len) < 0) {
			PyMem_Free(b.runs);
			Py_XDECREF(contents);
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
	return (DatatypeObject *)finish(&b, combiner, contents);
}

static int copy_attrs(DatatypeObject *t, DatatypeObject *d);

static PyObject *dt_dup(DatatypeObject *t, PyObject *unused)
{
	DatatypeObject *d;

	LIVE_OR_RAISE(t, "Dup");
	d = same_map(t, COMBINER_DUP, contents_of(PyList_New(0), PyList_New(0), list1(t)));
	if (!d)
		return NULL;
	d->committed = t->committed;
	if (copy_attrs(t, d) < 0) {
		Py_DECREF(d);
		return NULL;
	}
	return (PyObject *)d;
}

/* ---- Fortran's, pairs, sizes ---- */

/* Create_f90_integer(r), Create_f90_real(p, r), Create_f90_complex(p, r): the datatype of
 * Fortran's selected_int_kind(r) and selected_real_kind(p, r) (gfortran's kinds, as Open
 * MPI chooses them: integers of 1, 2, 4, 8 bytes, reals of 4, 8 bytes and the 80-bit long
 * double). They are predefined (never freed), not named: their envelope gives p and r. One
 * datatype per (kind, p, r), as Open MPI keeps them; each call gives a new handle of it. */
static PyObject *f90_types; /* (combiner, p, r) -> the datatype */

static PyObject *f90(int combiner, int p, int r)
{
	const char *what = combiner == COMBINER_F90_INTEGER ? "Create_f90_integer"
	                   : combiner == COMBINER_F90_REAL  ? "Create_f90_real"
	                                                    : "Create_f90_complex";
	const char *base;
	DatatypeObject *t;
	PyObject *key, *ints;

	if (combiner == COMBINER_F90_INTEGER)
		base = r <= 2 ? "INTEGER1" : r <= 4 ? "INTEGER2" : r <= 9 ? "INTEGER4" : "INTEGER8";
	else if (p <= 6 && r <= 37)
		base = combiner == COMBINER_F90_REAL ? "REAL4" : "COMPLEX8";
	else if (p <= 15 && r <= 307)
		base = combiner == COMBINER_F90_REAL ? "REAL8" : "COMPLEX16";
	else
		base = combiner == COMBINER_F90_REAL ? "LONG_DOUBLE" : "C_LONG_DOUBLE_COMPLEX";
	if (combiner == COMBINER_F90_INTEGER && r > 18)
		return mpi_error("ERR_ARG", "%s: no Fortran integer kind has a range of 10^%d",
		                 what, r);
	if (combiner != COMBINER_F90_INTEGER && (p > 18 || r > 4931))
		return mpi_error("ERR_ARG", "%s: no Fortran kind has precision %d and range %d",
		                 what, p, r);
	if (!(key = Py_BuildValue("(iii)", combiner, p, r)))
		return NULL;
	t = (DatatypeObject *)PyDict_GetItemWithError(f90_types, key);
	if (t) {
		Py_DECREF(key);
		return (PyObject *)dt_copy(t, 0);
	}
	ints = combiner == COMBINER_F90_INTEGER ? Py_BuildValue("[i]", r)
	                                        : Py_BuildValue("[ii]", p, r);
	t = PyErr_Occurred() ? NULL
	                     : same_map(predef_named(base), combiner,
	                                contents_of(ints, PyList_New(0), PyList_New(0)));
	if (!t || PyDict_SetItem(f90_types, key, (PyObject *)t) < 0) {
		Py_XDECREF(t);
		Py_DECREF(key);
		return NULL;
	}
	Py_DECREF(key);
	t->committed = 1;
	DT(t)->f90 = combiner == COMBINER_F90_INTEGER ? 'i'
	             : combiner == COMBINER_F90_REAL  ? 'f'
	                                              : 'c';
	Py_DECREF(t); /* the dict's */
	return (PyObject *)dt_copy(t, 0);
}

static PyObject *dt_f90_integer(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"r", NULL};
	int r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "i:Create_f90_integer", kwlist, &r))
		return NULL;
	return f90(COMBINER_F90_INTEGER, 0, r);
}

static PyObject *dt_f90_real(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"p", "r", NULL};
	int p, r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "ii:Create_f90_real", kwlist, &p, &r))
		return NULL;
	return f90(COMBINER_F90_REAL, p, r);
}

static PyObject *dt_f90_complex(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"p", "r", NULL};
	int p, r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "ii:Create_f90_complex", kwlist, &p, &r))
		return NULL;
	return f90(COMBINER_F90_COMPLEX, p, r);
}

enum { TYPECLASS_INTEGER = 1, TYPECLASS_REAL = 2, TYPECLASS_COMPLEX = 3 };

/* Match_size(typeclass, size): the Fortran datatype of the class with elements of size
 * bytes, as Open MPI chooses it (a new handle). REAL*16 and COMPLEX*32 are not here. */
static PyObject *dt_match_size(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"typeclass", "size", NULL};
	static const struct {
		int typeclass, size;
		const char *name;
	} match[] = {
	    {TYPECLASS_INTEGER, 1, "INTEGER1"}, {TYPECLASS_INTEGER, 2, "INTEGER2"},
	    {TYPECLASS_INTEGER, 4, "INTEGER"},  {TYPECLASS_INTEGER, 8, "INTEGER8"},
	    {TYPECLASS_REAL, 4, "REAL"},        {TYPECLASS_REAL, 8, "REAL8"},
	    {TYPECLASS_COMPLEX, 8, "COMPLEX"},  {TYPECLASS_COMPLEX, 16, "COMPLEX16"},
	};
	int typeclass, size;
	size_t i;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "ii:Match_size", kwlist, &typeclass, &size))
		return NULL;
	for (i = 0; i < sizeof(match) / sizeof(match[0]); i++)
		if (match[i].typeclass == typeclass && match[i].size == size)
			return (PyObject *)dt_copy(predef_named(match[i].name), 0);
	return mpi_error("ERR_ARG", "Match_size: no Fortran kind of class %d has %d bytes",
	                 typeclass, size);
}

/* Get_value_index(value, index): the pair of MAXLOC and MINLOC for elements of value
 * with an index: MPI's predefined pairs (a new handle), DATATYPE_NULL for any other (as
 * mpi4py 4 gives it over Open MPI 5). */
static PyObject *dt_value_index(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"value", "index", NULL};
	static const char *const pairs[][2] = {
	    {"SHORT", "SHORT_INT"}, {"INT", "INT_INT"},       {"LONG", "LONG_INT"},
	    {"FLOAT", "FLOAT_INT"}, {"DOUBLE", "DOUBLE_INT"}, {"LONG_DOUBLE", "LONG_DOUBLE_INT"},
	};
	PyObject *value, *index;
	size_t i;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!:Get_value_index", kwlist,
	                                 &py__DatatypeType, &value, &py__DatatypeType, &index))
		return NULL;
	LIVE_OR_RAISE((DatatypeObject *)value, "Get_value_index");
	LIVE_OR_RAISE((DatatypeObject *)index, "Get_value_index");
	if (ROOT(index) == DT(predef_named("INT")))
		for (i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
			if (ROOT(value) == DT(predef_named(pairs[i][0])))
				return (PyObject *)dt_copy(predef_named(pairs[i][1]), 0);
	return (PyObject *)dt_copy(py__dt_null, 0);
}

/* ---- envelope, contents, decode ---- */

/* Where mpi4py 3 and 4 differ: 3's envelope is (ni, na, nd, combiner) and its contents
 * (integers, addresses, datatypes); 4's add MPI 4's large counts, (ni, na, nc, nd,
 * combiner) and (integers, addresses, counts, datatypes). The counts are always none here,
 * as mpi4py 4 over Open MPI 5 (which has no large-count constructors) gives them: the
 * integers and addresses are MPI 3's. */
static PyObject *dt_get_envelope(DatatypeObject *t, PyObject *unused)
{
	Py_ssize_t ni = 0, na = 0, nd = 0;

	LIVE_OR_RAISE(t, "Get_envelope");
	if (t->contents) {
		ni = PyList_GET_SIZE(PyTuple_GET_ITEM(t->contents, 0));
		na = PyList_GET_SIZE(PyTuple_GET_ITEM(t->contents, 1));
		nd = PyList_GET_SIZE(PyTuple_GET_ITEM(t->contents, 2));
	}
	if (py__mpi4py_api >= 4)
		return Py_BuildValue("(nnnni)", ni, na, (Py_ssize_t)0, nd, t->combiner);
	return Py_BuildValue("(nnni)", ni, na, nd, t->combiner);
}

/* The datatypes t was made from, each as a new handle of its own (MPI's get_contents gives
 * references the caller frees): a new list. */
static PyObject *contents_types(const DatatypeObject *t)
{
	PyObject *kept = PyTuple_GET_ITEM(t->contents, 2), *l;
	Py_ssize_t i, n = PyList_GET_SIZE(kept);

	if (!(l = PyList_New(n)))
		return NULL;
	for (i = 0; i < n; i++) {
		DatatypeObject *d = dt_copy((DatatypeObject *)PyList_GET_ITEM(kept, i), 1);

		if (!d) {
			Py_DECREF(l);
			return NULL;
		}
		PyList_SET_ITEM(l, i, (PyObject *)d);
	}
	return l;
}

static PyObject *dt_get_contents(DatatypeObject *t, PyObject *unused)
{
	LIVE_OR_RAISE(t, "Get_contents");
	if (!t->contents)
		return mpi_error("ERR_TYPE", "Get_contents: a named datatype has none");
	if (py__mpi4py_api >= 4)
		return Py_BuildValue("(NNNN)", PySequence_List(PyTuple_GET_ITEM(t->contents, 0)),
		                     PySequence_List(PyTuple_GET_ITEM(t->contents, 1)),
		                     PyList_New(0), contents_types(t));
	return Py_BuildValue("(NNN)", PySequence_List(PyTuple_GET_ITEM(t->contents, 0)),
	                     PySequence_List(PyTuple_GET_ITEM(t->contents, 1)), contents_types(t));
}

static const char *combiner_name(int combiner)
{
	switch (combiner) {
	case COMBINER_NAMED:
		return "NAMED";
	case COMBINER_DUP:
		return "DUP";
	case COMBINER_CONTIGUOUS:
		return "CONTIGUOUS";
	case COMBINER_VECTOR:
		return "VECTOR";
	case COMBINER_HVECTOR:
		return "HVECTOR";
	case COMBINER_INDEXED:
		return "INDEXED";
	case COMBINER_HINDEXED:
		return "HINDEXED";
	case COMBINER_INDEXED_BLOCK:
		return "INDEXED_BLOCK";
	case COMBINER_HINDEXED_BLOCK:
		return "HINDEXED_BLOCK";
	case COMBINER_STRUCT:
		return "STRUCT";
	case COMBINER_SUBARRAY:
		return "SUBARRAY";
	case COMBINER_DARRAY:
		return "DARRAY";
	case COMBINER_RESIZED:
		return "RESIZED";
	case COMBINER_F90_INTEGER:
		return "F90_INTEGER";
	case COMBINER_F90_REAL:
		return "F90_REAL";
	case COMBINER_F90_COMPLEX:
		return "F90_COMPLEX";
	default:
		return "VALUE_INDEX";
	}
}

/* Items from .. to-1 of list l, as a new list. */
static PyObject *slice(PyObject *l, Py_ssize_t from, Py_ssize_t to)
{
	return PyList_GetSlice(l, from, to);
}

static PyObject *newref(PyObject *o)
{
	Py_INCREF(o);
	return o;
}

/* Sets d[key] = v, stealing v: 0 or -1. */
static int put(PyObject *d, const char *key, PyObject *v)
{
	int r = v ? PyDict_SetItemString(d, key, v) : -1;

	Py_XDECREF(v);
	return r;
}

/* decode() -> (oldtype, combiner name, parameters): what t was made from, as the keyword
 * arguments of the constructor (Create_<combiner>) that makes it again; mpi4py's. A named
 * datatype is (itself, "NAMED", {}) in mpi4py 4, itself alone in mpi4py 3; oldtype is
 * DATATYPE_NULL for a struct (its datatypes are a parameter) and the Fortran ones. */
static PyObject *dt_decode(DatatypeObject *t, PyObject *unused)
{
	PyObject *ints, *addrs, *types, *p = NULL, *old = NULL, *r = NULL;
	Py_ssize_t n, k;
	int err = 0;

	LIVE_OR_RAISE(t, "decode");
	if (!t->contents) {
		if (py__mpi4py_api < 4) { /* mpi4py 3's is the datatype alone */
			Py_INCREF(t);
			return (PyObject *)t;
		}
		return Py_BuildValue("(Os{})", (PyObject *)t, "NAMED");
	}
	ints = PyTuple_GET_ITEM(t->contents, 0);
	addrs = PyTuple_GET_ITEM(t->contents, 1);
	if (!(p = PyDict_New()) || !(types = contents_types(t)))
		goto out;
	if (t->combiner != COMBINER_STRUCT && PyList_GET_SIZE(types) == 1)
		old = PyList_GET_ITEM(types, 0);
	else
		old = (PyObject *)py__dt_null;
	Py_INCREF(old);
#define I(k)         PyList_GET_ITEM(ints, k)
#define A(k)         PyList_GET_ITEM(addrs, k)
#define PUT(key, v)  (err = err || put(p, key, v) < 0)
#define PUTO(key, o) PUT(key, newref(o))
	n = PyList_GET_SIZE(ints) ? PyLong_AsSsize_t(I(0)) : 0;
	switch (t->combiner) {
	case COMBINER_CONTIGUOUS:
		PUTO("count", I(0));
		break;
	case COMBINER_VECTOR:
	case COMBINER_HVECTOR:
		PUTO("count", I(0));
		PUTO("blocklength", I(1));
		if (t->combiner == COMBINER_VECTOR)
			PUTO("stride", I(2));
		else
			PUTO("stride", A(0));
		break;
	case COMBINER_INDEXED:
		PUT("blocklengths", slice(ints, 1, 1 + n));
		PUT("displacements", slice(ints, 1 + n, 1 + 2 * n));
		break;
	case COMBINER_HINDEXED:
	case COMBINER_STRUCT:
		PUT("blocklengths", slice(ints, 1, 1 + n));
		PUT("displacements", slice(addrs, 0, n));
		if (t->combiner == COMBINER_STRUCT)
			PUTO("datatypes", types);
		break;
	case COMBINER_INDEXED_BLOCK:
		PUTO("blocklength", I(1));
		PUT("displacements", slice(ints, 2, 2 + n));
		break;
	case COMBINER_HINDEXED_BLOCK:
		PUTO("blocklength", I(1));
		PUT("displacements", slice(addrs, 0, n));
		break;
	case COMBINER_SUBARRAY:
		PUT("sizes", slice(ints, 1, 1 + n));
		PUT("subsizes", slice(ints, 1 + n, 1 + 2 * n));
		PUT("starts", slice(ints, 1 + 2 * n, 1 + 3 * n));
		PUTO("order", I(1 + 3 * n));
		break;
	case COMBINER_DARRAY:
		k = PyLong_AsSsize_t(I(2)); /* ndims, after size and rank */
		PUTO("size", I(0));
		PUTO("rank", I(1));
		PUT("gsizes", slice(ints, 3, 3 + k));
		PUT("distribs", slice(ints, 3 + k, 3 + 2 * k));
		PUT("dargs", slice(ints, 3 + 2 * k, 3 + 3 * k));
		PUT("psizes", slice(ints, 3 + 3 * k, 3 + 4 * k));
		PUTO("order", I(3 + 4 * k));
		break;
	case COMBINER_RESIZED:
		PUTO("lb", A(0));
		PUTO("extent", A(1));
		break;
	case COMBINER_F90_INTEGER:
		PUTO("r", I(0));
		break;
	case COMBINER_F90_REAL:
	case COMBINER_F90_COMPLEX:
		PUTO("p", I(0));
		PUTO("r", I(1));
		break;
	default: /* DUP */
		break;
	}
#undef PUTO
#undef PUT
#undef A
#undef I
	if (!err && !PyErr_Occurred())
		r = Py_BuildValue("(OsO)", old, combiner_name(t->combiner), p);
	Py_DECREF(types);
out:
	Py_XDECREF(old);
	Py_XDECREF(p);
	return r;
}

/* ---- attributes ---- */

/* Datatype keyvals: keyval -> (copy_fn, delete_fn), as mpi4py's Create_keyval takes them
 * (copy_fn None: not copied by Dup; True: copied as it is; a function(datatype, keyval,
 * value) -> the copy's value, NotImplemented for none. delete_fn(datatype, keyval, value)
 * or None). They are numbered from 65536, apart from the communicators' (from 100), so
 * that a keyval of the one kind is no keyval of the other, as in MPI. An attribute keeps
 * its keyval's functions: freeing the keyval leaves the attributes set with it working. */
#define KEYVAL_BASE    65536
#define KEYVAL_INVALID (-1)
static PyObject *keyvals;
static long next_keyval = KEYVAL_BASE;

/* keyval's (copy_fn, delete_fn), borrowed, or NULL with ERR_KEYVAL raised. */
static PyObject *keyval_get(int keyval, const char *what)
{
	PyObject *k = PyLong_FromLong(keyval), *v;

	if (!k)
		return NULL;
	v = PyDict_GetItemWithError(keyvals, k);
	Py_DECREF(k);
	if (!v && !PyErr_Occurred())
		mpi_error("ERR_KEYVAL", "%s: keyval %d is not one of Datatype.Create_keyval's",
		          what, keyval);
	return v;
}

/* Calls a keyval's function(datatype, keyval, value): its result, or NULL. */
static PyObject *attr_call(PyObject *fn, DatatypeObject *t, PyObject *key, PyObject *value)
{
	return PyObject_CallFunctionObjArgs(fn, (PyObject *)t, key, value, NULL);
}

/* Deletes t's attribute key (item: (value, copy_fn, delete_fn)): its delete_fn runs. */
static int attr_delete(DatatypeObject *t, PyObject *key, PyObject *item)
{
	PyObject *fn = PyTuple_GET_ITEM(item, 2), *r;

	if (fn == Py_None)
		return 0;
	r = attr_call(fn, t, key, PyTuple_GET_ITEM(item, 0));
	Py_XDECREF(r);
	return r ? 0 : -1;
}

/* Free's: every attribute goes, each delete_fn runs (the first that raises stops it, the
 * exception raised by Free). */
static int delete_attrs(DatatypeObject *t)
{
	PyObject *attrs = ROOT(t)->attrs, *key, *item;

	if (!attrs)
		return 0;
	while (PyDict_Size(attrs) > 0) {
		Py_ssize_t pos = 0;
		int rc;

		PyDict_Next(attrs, &pos, &key, &item);
		Py_INCREF(key);
		Py_INCREF(item);
		rc = PyDict_DelItem(attrs, key);
		if (!rc)
			rc = attr_delete(t, key, item);
		Py_DECREF(item);
		Py_DECREF(key);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* Dup's: the attributes of t that their copy_fn copies go to d. */
static int copy_attrs(DatatypeObject *t, DatatypeObject *d)
{
	PyObject *attrs = ROOT(t)->attrs, *key, *item, *out;
	Py_ssize_t pos = 0;

	if (!attrs || !PyDict_Size(attrs))
		return 0;
	if (!(out = PyDict_New()))
		return -1;
	while (PyDict_Next(attrs, &pos, &key, &item)) {
		PyObject *fn = PyTuple_GET_ITEM(item, 1), *v, *nitem;

		if (fn == Py_None)
			continue;
		if (fn == Py_True) {
			v = PyTuple_GET_ITEM(item, 0);
			Py_INCREF(v);
		} else if (!(v = attr_call(fn, t, key, PyTuple_GET_ITEM(item, 0)))) {
			Py_DECREF(out);
			return -1;
		}
		if (v == Py_NotImplemented) {
			Py_DECREF(v);
			continue;
		}
		nitem = PyTuple_Pack(3, v, fn, PyTuple_GET_ITEM(item, 2));
		Py_DECREF(v);
		if (!nitem || PyDict_SetItem(out, key, nitem) < 0) {
			Py_XDECREF(nitem);
			Py_DECREF(out);
			return -1;
		}
		Py_DECREF(nitem);
	}
	Py_XSETREF(ROOT(d)->attrs, out);
	return 0;
}

static PyObject *dt_get_attr(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"keyval", NULL};
	PyObject *attrs = ROOT(t)->attrs, *key, *item;
	int keyval;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "i:Get_attr", kwlist, &keyval))
		return NULL;
	LIVE_OR_RAISE(t, "Get_attr");
	if (!keyval_get(keyval, "Get_attr") || !(key = PyLong_FromLong(keyval)))
		return NULL;
	item = attrs ? PyDict_GetItemWithError(attrs, key) : NULL;
	Py_DECREF(key);
	if (!item) {
		if (PyErr_Occurred())
			return NULL;
		Py_RETURN_NONE;
	}
	Py_INCREF(PyTuple_GET_ITEM(item, 0));
	return PyTuple_GET_ITEM(item, 0);
}

static PyObject *dt_set_attr(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"keyval", "attrval", NULL};
	PyObject *value, *fns, *key = NULL, *item = NULL, *old, *res = NULL;
	struct dt *root = ROOT(t);
	int keyval;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "iO:Set_attr", kwlist, &keyval, &value))
		return NULL;
	LIVE_OR_RAISE(t, "Set_attr");
	if (!(fns = keyval_get(keyval, "Set_attr")) || !(key = PyLong_FromLong(keyval)))
		return NULL;
	if (!root->attrs && !(root->attrs = PyDict_New()))
		goto out;
	/* A value set before goes first, by its delete_fn, as MPI_Type_set_attr does. */
	old = PyDict_GetItemWithError(root->attrs, key);
	if (old) {
		Py_INCREF(old);
		if (PyDict_DelItem(root->attrs, key) < 0 || attr_delete(t, key, old) < 0) {
			Py_DECREF(old);
			goto out;
		}
		Py_DECREF(old);
	} else if (PyErr_Occurred()) {
		goto out;
	}
	item = PyTuple_Pack(3, value, PyTuple_GET_ITEM(fns, 0), PyTuple_GET_ITEM(fns, 1));
	if (item && PyDict_SetItem(root->attrs, key, item) == 0)
		res = Py_None;
out:
	Py_XDECREF(item);
	Py_XDECREF(key);
	Py_XINCREF(res);
	return res;
}

static PyObject *dt_delete_attr(DatatypeObject *t, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"keyval", NULL};
	PyObject *attrs = ROOT(t)->attrs, *key, *item;
	int keyval, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "i:Delete_attr", kwlist, &keyval))
		return NULL;
	LIVE_OR_RAISE(t, "Delete_attr");
	if (!keyval_get(keyval, "Delete_attr") || !(key = PyLong_FromLong(keyval)))
		return NULL;
	item = attrs ? PyDict_GetItemWithError(attrs, key) : NULL;
	if (!item) {
		Py_DECREF(key);
		if (PyErr_Occurred())
			return NULL;
		return mpi_error("ERR_KEYVAL", "Delete_attr: no attribute of keyval %d", keyval);
	}
	Py_INCREF(item);
	rc = PyDict_DelItem(attrs, key);
	if (!rc)
		rc = attr_delete(t, key, item);
	Py_DECREF(item);
	Py_DECREF(key);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

/* Create_keyval(copy_fn=None, delete_fn=None, nopython=False) -> keyval. nopython (values
 * that are addresses, for C code) makes no difference here: values are kept as given. */
static PyObject *dt_create_keyval(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"copy_fn", "delete_fn", "nopython", NULL};
	PyObject *copy_fn = Py_None, *delete_fn = Py_None, *fns, *key;
	int nopython = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOp:Create_keyval", kwlist, &copy_fn,
	                                 &delete_fn, &nopython))
		return NULL;
	if (copy_fn == Py_False) /* mpi4py's: False is None; True copies the value as is */
		copy_fn = Py_None;
	if (delete_fn == Py_False || delete_fn == Py_True)
		delete_fn = Py_None;
	if (!(key = PyLong_FromLong(next_keyval)))
		return NULL;
	fns = PyTuple_Pack(2, copy_fn, delete_fn);
	if (!fns || PyDict_SetItem(keyvals, key, fns) < 0) {
		Py_XDECREF(fns);
		Py_DECREF(key);
		return NULL;
	}
	Py_DECREF(fns);
	next_keyval++;
	return key;
}

/* Free_keyval(keyval) -> KEYVAL_INVALID. */
static PyObject *dt_free_keyval(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"keyval", NULL};
	PyObject *key;
	int keyval, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "i:Free_keyval", kwlist, &keyval))
		return NULL;
	if (!keyval_get(keyval, "Free_keyval") || !(key = PyLong_FromLong(keyval)))
		return NULL;
	rc = PyDict_DelItem(keyvals, key);
	Py_DECREF(key);
	if (rc < 0)
		return NULL;
	return PyLong_FromLong(KEYVAL_INVALID);
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

/* ---- typecodes: tocode, fromcode, typechar, typestr (mpi4py 4) ---- */

/* The C types' character codes (struct module, NumPy) with their kind ('b' boolean, 'i'
 * signed, 'u' unsigned, 'f' real, 'c' complex) and size, in the order a kind and size picks
 * its code ("l" before "q" where long is long long's size). */
static const struct {
	char chr[2], kind;
	unsigned char size;
} chr_codes[] = {
    {"?", 'b', 1},
    {"b", 'i', 1},
    {"h", 'i', sizeof(short)},
    {"i", 'i', sizeof(int)},
    {"l", 'i', sizeof(long)},
    {"q", 'i', sizeof(long long)},
    {"p", 'i', sizeof(void *)},
    {"B", 'u', 1},
    {"H", 'u', sizeof(short)},
    {"I", 'u', sizeof(int)},
    {"L", 'u', sizeof(long)},
    {"Q", 'u', sizeof(long long)},
    {"P", 'u', sizeof(void *)},
    {"e", 'f', 2},
    {"f", 'f', sizeof(float)},
    {"d", 'f', sizeof(double)},
    {"g", 'f', sizeof(long double)},
    {"E", 'c', 4},
    {"F", 'c', 2 * sizeof(float)},
    {"D", 'c', 2 * sizeof(double)},
    {"G", 'c', 2 * sizeof(long double)},
};

const char *py__typechr(char kind, Py_ssize_t size)
{
	size_t i;

	if (kind == 'b' && size != 1)
		kind = 'i';
	for (i = 0; i < sizeof(chr_codes) / sizeof(chr_codes[0]); i++)
		if (chr_codes[i].kind == kind && chr_codes[i].size == size)
			return chr_codes[i].chr;
	return NULL;
}

/* The NumPy type string of the same ("i4", "f8", "c16" ...), or NULL. */
static const char *typestr(char kind, Py_ssize_t size)
{
	static const char *const ints[] = {"i1", "i2", "i4", "i8", "i16"};
	static const char *const uints[] = {"u1", "u2", "u4", "u8", "u16"};
	int lg = size == 1    ? 0
	         : size == 2  ? 1
	         : size == 4  ? 2
	         : size == 8  ? 3
	         : size == 16 ? 4
	                      : -1;

	switch (kind) {
	case 'b':
		return size == 1 ? "b1" : typestr('i', size);
	case 'i':
		return lg < 0 ? NULL : ints[lg];
	case 'u':
		return lg < 0 ? NULL : uints[lg];
	case 'f':
		return size == 2    ? "f2"
		       : size == 4  ? "f4"
		       : size == 8  ? "f8"
		       : size == 12 ? "f12"
		       : size == 16 ? "f16"
		                    : NULL;
	case 'c':
		return size == 4    ? "c4"
		       : size == 8  ? "c8"
		       : size == 16 ? "c16"
		       : size == 24 ? "c24"
		       : size == 32 ? "c32"
		                    : NULL;
	default:
		return NULL;
	}
}

/* The type string of a character code: its kind and size, as typestr() spells them. */
static const char *chr_to_str(const char *c)
{
	size_t i;

	if (!c)
		return NULL;
	for (i = 0; i < sizeof(chr_codes) / sizeof(chr_codes[0]); i++)
		if (chr_codes[i].chr[0] == c[0])
			return typestr(chr_codes[i].kind, chr_codes[i].size);
	switch (c[0]) {
	case 'S':
	case 'c':
		return "S1";
	case 'U':
	case 'w':
		return "U1";
	case 'u':
		return "u2";
	default:
		return NULL;
	}
}

/* What mpi4py 4 says of a predefined datatype: its character code, and the type string of
 * the sized ones (C99's intN_t, Fortran's INTEGERn ...), which is also their code. The
 * Fortran ones without a size in the name take it from their extent. */
static const struct {
	const char *name;
	char kind; /* 'b', 'i', 'u', 'f', 'c': by kind and size; 0: chr as given */
	const char *chr;
	int sized; /* the type string is its code */
} codes[] = {
    {"PACKED", 0, "B", 0},
    {"BYTE", 0, "B", 0},
    {"AINT", 0, "p", 0},
    {"OFFSET", 0, "p", 0},
    {"COUNT", 0, "p", 0},
    {"CHAR", 0, "c", 0},
    {"WCHAR", 0, sizeof(wchar_t) == 4 ? "U" : "H", 0},
    {"SIGNED_CHAR", 0, "b", 0},
    {"SHORT", 0, "h", 0},
    {"INT", 0, "i", 0},
    {"LONG", 0, "l", 0},
    {"LONG_LONG", 0, "q", 0},
    {"UNSIGNED_CHAR", 0, "B", 0},
    {"UNSIGNED_SHORT", 0, "H", 0},
    {"UNSIGNED", 0, "I", 0},
    {"UNSIGNED_LONG", 0, "L", 0},
    {"UNSIGNED_LONG_LONG", 0, "Q", 0},
    {"FLOAT", 0, "f", 0},
    {"DOUBLE", 0, "d", 0},
    {"LONG_DOUBLE", 0, "g", 0},
    {"C_BOOL", 0, "?", 1},
    {"INT8_T", 'i', NULL, 1},
    {"INT16_T", 'i', NULL, 1},
    {"INT32_T", 'i', NULL, 1},
    {"INT64_T", 'i', NULL, 1},
    {"UINT8_T", 'u', NULL, 1},
    {"UINT16_T", 'u', NULL, 1},
    {"UINT32_T", 'u', NULL, 1},
    {"UINT64_T", 'u', NULL, 1},
    {"C_FLOAT_COMPLEX", 0, "F", 0},
    {"C_DOUBLE_COMPLEX", 0, "D", 0},
    {"C_LONG_DOUBLE_COMPLEX", 0, "G", 0},
    {"CXX_BOOL", 0, "?", 0},
    {"CXX_FLOAT_COMPLEX", 0, "F", 0},
    {"CXX_DOUBLE_COMPLEX", 0, "D", 0},
    {"CXX_LONG_DOUBLE_COMPLEX", 0, "G", 0},
    {"CHARACTER", 0, "c", 0},
    {"LOGICAL", 'b', NULL, 0},
    {"INTEGER", 'i', NULL, 0},
    {"REAL", 'f', NULL, 0},
    {"DOUBLE_PRECISION", 'f', NULL, 0},
    {"COMPLEX", 'c', NULL, 0},
    {"DOUBLE_COMPLEX", 'c', NULL, 0},
    {"LOGICAL1", 'b', NULL, 1},
    {"LOGICAL2", 'b', NULL, 1},
    {"LOGICAL4", 'b', NULL, 1},
    {"LOGICAL8", 'b', NULL, 1},
    {"INTEGER1", 'i', NULL, 1},
    {"INTEGER2", 'i', NULL, 1},
    {"INTEGER4", 'i', NULL, 1},
    {"INTEGER8", 'i', NULL, 1},
    {"REAL4", 'f', NULL, 1},
    {"REAL8", 'f', NULL, 1},
    {"COMPLEX8", 'c', NULL, 1},
    {"COMPLEX16", 'c', NULL, 1},
    {"FLOAT16", 0, "e", 0}, /* shmcoll's; BFLOAT16 has no code */
};

static int code_of[NPREDEF]; /* a predefined datatype's entry in codes, or -1 */

/* The datatype a Dup was made from (the root of a chain of Dups). */
static const DatatypeObject *undup(const DatatypeObject *t)
{
	while (t->combiner == COMBINER_DUP)
		t = (const DatatypeObject *)PyList_GET_ITEM(PyTuple_GET_ITEM(t->contents, 2), 0);
	return t;
}

/* t's character code, type string and code (tocode's: the type string of the sized ones,
 * else the character code); NULL where it has none. */
static void type_codes(const DatatypeObject *t, const char **chr, const char **str,
                       const char **code)
{
	char kind = 0;
	int sized = 0, i;

	*chr = *str = *code = NULL;
	if (is_null(t))
		return;
	t = undup(t);
	if (DT(t)->f90) {
		kind = DT(t)->f90;
		sized = 1;
	} else if (t->pre >= 0 && (i = code_of[t->pre]) >= 0) {
		kind = codes[i].kind;
		sized = codes[i].sized;
		*chr = codes[i].chr;
	} else {
		return;
	}
	if (kind) {
		*chr = py__typechr(kind, py__extent(t));
		*str = sized ? typestr(kind, py__extent(t)) : NULL;
	} else if (sized) {
		*str = chr_to_str(*chr);
	}
	if (!*str)
		*str = chr_to_str(*chr);
	*code = sized ? *str : *chr;
}

static PyObject *dt_tocode(DatatypeObject *t, PyObject *unused)
{
	const char *chr, *str, *code;

	type_codes(t, &chr, &str, &code);
	if (!code) {
		PyErr_SetString(PyExc_ValueError, "cannot map to character code or type string");
		return NULL;
	}
	return PyUnicode_FromString(code);
}

/* fromcode(code): the predefined datatype of a typecode or type string (mpi4py's
 * _typedict). */
static PyObject *dt_fromcode(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"code", NULL};
	PyObject *code, *t;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O:fromcode", kwlist, &code))
		return NULL;
	t = PyDict_GetItemWithError(typedict, code);
	if (!t) {
		if (!PyErr_Occurred())
			PyErr_Format(PyExc_ValueError, "cannot map code %R to MPI datatype", code);
		return NULL;
	}
	Py_INCREF(t);
	return t;
}

static PyObject *get_typechar(DatatypeObject *t, void *u)
{
	const char *chr, *str, *code;

	if (is_null(t))
		return PyUnicode_FromString("");
	type_codes(t, &chr, &str, &code);
	return PyUnicode_FromString(chr ? chr : "V");
}

static PyObject *get_typestr(DatatypeObject *t, void *u)
{
	const char *chr, *str, *code;

	if (is_null(t))
		return PyUnicode_FromString("");
	type_codes(t, &chr, &str, &code);
	if (str)
		return PyUnicode_FromString(str);
	return PyUnicode_FromFormat("V%zd", py__extent(t));
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

	if (PyObject_TypeCheck(obj, &py__DatatypeType)) {
		/* A handle's datatype is its root's (whose fields are the same): the calls
		 * that compare the two sides' datatypes compare objects, and a handle of INT
		 * is INT. A freed handle stays itself (null), as does one whose root was
		 * freed (the datatype lives on in it). */
		DatatypeObject *t = (DatatypeObject *)obj;

		return t->freed || ROOT(t)->t.freed ? t : &ROOT(t)->t;
	}
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

/* ---- pickling ---- */

static PyObject *fn_named, *fn_create; /* the module's _datatype_named, _datatype_create */

/* Pickling, as mpi4py 4's: a predefined datatype (DATATYPE_NULL too) is itself again;
 * another handle of one a new handle of it; any other datatype is made again from what
 * decode() says of it (its datatypes pickled likewise), committed. */
static PyObject *dt_reduce(DatatypeObject *t, PyObject *unused)
{
	PyObject *dec, *r;

	if (is_null(t) || t->pre >= 0) {
		DatatypeObject *named = is_null(t) ? py__dt_null : &ROOT(t)->t;

		if (t == named)
			return Py_BuildValue("(O(s))", fn_named, predefs[t->pre].name);
		return Py_BuildValue("(O(O))", (PyObject *)Py_TYPE(t), (PyObject *)named);
	}
	if (!(dec = dt_decode(t, NULL)))
		return NULL;
	r = Py_BuildValue("(O(OOOO))", fn_create, PyTuple_GET_ITEM(dec, 0),
	                  PyTuple_GET_ITEM(dec, 1), PyTuple_GET_ITEM(dec, 2), Py_True);
	Py_DECREF(dec);
	return r;
}

/* _datatype_named(name): the predefined datatype of that name (unpickling). */
static PyObject *mod_datatype_named(PyObject *mod, PyObject *args)
{
	const char *name;
	DatatypeObject *t;

	if (!PyArg_ParseTuple(args, "s:_datatype_named", &name))
		return NULL;
	if (!(t = predef_named(name)))
		return PyErr_Format(PyExc_ValueError, "no predefined datatype is named %s", name);
	Py_INCREF(t);
	return (PyObject *)t;
}

/* _datatype_create(datatype, combiner, params, free=False): mpi4py's: the datatype
 * datatype.Create_<combiner>(**params) makes, committed (free: mpi4py frees the datatypes
 * of params; here they go when they are no longer referenced). */
static PyObject *mod_datatype_create(PyObject *mod, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"datatype", "combiner", "params", "free", NULL};
	PyObject *t, *comb, *params, *meth, *lower, *name, *empty, *r;
	int free_ = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!UO!|p:_datatype_create", kwlist,
	                                 &py__DatatypeType, &t, &comb, &PyDict_Type, &params,
	                                 &free_))
		return NULL;
	if (!(lower = PyObject_CallMethod(comb, "lower", NULL)))
		return NULL;
	name = PyUnicode_FromFormat("Create_%U", lower);
	Py_DECREF(lower);
	if (!name)
		return NULL;
	meth = PyObject_GetAttr(t, name);
	Py_DECREF(name);
	if (!meth)
		return NULL;
	empty = PyTuple_New(0);
	r = empty ? PyObject_Call(meth, empty, params) : NULL;
	Py_XDECREF(empty);
	Py_DECREF(meth);
	if (r && PyObject_TypeCheck(r, &py__DatatypeType))
		((DatatypeObject *)r)->committed = 1;
	return r;
}

/* _datatype_decode(datatype, mark=False): datatype.decode(). */
static PyObject *mod_datatype_decode(PyObject *mod, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"datatype", "mark", NULL};
	PyObject *t;
	int mark = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|p:_datatype_decode", kwlist,
	                                 &py__DatatypeType, &t, &mark))
		return NULL;
	return dt_decode((DatatypeObject *)t, NULL);
}

static PyMethodDef mod_functions[] = {
    {"_datatype_named", mod_datatype_named, METH_VARARGS,
     "_datatype_named(name): a predefined datatype (unpickling)."},
    {"_datatype_create", KW(mod_datatype_create), METH_VARARGS | METH_KEYWORDS,
     "_datatype_create(datatype, combiner, params, free=False): "
     "datatype.Create_<combiner>(**params), committed."},
    {"_datatype_decode", KW(mod_datatype_decode), METH_VARARGS | METH_KEYWORDS,
     "_datatype_decode(datatype, mark=False): datatype.decode()."},
    {NULL, NULL, 0, NULL},
};

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
	return PyBool_FromLong(t->freed || predefined(t));
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
    {"typechar", (getter)get_typechar, NULL, "its character code ('V': none)", NULL},
    {"typestr", (getter)get_typestr, NULL, "its type string ('V' and the extent: none)", NULL},
    {"contents", (getter)dt_get_contents, NULL, "Get_contents()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#define KWM(f) KW(f), METH_VARARGS | METH_KEYWORDS
#define KWC(f) KW(f), METH_VARARGS | METH_KEYWORDS | METH_CLASS

static PyMethodDef dt_methods[] = {
    {"Get_size", (PyCFunction)dt_get_size, METH_NOARGS, "Bytes of data of one element."},
    {"Get_extent", (PyCFunction)dt_get_extent, METH_NOARGS, "(lb, extent)"},
    {"Get_true_extent", (PyCFunction)dt_get_true_extent, METH_NOARGS, "(true_lb, true_extent)"},
    {"Commit", (PyCFunction)dt_commit, METH_NOARGS, "Commit() -> self"},
    {"Free", (PyCFunction)dt_free, METH_NOARGS, "Makes it DATATYPE_NULL."},
    {"free", (PyCFunction)dt_safe_free, METH_NOARGS,
     "Free if not predefined (any number of times)."},
    {"Dup", (PyCFunction)dt_dup, METH_NOARGS, "A new datatype of the same type map."},
    {"Get_envelope", (PyCFunction)dt_get_envelope, METH_NOARGS,
     "(num_integers, num_addresses, num_datatypes, combiner); as mpi4py 4: (num_integers, "
     "num_addresses, num_large_counts, num_datatypes, combiner)"},
    {"Get_contents", (PyCFunction)dt_get_contents, METH_NOARGS,
     "(integers, addresses, datatypes); as mpi4py 4: (integers, addresses, large counts, "
     "datatypes)"},
    {"decode", (PyCFunction)dt_decode, METH_NOARGS,
     "(oldtype, combiner name, the constructor's keyword arguments)"},
    {"Get_name", (PyCFunction)dt_get_name, METH_NOARGS, "Its name."},
    {"Set_name", (PyCFunction)dt_set_name, METH_O, "Set_name(name)"},
    {"Create_contiguous", KWM(dt_contiguous), "Create_contiguous(count)"},
    {"Create_vector", KWM(dt_vector), "Create_vector(count, blocklength, stride)"},
    {"Create_hvector", KWM(dt_hvector),
     "Create_hvector(count, blocklength, stride): stride in bytes"},
    {"Create_indexed", KWM(dt_indexed), "Create_indexed(blocklengths, displacements)"},
    {"Create_hindexed", KWM(dt_hindexed),
     "Create_hindexed(blocklengths, displacements): displacements in bytes"},
    {"Create_indexed_block", KWM(dt_indexed_block),
     "Create_indexed_block(blocklength, displacements)"},
    {"Create_hindexed_block", KWM(dt_hindexed_block),
     "Create_hindexed_block(blocklength, displacements): displacements in bytes"},
    {"Create_struct", KWC(dt_struct), "Create_struct(blocklengths, displacements, datatypes)"},
    {"Create_subarray", KWM(dt_subarray),
     "Create_subarray(sizes, subsizes, starts, order=ORDER_C)"},
    {"Create_darray", KWM(dt_darray),
     "Create_darray(size, rank, gsizes, distribs, dargs, psizes, order=ORDER_C)"},
    {"Create_resized", KWM(dt_resized), "Create_resized(lb, extent)"},
    {"Resized", KWM(dt_resized), "Create_resized(lb, extent)"},
    {"Create_dup", (PyCFunction)dt_dup, METH_NOARGS, "Dup()"},
    {"Create_f90_integer", KWC(dt_f90_integer), "Create_f90_integer(r)"},
    {"Create_f90_real", KWC(dt_f90_real), "Create_f90_real(p, r)"},
    {"Create_f90_complex", KWC(dt_f90_complex), "Create_f90_complex(p, r)"},
    {"Match_size", KWC(dt_match_size), "Match_size(typeclass, size)"},
    {"Get_value_index", KWC(dt_value_index), "Get_value_index(value, index)"},
    {"Get_attr", KWM(dt_get_attr), "Get_attr(keyval): the value, or None"},
    {"Set_attr", KWM(dt_set_attr), "Set_attr(keyval, attrval)"},
    {"Delete_attr", KWM(dt_delete_attr), "Delete_attr(keyval)"},
    {"Create_keyval", KWC(dt_create_keyval),
     "Create_keyval(copy_fn=None, delete_fn=None, nopython=False) -> keyval"},
    {"Free_keyval", KWC(dt_free_keyval), "Free_keyval(keyval) -> KEYVAL_INVALID"},
    {"tocode", (PyCFunction)dt_tocode, METH_NOARGS, "Its character code or type string."},
    {"fromcode", KWC(dt_fromcode), "fromcode(code): the predefined datatype of a typecode."},
    {"__reduce__", (PyCFunction)dt_reduce, METH_NOARGS, "Pickling."},
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
    {NULL, NULL, 0, NULL},
};

static PyNumberMethods dt_as_number = {
    .nb_bool = dt_bool,
};

PyTypeObject py__DatatypeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.Datatype",
    .tp_basicsize = sizeof(struct dt),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A datatype: a predefined one (MPI.INT, shmcoll.FLOAT32, ...) or one made from "
              "them (Create_vector ...).",
    .tp_new = dt_new,
    .tp_dealloc = (destructor)dt_dealloc,
    .tp_traverse = (traverseproc)dt_traverse,
    .tp_clear = (inquiry)dt_clear,
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
	    PyModule_AddIntConstant(m, "COMBINER_F90_INTEGER", COMBINER_F90_INTEGER) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_F90_REAL", COMBINER_F90_REAL) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_F90_COMPLEX", COMBINER_F90_COMPLEX) < 0 ||
	    PyModule_AddIntConstant(m, "COMBINER_VALUE_INDEX", COMBINER_VALUE_INDEX) < 0 ||
	    PyModule_AddIntConstant(m, "ORDER_C", ORDER_C) < 0 ||
	    PyModule_AddIntConstant(m, "ORDER_FORTRAN", ORDER_FORTRAN) < 0 ||
	    PyModule_AddIntConstant(m, "ORDER_F", ORDER_FORTRAN) < 0)
		goto fail;
	/* What the methods need: the typecode table by predefined datatype, the attribute
	 * keys, the Fortran datatypes made, and the unpickling functions. */
	for (i = 0; i < NPREDEF; i++) {
		code_of[i] = -1;
		for (k = 0; k < sizeof(codes) / sizeof(codes[0]); k++)
			if (!strcmp(codes[k].name, predefs[i].name))
				code_of[i] = (int)k;
	}
	if (!(keyvals = PyDict_New()) || !(f90_types = PyDict_New()) ||
	    PyModule_AddFunctions(m, mod_functions) < 0 ||
	    !(fn_named = PyObject_GetAttrString(m, "_datatype_named")) ||
	    !(fn_create = PyObject_GetAttrString(m, "_datatype_create")))
		goto fail;
	Py_DECREF(all);
	return 0;
fail:
	Py_XDECREF(all);
	return -1;
}
