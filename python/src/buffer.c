/* buffer.c - the memory of a buffer argument, as mpi4py takes it:
 *   - an object with the buffer protocol, C- or Fortran-contiguous (NumPy arrays,
 *     memoryview, bytearray, bytes for a send, array.array): its format names the datatype;
 *   - a CPU torch.Tensor, contiguous (its data_ptr, numel and dtype; bfloat16 too);
 *   - an object with __array_interface__ (NumPy's protocol), a CPU __dlpack__ (DLPack 0.x's
 *     "dltensor" capsules and 1.0's "dltensor_versioned"), or __cuda_array_interface__ over
 *     memory this process can read.
 * Each kind says what one element is (its format or dtype, and its size): message.c takes
 * the datatype from that, so a count counts the buffer's own elements whatever the kind.
 * Only the memory is resolved here; message.c reads mpi4py's message specifications around
 * it (counts, displacements, datatypes).
 *
 * Also here: MPI.buffer (mpi4py 4's class, memory in 3.x), bytes of memory over any of
 * these, an address or an allocation, exporting the buffer protocol. It is C because a
 * Python class cannot export the buffer protocol before Python 3.12 (PEP 688), and a
 * memoryview cannot carry mpi4py's attributes. */
#include "shmcoll_py.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static void not_contiguous(const char *how, PyObject *detail)
{
	PyErr_Format(py__BufferError,
	             "the buffer is not %s (%S): pass a contiguous array, e.g. "
	             "numpy.ascontiguousarray(...)",
	             how, detail ? detail : Py_None);
}

/* Whether the bytes [p, p + n) can be read here: a process_vm_readv of this process's own
 * memory, which fails with EFAULT instead of faulting (a GPU's device pointer behind the
 * interface would otherwise crash the process). The first and last byte are tried. */
static int readable(const char *p, Py_ssize_t n)
{
	char c;
	struct iovec local = {&c, 1}, remote;

	if (n <= 0)
		return 1;
	remote.iov_base = (void *)p;
	remote.iov_len = 1;
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != 1)
		return errno == ENOSYS || errno == EPERM; /* no way to tell: trust it */
	remote.iov_base = (void *)(p + n - 1);
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1 || errno == ENOSYS ||
	       errno == EPERM;
}

/* ---- torch tensors ---- */

/* torch's dtypes as datatypes: found by name the first time a dtype object is seen, then by
 * the object itself (torch's dtypes are singletons). */
static struct {
	PyObject *dtype; /* a reference held, so that its address names it for good */
	DatatypeObject *dt;
	Py_ssize_t es;
} torch_dtypes[32];
static int torch_ndtypes;

static int torch_dtype(PyObject *obj, PyObject *dtype, DatatypeObject **dt, Py_ssize_t *es)
{
	static const struct {
		const char *name, *type;
	} tt[] = {
	    {"torch.float32", "f"},   {"torch.float64", "d"},    {"torch.float16", "e"},
	    {"torch.bfloat16", NULL}, {"torch.int8", "i1"},      {"torch.uint8", "u1"},
	    {"torch.int16", "i2"},    {"torch.int32", "i4"},     {"torch.int64", "i8"},
	    {"torch.uint16", "u2"},   {"torch.uint32", "u4"},    {"torch.uint64", "u8"},
	    {"torch.bool", "?"},      {"torch.complex64", "Zf"}, {"torch.complex128", "Zd"},
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
	*dt = NULL; /* a dtype with no datatype: message.c moves its elements as bytes */
	for (size_t k = 0; k < sizeof(tt) / sizeof(tt[0]); k++)
		if (!strcmp(dname, tt[k].name))
			*dt =
			    tt[k].type ? py__dt_of_format(tt[k].type) : py__dt_c[SHMCOLL_BFLOAT16];
	Py_DECREF(name);
	if (!*dt && PyErr_Occurred())
		return -1;
	if (!(r = PyObject_CallMethod(obj, "element_size", NULL)))
		return -1;
	*es = PyLong_AsSsize_t(r);
	Py_DECREF(r);
	if (*es <= 0)
		return PyErr_Occurred()
		           ? -1
		           : (PyErr_SetString(PyExc_TypeError, "a tensor dtype without a size"),
		              -1);
	if (*dt && (*dt)->size != *es)
		*dt = NULL;
	if (torch_ndtypes < (int)(sizeof(torch_dtypes) / sizeof(torch_dtypes[0]))) {
		Py_INCREF(dtype);
		torch_dtypes[torch_ndtypes].dtype = dtype;
		torch_dtypes[torch_ndtypes].dt = *dt;
		torch_dtypes[torch_ndtypes].es = *es;
		torch_ndtypes++;
	}
	return 0;
}

/* The names torch_mem asks a tensor for, made once. */
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

static int is_tensor(PyObject *obj)
{
	/* torch.Tensor, without importing torch: its type's name and module. */
	PyTypeObject *t = Py_TYPE(obj);

	for (; t; t = t->tp_base)
		if (!strcmp(t->tp_name, "Tensor") || !strcmp(t->tp_name, "torch._C._TensorBase") ||
		    !strcmp(t->tp_name, "torch._C.TensorBase") ||
		    !strcmp(t->tp_name, "_TensorBase"))
			return 1;
	return 0;
}

/* A CPU torch.Tensor: 0, or -1 with an exception set. It runs on every call that takes a
 * tensor, so it asks only what it needs, by names made once. */
static int torch_mem(PyObject *obj, struct mem *m)
{
	PyObject *r = NULL;
	unsigned long long ptr, n;
	DatatypeObject *dt;
	Py_ssize_t es;
	int ok;

	if (torch_names() < 0 || !(r = PyObject_CallMethodNoArgs(obj, s_is_contiguous)))
		return -1;
	ok = PyObject_IsTrue(r);
	Py_DECREF(r);
	if (ok <= 0) {
		if (ok == 0)
			PyErr_SetString(py__BufferError,
			                "the tensor is not contiguous (use .contiguous())");
		return -1;
	}
	if (!(r = PyObject_GetAttr(obj, s_is_cpu)))
		return -1;
	ok = PyObject_IsTrue(r);
	Py_DECREF(r);
	if (ok <= 0) {
		if (ok == 0)
			PyErr_SetString(py__BufferError, "the tensor is not in CPU memory");
		return -1;
	}
	if (!(r = PyObject_GetAttr(obj, s_dtype)))
		return -1;
	ok = torch_dtype(obj, r, &dt, &es);
	Py_DECREF(r);
	if (ok < 0 || call_ull(obj, s_data_ptr, &ptr) < 0 || call_ull(obj, s_numel, &n) < 0)
		return -1;
	m->ptr = (char *)(uintptr_t)ptr;
	m->len = (Py_ssize_t)n * es;
	m->dtype = dt;
	m->itemsize = es;
	return 0;
}

/* ---- NumPy's array interface ---- */

/* A typestr ("<f8", "|u1", ">i4", "|V12", "<M8[s]" ...) as a format for message.c, and its
 * item size: 0, or -1 with ValueError. The format is the typestr itself (py__dt_of_format
 * reads its byte order, and refuses a non-native one) but for '|', no byte order; a
 * datetime's unit ("[s]") leaves it to no datatype, so it moves as its bytes. */
static int typestr_format(const char *ts, const char **format, Py_ssize_t *itemsize)
{
	char *end = NULL;
	long n = ts[0] && ts[1] && ts[2] ? strtol(ts + 2, &end, 10) : 0;

	if (!ts[0] || !ts[1] || !ts[2] || (*end && *end != '[') || n <= 0 ||
	    !strchr("<>|=", ts[0])) {
		PyErr_Format(PyExc_ValueError, "__array_interface__: typestr '%s' malformed", ts);
		return -1;
	}
	*format = ts[0] == '|' ? ts + 1 : ts;
	*itemsize = n;
	return 0;
}

static int array_interface_mem(PyObject *obj, int writable, struct mem *m)
{
	PyObject *ai = PyObject_GetAttrString(obj, "__array_interface__"), *data, *shape, *ts,
	         *strides;
	Py_ssize_t n = 1, i, es;
	const char *tstr;
	int ro;

	if (!ai)
		return -1;
	if (!PyDict_Check(ai)) {
		Py_DECREF(ai);
		PyErr_SetString(PyExc_TypeError, "__array_interface__ is not a dict");
		return -1;
	}
	data = PyDict_GetItemString(ai, "data");
	shape = PyDict_GetItemString(ai, "shape");
	ts = PyDict_GetItemString(ai, "typestr");
	strides = PyDict_GetItemString(ai, "strides");
	if (!data || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2 || !shape ||
	    !PyTuple_Check(shape) || !ts || !PyUnicode_Check(ts)) {
		Py_DECREF(ai);
		PyErr_SetString(PyExc_TypeError,
		                "__array_interface__ without data, shape, typestr");
		return -1;
	}
	m->ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
	ro = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
	if (PyErr_Occurred() || ro < 0)
		goto fail;
	if (writable && ro) {
		PyErr_SetString(py__BufferError, "the array is read-only");
		goto fail;
	}
	for (i = 0; i < PyTuple_GET_SIZE(shape); i++)
		n *= PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
	if (PyErr_Occurred())
		goto fail;
	/* The typestr's text lives as long as the dict, which m->keep holds. */
	if (!(tstr = PyUnicode_AsUTF8(ts)) || typestr_format(tstr, &m->format, &es) < 0)
		goto fail;
	if (strides && strides != Py_None) {
		/* Contiguous in C order (C or F is fine, mpi4py's any-contiguous). */
		Py_ssize_t want = es, nd = PyTuple_GET_SIZE(shape), ok = 1;

		for (i = nd - 1; i >= 0; i--) {
			Py_ssize_t d = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));

			if (d > 1 && PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, i)) != want)
				ok = 0;
			want *= d;
		}
		if (!ok && n > 1) {
			not_contiguous("contiguous", NULL);
			goto fail;
		}
	}
	m->len = n * es;
	m->itemsize = es;
	m->readonly = ro;
	m->keep = ai; /* holds the object's description; the object is held by the message */
	return 0;
fail:
	Py_DECREF(ai);
	return -1;
}

/* ---- DLPack ---- */

/* DLPack's ABI (dlpack.h 1.0), the part read here: the tensor, and the two capsules that
 * carry it, 0.x's "dltensor" (DLManagedTensor) and 1.0's "dltensor_versioned"
 * (DLManagedTensorVersioned: a version and flags first, so that any consumer can read them
 * and call the deleter). */
typedef struct {
	int32_t device_type, device_id;
} DLDevice;
typedef struct {
	uint8_t code, bits;
	uint16_t lanes;
} DLDataType;
typedef struct {
	void *data;
	DLDevice device;
	int32_t ndim;
	DLDataType dtype;
	int64_t *shape, *strides;
	uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
	DLTensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
typedef struct {
	uint32_t major, minor;
} DLPackVersion;
typedef struct DLManagedTensorVersioned {
	DLPackVersion version;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensorVersioned *self);
	uint64_t flags;
	DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_MAJOR          1 /* the version read here */
#define DLPACK_MINOR          0
#define DLPACK_FLAG_READ_ONLY ((uint64_t)1 << 0) /* the consumer must not write */

enum {
	kDLCPU = 1,
	kDLCUDA = 2,
	kDLCUDAHost = 3,
	kDLInt = 0,
	kDLUInt = 1,
	kDLFloat = 2,
	kDLBfloat = 4,
	kDLComplex = 5,
	kDLBool = 6
};

/* The format of a DLPack dtype, mpi4py 4's table (the C types' codes by size, so long
 * double's 80-bit extended in 16 bytes is 'g', two lanes of it 'G'); NULL for a dtype no datatype
 * has (opaque handles, other lane counts, float8 ...). Whatever the format, an element is
 * (bits * lanes + 7) / 8 bytes (dl_itemsize): message.c moves a dtype without a format
 * as elements of that many bytes, so that a count counts elements. */
static const char *dl_format(const DLDataType *d)
{
	static const char kinds[] = {
	    [kDLInt] = 'i', [kDLUInt] = 'u', [kDLFloat] = 'f', [kDLComplex] = 'c', [kDLBool] = 'b'};
	unsigned bits = d->bits, lanes = d->lanes;
	char kind = d->code < sizeof(kinds) ? kinds[d->code] : 0;

	/* A complex is kDLComplex or two lanes of kDLFloat; a complex long double only the
	 * latter (2 * 128 bits do not fit the 8 bits of bits). */
	if (kind == 'f' && lanes == 2)
		kind = 'c', bits *= 2, lanes = 1;
	if (!kind || lanes != 1 || bits % 8 || (kind == 'b' && bits != 8))
		return NULL;
	return py__typechr(kind, bits / 8);
}

static Py_ssize_t dl_itemsize(const DLDataType *d)
{
	return ((Py_ssize_t)d->bits * (d->lanes ? d->lanes : 1) + 7) / 8;
}

static int dl_contig(const DLTensor *t, int fortran)
{
	int64_t size = 1;
	int i;

	if (!t->strides)
		return !(t->ndim > 1 && fortran);
	for (i = 0; i < t->ndim; i++) {
		int k = fortran ? i : t->ndim - 1 - i;

		if (t->shape[k] > 1 && t->strides[k] != size)
			return 0;
		size *= t->shape[k];
	}
	return 1;
}

/* The tensor's shape and strides as mpi4py checks them: 0, or -1 with BufferError. */
static int dl_check(const DLTensor *t)
{
	int i;

	if (t->ndim < 0) {
		PyErr_SetString(PyExc_BufferError, "dlpack: number of dimensions is negative");
		return -1;
	}
	if (t->ndim > 0 && !t->shape) {
		PyErr_SetString(PyExc_BufferError, "dlpack: shape is NULL");
		return -1;
	}
	for (i = 0; i < t->ndim; i++)
		if (t->shape[i] < 0 || (t->strides && t->strides[i] < 0)) {
			PyErr_SetString(PyExc_BufferError,
			                t->shape[i] < 0 ? "dlpack: shape item is negative"
			                                : "dlpack: strides item is negative");
			return -1;
		}
	if (!dl_contig(t, 0) && !dl_contig(t, 1)) {
		PyErr_SetString(PyExc_BufferError, "dlpack: buffer is not contiguous");
		return -1;
	}
	return 0;
}

/* obj.__dlpack__(...): the 1.0 form first (max_version, so that a 1.0 producer may hand a
 * versioned capsule), then, on the TypeError of a producer that knows no max_version, the
 * 0.x form. Off the CPU, stream=-1: the data is ready, no synchronization is asked. */
static PyObject *dl_capsule(PyObject *obj, int on_cpu)
{
	PyObject *fn = PyObject_GetAttrString(obj, "__dlpack__"), *args, *kw, *cap;

	if (!fn)
		return NULL;
	args = PyTuple_New(0);
	kw = on_cpu ? Py_BuildValue("{s(ii)}", "max_version", DLPACK_MAJOR, DLPACK_MINOR)
	            : Py_BuildValue("{s(ii)si}", "max_version", DLPACK_MAJOR, DLPACK_MINOR,
	                            "stream", -1);
	cap = args && kw ? PyObject_Call(fn, args, kw) : NULL;
	if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
		PyErr_Clear();
		if (PyDict_DelItemString(kw, "max_version") == 0)
			cap = PyObject_Call(fn, args, kw);
	}
	Py_XDECREF(kw);
	Py_XDECREF(args);
	Py_DECREF(fn);
	return cap;
}

/* mpi4py 4's Py_GetDLPackBuffer: the device from __dlpack_device__ (a pair of ints), the
 * tensor from __dlpack__'s capsule, versioned or not (checked: version, read-only flag,
 * shape, strides, contiguity), whose deleter runs at once; the object it came from (held by
 * the message) keeps the memory. A device's memory is refused: shmcoll moves host memory
 * (CUDA's pinned host memory, kDLCUDAHost, is host memory). 1 when obj is no DLPack
 * object, 0 done, -1 with mpi4py's error. */
static int dlpack_mem(PyObject *obj, int writable, struct mem *m)
{
	PyObject *dev_fn, *dev = NULL, *seq = NULL, *cap = NULL;
	DLManagedTensorVersioned *mv = NULL;
	DLManagedTensor *mt = NULL;
	unsigned long dev_type;
	DLTensor *t;
	Py_ssize_t n = 1;
	int i, rc = -1, readonly = 0;

	if (!PyObject_HasAttrString(obj, "__dlpack__") ||
	    !PyObject_HasAttrString(obj, "__dlpack_device__"))
		return 1;
	if (!(dev_fn = PyObject_GetAttrString(obj, "__dlpack_device__")))
		return -1;
	dev = PyObject_CallNoArgs(dev_fn);
	Py_DECREF(dev_fn);
	if (!dev)
		return -1;
	/* device_type, device_id = obj.__dlpack_device__() */
	if (!(seq = PySequence_Fast(dev, "cannot unpack the device of __dlpack_device__()")))
		goto out;
	if (PySequence_Fast_GET_SIZE(seq) != 2) {
		PyErr_Format(PyExc_ValueError,
		             "__dlpack_device__() gave %zd values, expected 2 (device_type, "
		             "device_id)",
		             PySequence_Fast_GET_SIZE(seq));
		goto out;
	}
	dev_type = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, 0));
	if (PyErr_Occurred())
		goto out;
	(void)PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, 1));
	if (PyErr_Occurred())
		goto out;
	if (dev_type != kDLCPU && dev_type != kDLCUDAHost) {
		PyErr_Format(
		    py__BufferError,
		    "dlpack: the array is in a device's memory (DLPack device type %lu%s), "
		    "which shmcoll does not move: it moves host memory only (copy it to "
		    "the CPU first)",
		    dev_type, dev_type == kDLCUDA ? ", CUDA" : "");
		goto out;
	}
	if (!(cap = dl_capsule(obj, dev_type == kDLCPU)))
		goto out;
	if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
		mv = PyCapsule_GetPointer(cap, "dltensor_versioned");
		t = &mv->dl_tensor;
	} else if (PyCapsule_IsValid(cap, "dltensor")) {
		mt = PyCapsule_GetPointer(cap, "dltensor");
		t = &mt->dl_tensor;
	} else {
		PyErr_SetString(PyExc_BufferError, "dlpack: invalid capsule object");
		goto out;
	}
	if (mv && mv->version.major != DLPACK_MAJOR) {
		/* Only the version and the deleter are read of another major version. */
		PyErr_Format(PyExc_BufferError,
		             "dlpack: unsupported DLPack version %u.%u (shmcoll reads %d.x)",
		             (unsigned)mv->version.major, (unsigned)mv->version.minor,
		             DLPACK_MAJOR);
	} else if (dl_check(t) == 0) {
		readonly = mv && (mv->flags & DLPACK_FLAG_READ_ONLY);
		for (i = 0; i < t->ndim; i++)
			n *= (Py_ssize_t)t->shape[i];
		m->ptr = (char *)t->data + t->byte_offset;
		m->itemsize = dl_itemsize(&t->dtype);
		m->len = n * m->itemsize;
		m->readonly = readonly;
		m->device = dev_type != kDLCPU;
		/* bfloat16 has a datatype here (beyond mpi4py, which moves bytes). */
		if (t->dtype.code == kDLBfloat && t->dtype.bits == 16 && t->dtype.lanes == 1)
			m->dtype = py__dt_c[SHMCOLL_BFLOAT16];
		else
			m->format = dl_format(&t->dtype);
		if (writable && readonly)
			PyErr_SetString(PyExc_BufferError, "dlpack: buffer is readonly");
		else if (m->device && m->len && !readable(m->ptr, m->len))
			PyErr_SetString(py__BufferError,
			                "dlpack: the memory is not this process's");
		else
			rc = 0;
	}
	/* As mpi4py: the producer's deleter runs now, the capsule is spent (with the error, if
	 * any, set aside: the deleter may be Python code). */
	{
		PyObject *et, *ev, *etb;

		PyErr_Fetch(&et, &ev, &etb);
		if (mv && mv->deleter)
			mv->deleter(mv);
		else if (mt && mt->deleter)
			mt->deleter(mt);
		PyCapsule_SetName(cap, mv ? "used_dltensor_versioned" : "used_dltensor");
		PyErr_Restore(et, ev, etb);
	}
out:
	/* The capsule's destructor may be Python code: the error, if any, is set aside. */
	{
		PyObject *et, *ev, *etb;

		PyErr_Fetch(&et, &ev, &etb);
		Py_XDECREF(cap);
		Py_XDECREF(seq);
		Py_XDECREF(dev);
		PyErr_Restore(et, ev, etb);
	}
	return rc;
}

/* ---- the CUDA array interface ---- */

/* The item of a dict that must be there (KeyError), of type check (TypeError; NULL
 * check: any), or an optional one (NULL when absent or None). */
static PyObject *cai_item(PyObject *d, const char *key, int must, int (*check)(PyObject *),
                          const char *what)
{
	PyObject *v = PyDict_GetItemString(d, key);

	if (!v) {
		if (must)
			PyErr_SetString(PyExc_KeyError, key);
		return NULL;
	}
	if (!must && v == Py_None)
		return NULL;
	if (check && !check(v)) {
		PyErr_Format(PyExc_TypeError,
		             "__cuda_array_interface__: '%s' must be %s, not %.100s", key, what,
		             Py_TYPE(v)->tp_name);
		return NULL;
	}
	return v;
}

static int tuple_check(PyObject *o)
{
	return PyTuple_Check(o);
}

static int list_check(PyObject *o)
{
	return PyList_Check(o);
}

static int str_check(PyObject *o)
{
	return PyUnicode_Check(o);
}

static int cai_contig(PyObject *shape, PyObject *strides, Py_ssize_t itemsize, int fortran)
{
	Py_ssize_t nd = PyTuple_GET_SIZE(shape), i, size = itemsize;

	if (PyTuple_GET_SIZE(strides) != nd)
		return 0;
	for (i = 0; i < nd; i++) {
		Py_ssize_t k = fortran ? i : nd - 1 - i;
		Py_ssize_t dim = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, k));
		Py_ssize_t st = PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, k));

		if (dim > 1 && size != st)
			return 0;
		size *= dim;
	}
	return 1;
}

/* The format of a typestr's kind and item size, as mpi4py's cuda_get_format (NULL: bytes). */
static const char *cai_format(char kind, Py_ssize_t n)
{
	const Py_ssize_t ld = (Py_ssize_t)sizeof(long double);

	switch (kind) {
	case 'b':
		return n == 1 ? "?" : NULL;
	case 'i':
		return n == 1 ? "b" : n == 2 ? "h" : n == 4 ? "i" : n == 8 ? "l" : NULL;
	case 'u':
		return n == 1 ? "B" : n == 2 ? "H" : n == 4 ? "I" : n == 8 ? "L" : NULL;
	case 'f':
		return n == 2 ? "e" : n == 4 ? "f" : n == 8 ? "d" : n == ld ? "g" : NULL;
	case 'c':
		return n == 8 ? "Zf" : n == 16 ? "Zd" : n == 2 * ld ? "Zg" : NULL;
	default:
		return NULL;
	}
}

/* mpi4py's Py_GetCAIBuffer (host memory behind it only: see readable()). 1 when obj has no
 * __cuda_array_interface__, 0 done, -1 with mpi4py's error. */
static int cai_mem(PyObject *obj, int writable, struct mem *m)
{
	PyObject *cai, *data, *ts, *shape, *strides, *descr, *mask, *ptr, *seq = NULL;
	Py_ssize_t i, size = 1, itemsize;
	const char *tstr;
	int ro, rc = -1;
	char kind;

	if (!PyObject_HasAttrString(obj, "__cuda_array_interface__"))
		return 1;
	if (!(cai = PyObject_GetAttrString(obj, "__cuda_array_interface__")))
		return -1;
	if (!PyDict_Check(cai)) {
		PyErr_Format(PyExc_TypeError, "__cuda_array_interface__ must be a dict, not %.100s",
		             Py_TYPE(cai)->tp_name);
		goto out;
	}
	if (!(data = cai_item(cai, "data", 1, NULL, NULL)) ||
	    !(ts = cai_item(cai, "typestr", 1, str_check, "a str")) ||
	    !(shape = cai_item(cai, "shape", 1, tuple_check, "a tuple")))
		goto out;
	strides = cai_item(cai, "strides", 0, tuple_check, "a tuple");
	if (PyErr_Occurred())
		goto out;
	descr = cai_item(cai, "descr", 0, list_check, "a list");
	if (PyErr_Occurred())
		goto out;
	mask = cai_item(cai, "mask", 0, NULL, NULL);
	/* dev_ptr, readonly = data */
	if (!(seq = PySequence_Fast(data, "__cuda_array_interface__: cannot unpack 'data'")))
		goto out;
	if (PySequence_Fast_GET_SIZE(seq) != 2) {
		PyErr_Format(PyExc_ValueError,
		             "__cuda_array_interface__: 'data' has %zd items, expected 2",
		             PySequence_Fast_GET_SIZE(seq));
		goto out;
	}
	ptr = PySequence_Fast_GET_ITEM(seq, 0);
	if ((ro = PyObject_IsTrue(PySequence_Fast_GET_ITEM(seq, 1))) < 0)
		goto out;
	for (i = 0; i < PyTuple_GET_SIZE(shape); i++) {
		Py_ssize_t d = PyNumber_AsSsize_t(PyTuple_GET_ITEM(shape, i), PyExc_OverflowError);

		if (d == -1 && PyErr_Occurred())
			goto out;
		size *= d;
	}
	if (ptr == Py_None && size == 0)
		m->ptr = NULL;
	else if (!(m->ptr = PyLong_AsVoidPtr(ptr)) && PyErr_Occurred())
		goto out;
	tstr = PyUnicode_AsUTF8(ts);
	if (!tstr)
		goto out;
	{
		char *end;
		long v = tstr[0] && tstr[1] && tstr[2] ? strtol(tstr + 2, &end, 10) : 0;

		if (!tstr[0] || !tstr[1] || !tstr[2] || *end || v <= 0) {
			PyErr_Format(PyExc_ValueError,
			             "__cuda_array_interface__: typestr %R has no item size", ts);
			goto out;
		}
		itemsize = v;
	}
	kind = tstr[1];
	if (tstr[0] == '>' || (tstr[0] != '<' && tstr[0] != '|')) {
		PyErr_Format(PyExc_BufferError,
		             "__cuda_array_interface__: typestr %R with %s byte order", ts,
		             tstr[0] == '>' ? "non-native" : "unrecognized");
		goto out;
	}
	if (mask) {
		PyErr_SetString(PyExc_BufferError,
		                "__cuda_array_interface__: cannot handle masked arrays");
		goto out;
	}
	if (size < 0) {
		PyErr_Format(PyExc_BufferError,
		             "__cuda_array_interface__: buffer with negative size (shape:%R)",
		             shape);
		goto out;
	}
	if (strides && !cai_contig(shape, strides, itemsize, 0) &&
	    !cai_contig(shape, strides, itemsize, 1)) {
		if (!PyErr_Occurred())
			PyErr_Format(
			    PyExc_BufferError,
			    "__cuda_array_interface__: buffer is not contiguous (shape:%R, "
			    "strides:%R, itemsize:%zd)",
			    shape, strides, itemsize);
		goto out;
	}
	if (descr) {
		PyObject *want = Py_BuildValue("[(sO)]", "", ts);
		int same = want ? PyObject_RichCompareBool(descr, want, Py_EQ) : -1;

		Py_XDECREF(want);
		if (same < 0 ||
		    (!same &&
		     PyErr_WarnEx(PyExc_RuntimeWarning,
		                  "__cuda_array_interface__: ignoring 'descr' key", 1) < 0))
			goto out;
	}
	if (writable && ro) {
		PyErr_SetString(PyExc_BufferError, "Object is not writable.");
		goto out;
	}
	m->len = size * itemsize;
	if (m->len && !readable(m->ptr, m->len)) {
		PyErr_SetString(
		    py__BufferError,
		    "__cuda_array_interface__: the memory is not this process's (a GPU's "
		    "device memory?): shmcoll moves host memory only");
		goto out;
	}
	m->format = cai_format(kind, itemsize);
	m->itemsize = itemsize;
	m->readonly = ro;
	m->device = 1; /* device memory to mpi4py, whatever is behind it */
	rc = 0;
out:
	Py_XDECREF(seq);
	Py_DECREF(cai);
	return rc;
}

/* ---- any buffer ---- */

/* MPI.buffer: its memory, as mem (what it holds of the object it is over), and what a
 * memoryview or slice of it relies on. */
typedef struct BufferObject {
	PyObject_HEAD struct mem mem; /* the memory (ptr, len, readonly, device) and its hold */
	PyObject *obj;                /* what it is over: mpi4py's .obj (NULL: None) */
	struct BufferObject *base;    /* a slice's or toreadonly()'s: the buffer whose export
	                                 it holds (NULL: none) */
	Py_ssize_t itemsize;          /* mpi4py's .itemsize: the exporter's, else 1 */
	/* Exports: memoryviews (the buffer protocol), slices, toreadonly()s and calls over it.
	 * release() with exports outstanding empties the buffer at once, as mpi4py's, but
	 * keeps the memory's hold (retired) until the last export goes, so that no memoryview
	 * is left over freed memory. */
	Py_ssize_t exports;
	struct mem retired;
	PyObject *retired_obj;
	struct BufferObject *retired_base;
} BufferObject;

static int buffer_export(BufferObject *b, Py_buffer *view, int flags);

/* An MPI.buffer as a message's memory: an export of it, held as a view (py__mem_release
 * releases it), with its memory's flags. The device check of its buffer protocol does not
 * apply: the calls take memory that came through __cuda_array_interface__, which was
 * checked readable when the buffer was made. */
static int buffer_mem(BufferObject *b, int writable, struct mem *m)
{
	if (writable && b->mem.readonly) {
		PyErr_SetString(py__BufferError, "the buffer (MPI.buffer) is read-only");
		return -1;
	}
	if (buffer_export(b, &m->view, PyBUF_SIMPLE) < 0)
		return -1;
	m->held = 1;
	m->ptr = b->mem.ptr;
	m->len = b->mem.len;
	m->itemsize = 1;
	m->readonly = b->mem.readonly;
	m->device = b->mem.device;
	return 0;
}

int py__is_buffer(PyObject *obj)
{
	return PyObject_CheckBuffer(obj) || is_tensor(obj) ||
	       PyObject_HasAttrString(obj, "__dlpack__") ||
	       PyObject_HasAttrString(obj, "__cuda_array_interface__") ||
	       PyObject_HasAttrString(obj, "__array_interface__");
}

/* mpi4py's order: the buffer protocol; then DLPack, then the CUDA array interface (and,
 * beyond mpi4py, NumPy's array interface); else the buffer protocol's error. A tensor takes
 * a path of its own, for speed (its DLPack would give the same). */
int py__mem_get(PyObject *obj, int writable, struct mem *m)
{
	int rc;

	memset(m, 0, sizeof(*m));
	if (Py_IS_TYPE(obj, &py__BufferType))
		return buffer_mem((BufferObject *)obj, writable, m);
	if (PyObject_CheckBuffer(obj)) {
		int flags = PyBUF_ANY_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);

		if (PyObject_GetBuffer(obj, &m->view, flags) < 0) {
			if (PyErr_ExceptionMatches(PyExc_BufferError) ||
			    PyErr_ExceptionMatches(PyExc_ValueError)) {
				PyObject *t, *v, *tb;

				PyErr_Fetch(&t, &v, &tb);
				PyErr_NormalizeException(&t, &v, &tb);
				not_contiguous(writable ? "contiguous and writable" : "contiguous",
				               v);
				Py_XDECREF(t);
				Py_XDECREF(v);
				Py_XDECREF(tb);
			}
			return -1;
		}
		m->held = 1;
		m->ptr = m->view.buf;
		m->len = m->view.len;
		m->format = m->view.format;
		m->itemsize = m->view.itemsize;
		m->readonly = m->view.readonly;
		return 0;
	}
	if (is_tensor(obj))
		return torch_mem(obj, m);
	if ((rc = dlpack_mem(obj, writable, m)) <= 0)
		return rc;
	if ((rc = cai_mem(obj, writable, m)) <= 0)
		return rc;
	if (PyObject_HasAttrString(obj, "__array_interface__"))
		return array_interface_mem(obj, writable, m);
	PyErr_Format(PyExc_TypeError,
	             "expected a buffer (a NumPy array, bytearray, memoryview, torch.Tensor ...), "
	             "got %.100s",
	             Py_TYPE(obj)->tp_name);
	return -1;
}

/* _mem(obj, writable=False) -> (address, nbytes, readonly): a buffer's memory as the calls
 * resolve it (MPI.Get_address and MPI.memory use it). */
PyObject *py__mem_info(PyObject *mod, PyObject *args)
{
	PyObject *obj, *res;
	int writable = 0;
	struct mem m;

	if (!PyArg_ParseTuple(args, "O|p:_mem", &obj, &writable))
		return NULL;
	if (py__mem_get(obj, writable, &m) < 0)
		return NULL;
	res = Py_BuildValue("(nnO)", (Py_ssize_t)(uintptr_t)m.ptr, m.len,
	                    m.readonly ? Py_True : Py_False);
	py__mem_release(&m);
	return res;
}

void py__mem_release(struct mem *m)
{
	if (m->held)
		PyBuffer_Release(&m->view);
	m->held = 0;
	Py_CLEAR(m->keep);
}

/* ---- MPI.buffer ---- */

static char empty[1]; /* what an empty buffer exports: memoryview wants an address */

/* An export of b (its buffer protocol, without the device check): 0, or -1 with
 * BufferError (writable asked of a read-only buffer). */
static int buffer_export(BufferObject *b, Py_buffer *view, int flags)
{
	if (PyBuffer_FillInfo(view, (PyObject *)b, b->mem.ptr ? b->mem.ptr : empty, b->mem.len,
	                      b->mem.readonly, flags) < 0)
		return -1;
	b->exports++;
	return 0;
}

/* Lets go of what holds b's memory: the exporter's view or kept object, its object, the
 * base buffer's export. */
static void buffer_drop(struct mem *mem, PyObject **obj, BufferObject **base);

static void buffer_unexport(BufferObject *b)
{
	if (--b->exports == 0)
		buffer_drop(&b->retired, &b->retired_obj, &b->retired_base);
}

static void buffer_drop(struct mem *mem, PyObject **obj, BufferObject **base)
{
	BufferObject *bb = *base;

	py__mem_release(mem);
	memset(mem, 0, sizeof(*mem));
	Py_CLEAR(*obj);
	*base = NULL;
	if (bb) {
		buffer_unexport(bb);
		Py_DECREF(bb);
	}
}

/* b empty, as after release(): its hold goes now, or with the last export (a buffer once
 * empty gets no memory again, so there is one hold at most to keep). */
static void buffer_empty(BufferObject *b)
{
	if (b->exports > 0 && !b->retired_obj && !b->retired_base && !b->retired.held &&
	    !b->retired.keep) {
		b->retired = b->mem;
		b->retired_obj = b->obj;
		b->retired_base = b->base;
		memset(&b->mem, 0, sizeof(b->mem));
		b->obj = NULL;
		b->base = NULL;
	} else {
		buffer_drop(&b->mem, &b->obj, &b->base);
	}
	b->itemsize = 1;
}

static BufferObject *buffer_alloc(void)
{
	BufferObject *b = PyObject_New(BufferObject, &py__BufferType);

	if (!b)
		return NULL;
	memset(&b->mem, 0, sizeof(b->mem));
	memset(&b->retired, 0, sizeof(b->retired));
	b->obj = b->retired_obj = NULL;
	b->base = b->retired_base = NULL;
	b->itemsize = 1;
	b->exports = 0;
	return b;
}

/* A buffer over obj's memory as the calls take it (py__mem_get): obj is its .obj. */
static PyObject *buffer_over(PyObject *obj, int writable)
{
	BufferObject *b = buffer_alloc();

	if (!b)
		return NULL;
	if (py__mem_get(obj, writable, &b->mem) < 0) {
		memset(&b->mem, 0, sizeof(b->mem));
		Py_DECREF(b);
		return NULL;
	}
	Py_INCREF(obj);
	b->obj = obj;
	b->itemsize = b->mem.held && b->mem.view.itemsize > 0 ? b->mem.view.itemsize : 1;
	return (PyObject *)b;
}

/* A buffer over bytes [off, off + n) of b, holding an export of b: a slice (obj b) or
 * toreadonly()'s (obj b's). */
static PyObject *buffer_view(BufferObject *b, Py_ssize_t off, Py_ssize_t n, int readonly,
                             PyObject *obj)
{
	BufferObject *v = buffer_alloc();

	if (!v)
		return NULL;
	v->mem.ptr = b->mem.ptr ? b->mem.ptr + off : NULL;
	v->mem.len = n;
	v->mem.itemsize = 1;
	v->mem.readonly = readonly;
	v->mem.device = b->mem.device;
	v->itemsize = b->itemsize;
	Py_INCREF(b);
	v->base = b;
	b->exports++;
	Py_INCREF(obj);
	v->obj = obj;
	return (PyObject *)v;
}

static PyObject *buffer_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	PyObject *obj = NULL;

	if ((kw && PyDict_GET_SIZE(kw)) || !PyArg_ParseTuple(args, "|O:buffer", &obj)) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "buffer() takes no keyword arguments");
		return NULL;
	}
	return obj ? buffer_over(obj, 0) : (PyObject *)buffer_alloc();
}

static void buffer_dealloc(BufferObject *b)
{
	/* Every export holds b: none is left. */
	buffer_drop(&b->mem, &b->obj, &b->base);
	buffer_drop(&b->retired, &b->retired_obj, &b->retired_base);
	PyObject_Free(b);
}

/* mpi4py's device memory: a buffer over __cuda_array_interface__ (or DLPack off the CPU)
 * is not read or written here, nor exported to the CPU. */
static int buffer_host(const BufferObject *b, const char *what)
{
	if (!b->mem.device)
		return 0;
	PyErr_Format(PyExc_BufferError,
	             "buffer.%s: the memory came through a device array protocol "
	             "(__cuda_array_interface__ or DLPack off the CPU), not for the CPU",
	             what);
	return -1;
}

static int buffer_getbuffer(BufferObject *b, Py_buffer *view, int flags)
{
	if (buffer_host(b, "__buffer__") < 0)
		return -1;
	return buffer_export(b, view, flags);
}

static void buffer_releasebuffer(BufferObject *b, Py_buffer *view)
{
	(void)view;
	buffer_unexport(b);
}

static PyBufferProcs buffer_as_buffer = {
    .bf_getbuffer = (getbufferproc)buffer_getbuffer,
    .bf_releasebuffer = (releasebufferproc)buffer_releasebuffer,
};

/* ---- its methods ---- */

static PyObject *buffer_allocate(PyObject *unused, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"nbytes", "clear", NULL};
	PyObject *on, *ba, *b;
	Py_ssize_t n;
	int clear = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:allocate", kwlist, &on, &clear))
		return NULL;
	if ((n = PyNumber_AsSsize_t(on, PyExc_OverflowError)) == -1 && PyErr_Occurred())
		return NULL;
	if (n < 0) {
		PyErr_Format(PyExc_ValueError,
		             "buffer.allocate: expecting non-negative size, got %zd", n);
		return NULL;
	}
	/* A bytearray: its memory lives while the buffer's export holds it (it cannot be
	 * resized meanwhile), and .obj is a buffer of its own, as mpi4py's. */
	if (!(ba = PyByteArray_FromStringAndSize(NULL, n)))
		return NULL;
	if (clear)
		memset(PyByteArray_AS_STRING(ba), 0, (size_t)n);
	b = buffer_over(ba, 1);
	Py_DECREF(ba);
	return b;
}

static PyObject *buffer_frombuffer(PyObject *unused, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"obj", "readonly", NULL};
	PyObject *obj;
	BufferObject *b;
	int readonly = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:frombuffer", kwlist, &obj, &readonly))
		return NULL;
	if (!(b = (BufferObject *)buffer_over(obj, !readonly)))
		return NULL;
	b->mem.readonly = readonly; /* as asked, as mpi4py's */
	return (PyObject *)b;
}

static PyObject *buffer_fromaddress(PyObject *unused, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"address", "nbytes", "readonly", NULL};
	PyObject *oa, *on;
	BufferObject *b;
	Py_ssize_t n;
	void *p;
	int readonly = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|p:fromaddress", kwlist, &oa, &on, &readonly))
		return NULL;
	if (!(p = PyLong_AsVoidPtr(oa)) && PyErr_Occurred())
		return NULL;
	if ((n = PyNumber_AsSsize_t(on, PyExc_OverflowError)) == -1 && PyErr_Occurred())
		return NULL;
	if (n < 0) {
		PyErr_SetString(PyExc_ValueError, "buffer.fromaddress: expecting non-negative "
		                                  "buffer length");
		return NULL;
	}
	if (n > 0 && !p) {
		PyErr_SetString(PyExc_ValueError, "buffer.fromaddress: expecting non-NULL address");
		return NULL;
	}
	if (!(b = buffer_alloc()))
		return NULL;
	b->mem.ptr = p;
	b->mem.len = n;
	b->mem.itemsize = 1;
	b->mem.readonly = readonly;
	return (PyObject *)b;
}

static PyObject *buffer_cast(BufferObject *b, PyObject *args, PyObject *kw)
{
	PyObject *mv, *fn, *r = NULL;

	if (buffer_host(b, "cast") < 0 || !(mv = PyMemoryView_FromObject((PyObject *)b)))
		return NULL;
	if ((fn = PyObject_GetAttrString(mv, "cast"))) {
		r = PyObject_Call(fn, args, kw);
		Py_DECREF(fn);
	}
	Py_DECREF(mv);
	return r;
}

static PyObject *buffer_tobytes(BufferObject *b, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"order", NULL};
	PyObject *order = Py_None;

	/* order is taken and not used: the bytes are contiguous (mpi4py's). */
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:tobytes", kwlist, &order) ||
	    buffer_host(b, "tobytes") < 0)
		return NULL;
	return PyBytes_FromStringAndSize(b->mem.ptr, b->mem.len);
}

static PyObject *buffer_toreadonly(BufferObject *b, PyObject *unused)
{
	return buffer_view(b, 0, b->mem.len, 1, b->obj ? b->obj : (PyObject *)b);
}

static PyObject *buffer_release(BufferObject *b, PyObject *unused)
{
	buffer_empty(b);
	Py_RETURN_NONE;
}

static PyMethodDef buffer_methods[] = {
    {"allocate", KW(buffer_allocate), METH_VARARGS | METH_KEYWORDS | METH_STATIC,
     "allocate(nbytes, clear=False) -> buffer: new memory of nbytes (zeroed if clear)"},
    {"frombuffer", KW(buffer_frombuffer), METH_VARARGS | METH_KEYWORDS | METH_STATIC,
     "frombuffer(obj, readonly=False) -> buffer: over obj's memory (any buffer the calls "
     "take)"},
    {"fromaddress", KW(buffer_fromaddress), METH_VARARGS | METH_KEYWORDS | METH_STATIC,
     "fromaddress(address, nbytes, readonly=False) -> buffer: over the memory at address"},
    {"cast", KW(buffer_cast), METH_VARARGS | METH_KEYWORDS,
     "cast(format, shape=...) -> memoryview: memoryview(self).cast(format, shape)"},
    {"tobytes", KW(buffer_tobytes), METH_VARARGS | METH_KEYWORDS,
     "tobytes(order=None) -> bytes: a copy of the memory"},
    {"toreadonly", (PyCFunction)buffer_toreadonly, METH_NOARGS,
     "toreadonly() -> buffer: a read-only buffer over the same memory"},
    {"release", (PyCFunction)buffer_release, METH_NOARGS,
     "release(): lets go of the memory; the buffer is then empty"},
    {NULL, NULL, 0, NULL},
};

static PyObject *get_address(BufferObject *b, void *u)
{
	return PyLong_FromVoidPtr(b->mem.ptr);
}

static PyObject *get_obj(BufferObject *b, void *u)
{
	PyObject *o = b->obj ? b->obj : Py_None;

	Py_INCREF(o);
	return o;
}

static PyObject *get_nbytes(BufferObject *b, void *u)
{
	return PyLong_FromSsize_t(b->mem.len);
}

static PyObject *get_readonly(BufferObject *b, void *u)
{
	return PyBool_FromLong(b->mem.readonly);
}

static PyObject *get_format(BufferObject *b, void *u)
{
	return PyUnicode_FromString("B"); /* bytes: mpi4py's (it asks no format) */
}

static PyObject *get_itemsize(BufferObject *b, void *u)
{
	return PyLong_FromSsize_t(b->itemsize);
}

static PyGetSetDef buffer_getset[] = {
    {"address", (getter)get_address, NULL, "the memory's address (0: none)", NULL},
    {"obj", (getter)get_obj, NULL, "the object the memory is of, or None", NULL},
    {"nbytes", (getter)get_nbytes, NULL, "bytes of memory", NULL},
    {"readonly", (getter)get_readonly, NULL, "whether it is read-only", NULL},
    {"format", (getter)get_format, NULL, "'B': bytes", NULL},
    {"itemsize", (getter)get_itemsize, NULL, "the exporter's item size, else 1", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ---- as a sequence of bytes ---- */

static Py_ssize_t buffer_length(BufferObject *b)
{
	return b->mem.len;
}

/* The byte at index item (negative: from the end): its offset, or -1 with IndexError. */
static Py_ssize_t buffer_index(BufferObject *b, PyObject *item)
{
	Py_ssize_t i = PyNumber_AsSsize_t(item, PyExc_IndexError);

	if (i == -1 && PyErr_Occurred())
		return -1;
	if (i < 0)
		i += b->mem.len;
	if (i < 0 || i >= b->mem.len) {
		PyErr_SetString(PyExc_IndexError, "buffer index out of range");
		return -1;
	}
	return i;
}

/* A slice of step 1 (another step: IndexError, as mpi4py's): 0 with start and length, or
 * -1. */
static int buffer_slice(BufferObject *b, PyObject *item, Py_ssize_t *start, Py_ssize_t *n)
{
	Py_ssize_t stop, step;

	if (PySlice_Unpack(item, start, &stop, &step) < 0)
		return -1;
	*n = PySlice_AdjustIndices(b->mem.len, start, &stop, step);
	if (step != 1) {
		PyErr_SetString(PyExc_IndexError, "buffer: slice with step not supported");
		return -1;
	}
	return 0;
}

static PyObject *buffer_subscript(BufferObject *b, PyObject *item)
{
	Py_ssize_t i, n;

	if (PyIndex_Check(item)) {
		if ((i = buffer_index(b, item)) < 0 || buffer_host(b, "__getitem__") < 0)
			return NULL;
		return PyLong_FromLong(((unsigned char *)b->mem.ptr)[i]);
	}
	if (PySlice_Check(item)) {
		if (buffer_slice(b, item, &i, &n) < 0)
			return NULL;
		return buffer_view(b, i, n, b->mem.readonly, (PyObject *)b);
	}
	PyErr_Format(PyExc_TypeError, "buffer indices must be integers or slices, not %.100s",
	             Py_TYPE(item)->tp_name);
	return NULL;
}

static PyObject *buffer_item(BufferObject *b, Py_ssize_t i)
{
	if (i < 0 || i >= b->mem.len) {
		PyErr_SetString(PyExc_IndexError, "buffer index out of range");
		return NULL;
	}
	if (buffer_host(b, "__getitem__") < 0)
		return NULL;
	return PyLong_FromLong(((unsigned char *)b->mem.ptr)[i]);
}

/* A value stored as a byte: an integer of 0 to 255 (OverflowError beyond, as Cython's
 * conversion in mpi4py's). */
static int as_byte(PyObject *value, unsigned char *c)
{
	long v = PyLong_AsLong(value);

	if (v == -1 && PyErr_Occurred())
		return -1;
	if (v < 0 || v > 255) {
		PyErr_Format(PyExc_OverflowError, "buffer: %ld does not fit a byte", v);
		return -1;
	}
	*c = (unsigned char)v;
	return 0;
}

static int buffer_ass_subscript(BufferObject *b, PyObject *item, PyObject *value)
{
	Py_ssize_t i, n;
	unsigned char c;

	if (!value) {
		PyErr_SetString(PyExc_TypeError, "buffer: items cannot be deleted");
		return -1;
	}
	if (b->mem.readonly) {
		PyErr_SetString(PyExc_TypeError, "buffer is read-only");
		return -1;
	}
	if (PyIndex_Check(item)) {
		if ((i = buffer_index(b, item)) < 0 || buffer_host(b, "__setitem__") < 0 ||
		    as_byte(value, &c) < 0)
			return -1;
		((unsigned char *)b->mem.ptr)[i] = c;
		return 0;
	}
	if (!PySlice_Check(item)) {
		PyErr_Format(PyExc_TypeError,
		             "buffer indices must be integers or slices, not %.100s",
		             Py_TYPE(item)->tp_name);
		return -1;
	}
	if (buffer_slice(b, item, &i, &n) < 0 || buffer_host(b, "__setitem__") < 0)
		return -1;
	if (PyIndex_Check(value)) {
		if (as_byte(value, &c) < 0)
			return -1;
		if (n)
			memset(b->mem.ptr + i, c, (size_t)n);
	} else {
		struct mem vm;

		if (py__mem_get(value, 0, &vm) < 0)
			return -1;
		if (vm.len != n) {
			PyErr_Format(PyExc_ValueError,
			             "buffer: slice of %zd bytes, value of %zd: lengths differ", n,
			             vm.len);
			py__mem_release(&vm);
			return -1;
		}
		if (n)
			memmove(b->mem.ptr + i, vm.ptr, (size_t)n);
		py__mem_release(&vm);
	}
	return 0;
}

static PySequenceMethods buffer_as_sequence = {
    .sq_length = (lenfunc)buffer_length,
    .sq_item = (ssizeargfunc)buffer_item,
};

static PyMappingMethods buffer_as_mapping = {
    .mp_length = (lenfunc)buffer_length,
    .mp_subscript = (binaryfunc)buffer_subscript,
    .mp_ass_subscript = (objobjargproc)buffer_ass_subscript,
};

PyTypeObject py__BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmcoll.MPI.buffer",
    .tp_basicsize = sizeof(BufferObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "buffer() / buffer(obj): bytes of memory, mpi4py 4's MPI.buffer (memory in "
              "mpi4py 3): over any buffer the calls take (buffer protocol, DLPack, "
              "__cuda_array_interface__, __array_interface__, torch tensors), an address "
              "(fromaddress) or new memory (allocate); with the buffer protocol, len(), "
              "indexing and slicing by bytes.",
    .tp_new = buffer_new,
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_methods = buffer_methods,
    .tp_getset = buffer_getset,
    .tp_as_buffer = &buffer_as_buffer,
    .tp_as_sequence = &buffer_as_sequence,
    .tp_as_mapping = &buffer_as_mapping,
};

int py__buffer_init(PyObject *m)
{
	if (PyType_Ready(&py__BufferType) < 0)
		return -1;
	return py__add(m, "buffer", (PyObject *)&py__BufferType);
}
