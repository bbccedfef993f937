/* shmcoll_py.h - what the files of the extension _shmcoll share: its object types, the
 * buffers of a call, and the functions one file offers the others (py__ names).
 *
 * The extension is split by concern, as mpi4py splits its own:
 *   module.c    the module: its constants, init() and the errors
 *   buffer.c    buffers: the memory of an argument (buffer protocol, torch tensors,
 *               __array_interface__, DLPack)
 *   message.c   message specifications, read as mpi4py reads them
 *   datatype.c  datatypes: the predefined ones, derived ones, packing
 *   op.c        ops: the predefined ones, Op.Create, the folds the library does not do
 *   comm.c      the communicator: making, splitting, freeing it; its method table
 *   coll.c      the collectives (blocking and non-blocking)
 *   p2p.c       point to point
 *   request.c   calls in progress, requests and statuses
 *   symbuf.c    symmetric memory (shmcoll.malloc)
 * Every method resolves and checks its buffers first (a bad one raises before any rank starts
 * the call), then calls the C library with the GIL released. The extension uses the public
 * API only (include/shmcoll.h), as the MPI interposer does. */
#ifndef SHMCOLL_PY_H
#define SHMCOLL_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stddef.h>
#include <stdint.h>

#include <shmcoll.h>

/* Runs stmt with the GIL released: every call that can wait. */
#define NOGIL(stmt)                                                                                \
	do {                                                                                       \
		Py_BEGIN_ALLOW_THREADS stmt;                                                       \
		Py_END_ALLOW_THREADS                                                               \
	} while (0)

/* A method taking keywords, as a PyMethodDef wants it. */
#define KW(f) ((PyCFunction)(void (*)(void))(f))

/* MPI's null rank: a send to it and a receive from it do nothing (a receive's status says
 * source PROC_NULL, tag ANY_TAG, no bytes). */
#define PROC_NULL (-2)

/* ---- errors (module.c) ---- */

extern PyObject *py__Error;        /* shmcoll.Error(OSError) */
extern PyObject *py__TimeoutError; /* shmcoll.TimeoutError(shmcoll.Error, TimeoutError) */
extern PyObject *py__BufferError;  /* shmcoll.BufferError(ValueError, BufferError) */

/* Raises the library's error rc (negative) with its message on c (or the last create's);
 * returns NULL. */
PyObject *py__raise_rc(const shmcoll_comm *c, int rc);
/* Raises shmcoll.Error(err, msg) (err positive); returns NULL. */
PyObject *py__raise_errno(int err, const char *msg);

/* Adds o to module m as name (a new reference of its own; o NULL fails): 0 or -1. */
int py__add(PyObject *m, const char *name, PyObject *o);

/* ---- datatypes (datatype.c) ---- */

/* The basic kinds of data a predefined datatype holds: what a reduction works on. */
enum basic {
	B_NONE, /* DATATYPE_NULL */
	B_BYTE, /* BYTE, PACKED, CHAR ...: bytes (the bitwise ops only) */
	B_BOOL, /* C_BOOL: the logical ops */
	B_I8,   /* signed integers */
	B_I16,
	B_I32,
	B_I64,
	B_U8, /* unsigned integers */
	B_U16,
	B_U32,
	B_U64,
	B_F16, /* IEEE binary16 */
	B_BF16,
	B_F32,
	B_F64,
	B_FLD, /* long double */
	B_C64, /* complex float */
	B_C128,
	B_CLD,
	B_SHORT_INT, /* the pairs of MAXLOC and MINLOC: a value, then an int */
	B_2INT,
	B_LONG_INT,
	B_FLOAT_INT,
	B_DOUBLE_INT,
	B_LD_INT,
	B_MIXED, /* a derived type of several basic kinds: it moves, it does not reduce */
	B_COUNT
};

/* Bytes of one basic element as data (a pair: its value's and its int's, no padding). */
extern const Py_ssize_t py__basic_size[B_COUNT];

/* A run of bytes of a datatype's element: its data lies at disp (from the element's
 * start) for len bytes. The runs are in the type map's order, which is the packed order. */
struct run {
	Py_ssize_t disp, len;
};

typedef struct {
	PyObject_HEAD int pre; /* predefined: its index in datatype.c's table; -1 derived */
	int basic;             /* enum basic of every basic element in it, or B_MIXED */
	Py_ssize_t size;       /* bytes of data of one element (MPI_Type_size) */
	Py_ssize_t nbasic;     /* basic elements in one element */
	Py_ssize_t lb, ub;     /* the extent is ub - lb */
	Py_ssize_t true_lb, true_ub;
	Py_ssize_t align; /* the alignment a struct of it pads to */
	Py_ssize_t nruns;
	struct run *runs; /* PyMem, NULL when nruns is 0 */
	int contig;       /* one element is its size of bytes at its start and the next follows
	                     at size: a buffer of them is their data, as it is */
	int committed;
	int freed;          /* Free() made it DATATYPE_NULL */
	int combiner;       /* MPI's COMBINER_*, NAMED for predefined */
	PyObject *contents; /* (integers, addresses, datatypes) it was made from; NULL named */
	PyObject *name;     /* Set_name's, or NULL */
} DatatypeObject;

extern PyTypeObject py__DatatypeType;
/* DATATYPE_NULL, BYTE (what raw bytes move as), and the C API's ten element types. */
extern DatatypeObject *py__dt_null, *py__dt_byte;
extern DatatypeObject *py__dt_c[SHMCOLL_DTYPE_COUNT];

static inline Py_ssize_t py__extent(const DatatypeObject *t)
{
	return t->ub - t->lb;
}

/* The shmcoll_dtype of a basic kind the library reduces, or -1. */
int py__basic_cdt(int basic);
/* The datatype of a buffer format (PEP 3118: "i", "<f8", "Zd", ...; NULL: bytes): a
 * borrowed reference, or NULL with KeyError set (mpi4py's). */
DatatypeObject *py__dt_of_format(const char *format);
/* The character code (struct module, NumPy) of a kind ('b' boolean, 'i' signed, 'u'
 * unsigned, 'f' real, 'c' complex) with elements of size bytes: "i" for a signed of
 * sizeof(int) ..., a boolean wider than a byte its signed integer's; NULL for none. */
const char *py__typechr(char kind, Py_ssize_t size);
/* A datatype argument: a Datatype, or a typecode string mpi4py's TypeDict maps: a borrowed
 * reference, or NULL with KeyError (unknown) or TypeError set. */
DatatypeObject *py__dt_get(PyObject *obj);
/* Copies count elements of t at src (element i at src + i*extent) to dst, contiguous
 * (count * size bytes); unpack does the reverse. */
void py__pack(const DatatypeObject *t, const char *src, Py_ssize_t count, char *dst);
void py__unpack(const DatatypeObject *t, const char *src, Py_ssize_t count, char *dst);
/* Unpacks nbytes of packed data (a receive's, which may end inside an element) into dst,
 * following t's type map. */
void py__unpack_bytes(const DatatypeObject *t, const char *src, Py_ssize_t nbytes, char *dst);
/* Makes the predefined datatypes: adds each to module m by its name and the dicts
 * m._datatypes (name -> Datatype) and m._typedict (mpi4py's typecode -> Datatype). */
int py__datatypes_init(PyObject *m);

/* ---- ops (op.c) ---- */

/* The predefined ops; user ops (Op.Create) are OP_USER. */
enum op_kind {
	OP_NULL,
	OP_SUM,
	OP_PROD,
	OP_MIN,
	OP_MAX,
	OP_AVG, /* shmcoll's: sum / size */
	OP_LAND,
	OP_BAND,
	OP_LOR,
	OP_BOR,
	OP_LXOR,
	OP_BXOR,
	OP_MAXLOC,
	OP_MINLOC,
	OP_REPLACE,
	OP_NO_OP,
	OP_USER,
	OP_COUNT
};

typedef struct {
	PyObject_HEAD int kind; /* enum op_kind */
	int commute;
	PyObject *func; /* OP_USER: function(inbuf, inoutbuf, datatype) */
	int freed;
	const char *name;
} OpObject;

extern PyTypeObject py__OpType;
extern OpObject *py__op[OP_COUNT]; /* the predefined ops by kind (NULL for OP_USER) */

/* obj as an op: a borrowed reference, or NULL with TypeError set. */
OpObject *py__op_get(PyObject *obj, const char *what);
/* Whether the library reduces op on t itself: 1 with *cdt, *cop and *mult set (the
 * library's count is mult times the elements of t: complex SUM reduces its real pairs);
 * else 0 (the call gathers the data and folds it here, with py__op_fold). */
int py__op_native(const OpObject *op, const DatatypeObject *t, shmcoll_dtype *cdt, shmcoll_op *cop,
                  Py_ssize_t *mult);
/* Whether op is defined on t: 0, or -1 with TypeError set (MPI's rules: SUM on complex
 * but not MIN, MAXLOC on pairs only, bitwise ops on integers and bytes ...). */
int py__op_check(const OpObject *op, const DatatypeObject *t, const char *what);
/* inout[i] = in[i] op inout[i] for count elements of t, packed (contiguous): the fold of
 * the reductions the library does not do (user ops call their function, with the GIL).
 * AVG folds as SUM (the caller divides, py__op_avg_finish). 0, or -1 with an exception
 * set (a user function raised). */
int py__op_fold(const OpObject *op, const DatatypeObject *t, const char *in, char *inout,
                Py_ssize_t count);
/* AVG's last step on a folded sum of size ranks: buf[i] /= size. */
void py__op_avg_finish(const DatatypeObject *t, char *buf, Py_ssize_t count, int size);
int py__ops_init(PyObject *m);

/* ---- buffers (buffer.c) ---- */

/* The memory of a buffer argument, held until released. */
struct mem {
	Py_buffer view; /* held when held is set */
	int held;
	char *ptr;
	Py_ssize_t len;        /* bytes */
	const char *format;    /* PEP 3118's, or NULL (bytes) */
	DatatypeObject *dtype; /* the datatype a tensor or DLPack array names, else NULL */
	PyObject *keep;        /* an object kept alive with the memory (a tensor), or NULL */
	/* Bytes of one element as the buffer declares it (its itemsize, a DLPack or torch
	 * dtype's size, a typestr's): the datatype message.c takes from the buffer has this
	 * size, so a count always counts the buffer's own elements. */
	Py_ssize_t itemsize;
	int readonly; /* the exporter's read-only flag (a send may still take it) */
	int device;   /* reached through a device protocol (__cuda_array_interface__, DLPack
	                 off the CPU): MPI.buffer refuses CPU access to it, as mpi4py does */
};

/* The memory of obj: the buffer protocol (any contiguous layout), a CPU torch.Tensor, an
 * object with __array_interface__ or a CPU __dlpack__ (DLPack 0.x or 1.0 capsules), an
 * MPI.buffer. 0, or -1 with an exception set (TypeError: no buffer; BufferError: not
 * contiguous, not writable, not on the CPU). */
int py__mem_get(PyObject *obj, int writable, struct mem *m);
void py__mem_release(struct mem *m);
/* _mem(obj, writable=False) -> (address, nbytes, readonly): the module function. */
PyObject *py__mem_info(PyObject *mod, PyObject *args);
/* MPI.buffer (mpi4py 4's, its 3.x name memory): bytes of memory over any buffer, an
 * address or an allocation, with the buffer protocol. */
extern PyTypeObject py__BufferType;
/* Readies MPI.buffer's type and adds it to module m as "buffer": 0 or -1. */
int py__buffer_init(PyObject *m);
/* The mpi4py major version (3 or 4) shmcoll.MPI answers as where the two differ; module.c,
 * set by shmcoll/_api.py. */
extern int py__mpi4py_api;
/* Whether obj could be a buffer (py__mem_get may still fail on it): mpi4py's is_buffer. */
int py__is_buffer(PyObject *obj);

/* ---- messages (message.c) ---- */

extern PyObject *py__in_place; /* MPI.IN_PLACE */
extern PyObject *py__bottom;   /* MPI.BOTTOM */

/* A message specification resolved, as mpi4py reads it (message.c). */
struct msg {
	struct mem mem;
	int ignored;          /* not this rank's argument (PROC_NULL, a non-root's): nothing */
	int inplace;          /* IN_PLACE */
	char *addr;           /* the data's start; NULL for BOTTOM and None */
	Py_ssize_t count;     /* elements of type (per block, for a block message) */
	Py_ssize_t *counts;   /* a vector message: elements per block (PyMem) */
	Py_ssize_t *displs;   /* ... and where each block starts, in extents of type */
	DatatypeObject *type; /* a reference held; NULL when ignored or in place */
	PyObject *obj;        /* the argument (a reference held) */
};

/* A message of one block, or of blocks equal blocks (Gather's receive, Scatter's and
 * Alltoall's send ...: blocks > 1 divides the buffer's elements by it when the count is
 * inferred). readonly: a send. 0, or -1 with mpi4py's exception set. */
int py__msg_simple(PyObject *obj, int readonly, int blocks, struct msg *m);
/* A vector message of blocks blocks (the v-calls): counts and displacements given or
 * inferred as mpi4py infers them. */
int py__msg_vector(PyObject *obj, int readonly, int blocks, struct msg *m);
/* Makes BOTTOM, IN_PLACE and MPI.buffer's type (py__buffer_init) and adds them to module m:
 * 0 or -1. */
int py__msg_init(PyObject *m);
/* An ignored message (not parsed, not looked at). */
void py__msg_ignore(struct msg *m);
/* IN_PLACE: obj is MPI.IN_PLACE, in a place where MPI allows it (the callers ask only
 * there). As mpi4py 4 (its is_IN_PLACE), None is IN_PLACE there too; as mpi4py 3, None is
 * no message (TypeError). */
static inline int py__is_in_place(PyObject *obj)
{
	return obj == py__in_place || (obj == Py_None && py__mpi4py_api >= 4);
}
/* m (a call's, zeroed) is IN_PLACE. */
void py__msg_in_place(struct msg *m);
void py__msg_release(struct msg *m);
/* Elements first .. first+n-1 of the message's type from addr lie inside its buffer
 * (BOTTOM and None: not checked). 0, or -1 with ValueError set. */
int py__msg_fits(const struct msg *m, Py_ssize_t first, Py_ssize_t n, const char *what);

/* ---- the communicator (comm.c) ---- */

/* c is NULL once freed, and in a null communicator (MPI.COMM_NULL: size 0). A communicator
 * freed while symmetric buffers (shmcoll.malloc) still live keeps its C communicator in
 * parked, mapped and unusable, until the last of them goes (symbuf.c destroys it then); one
 * freed while requests are outstanding keeps it in doomed until the last completes
 * (py__comm_req_done). A second handle of one communicator (MPI.Comm(comm)) has owner set:
 * its c follows the owner's (py__live). */
typedef struct {
	PyObject_HEAD shmcoll_comm *c;
	int rank, size;
	PyObject *weakrefs;
	shmcoll_comm *parked;
	Py_ssize_t nsym;      /* live SymBufObjects over its memory */
	Py_ssize_t nreq;      /* requests started and not yet completed (py__comm_req_start) */
	shmcoll_comm *doomed; /* freed with requests outstanding: destroyed after the last */
	PyObject *owner;      /* the CommObject this one is a second handle of, or NULL */
} CommObject;

extern PyTypeObject py__CommType;

/* self's C communicator, or NULL with shmcoll.Error(EINVAL) raised once it was freed. */
shmcoll_comm *py__live(CommObject *self);
/* A request of a library operation on self has started, and has ended: they count in nreq
 * (of self's first handle); a communicator freed meanwhile is destroyed after the last. */
void py__comm_req_start(CommObject *self);
void py__comm_req_done(CommObject *self);
/* A new object of type over c (destroyed if that fails). */
PyObject *py__wrap(PyTypeObject *type, shmcoll_comm *c);
/* Readies the communicator type with the methods of every file: 0 or -1. */
int py__comm_type_init(void);

/* The methods each file adds to the communicator type (NULL-terminated). */
extern PyMethodDef py__coll_methods[];
extern PyMethodDef py__p2p_methods[];
extern PyMethodDef py__symbuf_methods[];

/* Barrier(): the collective comm.c's with-block uses too. */
PyObject *py__comm_barrier(CommObject *self, PyObject *unused);

/* ---- calls and requests (request.c) ---- */

/* A call in progress: its messages, its scratch memory, and what is left to do once the
 * library's operation completed (unpack what arrived in scratch, fold a reduction the
 * library did not do, fill a status). A blocking call runs one start to finish; a
 * non-blocking one's request owns it until it completes. */
struct call {
	struct msg s, r; /* the send and receive messages (ignored where not used) */
	char *scratch;   /* PyMem: packed data, gathered contributions */
	Py_ssize_t nscratch;
	/* Run once the library's operation completed without error, with the GIL: 0, or -1
	 * with an exception set. NULL: nothing to do. */
	int (*finish)(struct call *k);
	/* What finish works with. */
	OpObject *op;         /* a reference held, or NULL */
	DatatypeObject *type; /* a reference held, or NULL */
	Py_ssize_t count;     /* elements of type to fold or unpack */
	int rank, size, root;
	char *out;         /* packed data to unpack or fold when the call completes */
	Py_ssize_t off;    /* a byte offset into out the finish needs */
	int recv;          /* a receive: its status is filled */
	shmcoll_status st; /* a receive's status */
	size_t *arrays[4]; /* counts and displacements the library reads until the call
	                      completes (PyMem, or NULL) */
	int heap;          /* made by py__call_new (freed with it) */
	/* Alltoallw: a datatype per block of each side (PyMem arrays of size held
	 * references); msg.displs are then in bytes. */
	DatatypeObject **wtypes[2];
	/* A second operation of the library the call started, or NULL: Isendrecv's send (its
	 * receive is the request's own). The request waits for and tests the two together,
	 * and the call's memory goes only after both ended. */
	shmcoll_request *req2;
};

/* A new call on the heap (a non-blocking call's, which its request keeps), zeroed, its
 * messages ignored: NULL with MemoryError set if none. */
struct call *py__call_new(void);
/* The same in k (a blocking call's, on the caller's stack): returns k. */
struct call *py__call_init(struct call *k);
/* Scratch of n bytes (kept in k): a pointer, or NULL with MemoryError set. */
char *py__call_scratch(struct call *k, Py_ssize_t n);
/* The call's four arrays of counts and displacements (k->arrays), n entries each, zeroed:
 * 0, or -1 with MemoryError set. */
int py__call_arrays(struct call *k, Py_ssize_t n);
/* Releases everything the call holds, and frees it if it is on the heap. */
void py__call_free(struct call *k);

typedef struct {
	PyObject_HEAD shmcoll_request *req; /* the library's, NULL once that completed */
	PyObject *comm;                     /* the CommObject, or NULL (a request of nothing) */
	struct call *call;                  /* NULL once finished */
	int active;  /* MPI: not yet completed by a Wait or Test (REQUEST_NULL when 0) */
	int counted; /* in its communicator's nreq until the library's operation completes */
	int rc;      /* the library's result, once req completed */
} RequestObject;

extern PyTypeObject py__RequestType;

/* After a call was started or made (rc the library's result): a blocking call (nb 0) is
 * waited for and finished, and returns None; a non-blocking one returns its request, which
 * takes k. k is freed on every path but the request's. NULL with the error raised. rc set
 * with req started (Isendrecv: its receive started, its send failed to): the request is
 * made and let go (as Free()), since the receive owns k until it completes. */
PyObject *py__called(CommObject *self, int rc, shmcoll_request *req, int nb, struct call *k);
/* Fills status (a Status object, or None: nothing) from st (source, tag, error, the bytes
 * received): 0, or -1 with an exception set. */
int py__status_fill(PyObject *status, const shmcoll_status *st);
/* MPI's empty status: source ANY_SOURCE, tag ANY_TAG, no bytes, no error. */
extern const shmcoll_status py__empty_status;
/* A receive from PROC_NULL's: source PROC_NULL, tag ANY_TAG, no bytes. */
extern const shmcoll_status py__null_status;

/* ---- symmetric memory (symbuf.c) ---- */

extern PyTypeObject py__SymBufType;

#endif
