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
 * it (counts, displacements, datatypes). */
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

/* A typestr ("<f8", "|u1", ">i4", "|V12" ...) as a format for message.c, and its item
 * size: 0, or -1 with ValueError. The format is the typestr itself (py__dt_of_format reads
 * its byte order, and refuses a non-native one) but for '|', no byte order. */
static int typestr_format(const char *ts, const char **format, Py_ssize_t *itemsize)
{
	char *end;
	long n = ts[0] && ts[1] && ts[2] ? strtol(ts + 2, &end, 10) : 0;

	if (!ts[0] || !ts[1] || !ts[2] || *end || n <= 0 || !strchr("<>|=", ts[0])) {
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

/* The format of a DLPack dtype, mpi4py 4's table (the C types' sizes, so long double's
 * 80-bit extended in 16 bytes is 'g', two lanes of it 'Zg'); NULL for a dtype no datatype
 * has (opaque handles, other lane counts, float8 ...). Whatever the format, an element is
 * (bits * lanes + 7) / 8 bytes (dl_itemsize): message.c moves a dtype without a format
 * as elements of that many bytes, so that a count counts elements. */
static const char *dl_format(const DLDataType *d)
{
	unsigned bits = d->bits;

	if (d->lanes != 1) {
		if (d->code != kDLFloat || d->lanes != 2)
			return NULL;
		return bits == 8 * sizeof(float)         ? "Zf"
		       : bits == 8 * sizeof(double)      ? "Zd"
		       : bits == 8 * sizeof(long double) ? "Zg"
		                                         : NULL;
	}
	switch (d->code) {
	case kDLBool:
		return bits == 8 ? "?" : NULL;
	case kDLInt:
		return bits == 8 * sizeof(char)        ? "b"
		       : bits == 8 * sizeof(short)     ? "h"
		       : bits == 8 * sizeof(int)       ? "i"
		       : bits == 8 * sizeof(long)      ? "l"
		       : bits == 8 * sizeof(long long) ? "q"
		                                       : NULL;
	case kDLUInt:
		return bits == 8 * sizeof(char)        ? "B"
		       : bits == 8 * sizeof(short)     ? "H"
		       : bits == 8 * sizeof(int)       ? "I"
		       : bits == 8 * sizeof(long)      ? "L"
		       : bits == 8 * sizeof(long long) ? "Q"
		                                       : NULL;
	case kDLFloat:
		return bits == 16                        ? "e"
		       : bits == 8 * sizeof(float)       ? "f"
		       : bits == 8 * sizeof(double)      ? "d"
		       : bits == 8 * sizeof(long double) ? "g"
		                                         : NULL;
	case kDLComplex:
		/* A complex long double (2 * 128 bits) does not fit the 8 bits of bits:
		 * producers give it as two lanes of kDLFloat (above). */
		return bits == 16 * sizeof(float)    ? "Zf"
		       : bits == 16 * sizeof(double) ? "Zd"
		                                     : NULL;
	default:
		return NULL;
	}
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
	rc = 0;
out:
	Py_XDECREF(seq);
	Py_DECREF(cai);
	return rc;
}

/* ---- any buffer ---- */

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
