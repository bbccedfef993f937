/* shmcoll_py.h - what the files of the extension _shmcoll share: its object types, the
 * buffers of a call, and the functions one file offers the others (py__ names).
 *
 * The extension is split by concern, as mpi4py splits its own:
 *   module.c    the module: its constants, init() and the errors
 *   buffer.c    buffers: the memory of an argument (buffer protocol, torch tensors)
 *   datatype.c  datatypes and ops
 *   comm.c      the communicator: making, splitting, freeing it; its method table
 *   coll.c      the collectives (blocking and non-blocking)
 *   p2p.c       point to point
 *   request.c   requests and statuses
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

extern PyObject *py__in_place; /* shmcoll.IN_PLACE */

/* Adds o to module m as name (a new reference of its own; o NULL fails): 0 or -1. */
int py__add(PyObject *m, const char *name, PyObject *o);

/* ---- datatypes and ops (datatype.c) ---- */

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

extern PyTypeObject py__DatatypeType;
extern PyTypeObject py__OpType;
extern const char *const py__dtype_names[SHMCOLL_DTYPE_COUNT];
/* The module's datatype objects, by shmcoll_dtype, the bytes one, and the ops by shmcoll_op. */
extern PyObject *py__dtypes[SHMCOLL_DTYPE_COUNT];
extern PyObject *py__bytes_type;
extern PyObject *py__ops[SHMCOLL_OP_COUNT];

int py__is_float(int dt);
/* obj as an op that dt has: 0, or -1 with TypeError set. */
int py__get_op(PyObject *obj, int dt, shmcoll_op *op, const char *what);
/* Makes the datatype and op objects and adds them to module m: 0 or -1. */
int py__datatypes_init(PyObject *m);

/* Bytes move as uint8. */
static inline shmcoll_dtype py__cdt(int dt)
{
	return dt == BYTES ? SHMCOLL_UINT8 : (shmcoll_dtype)dt;
}

/* ---- buffers (buffer.c) ---- */

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

void py__buf_release(struct buf *b);
/* Resolves a buffer argument: obj, IN_PLACE (if inplace_ok), None (if none_ok), or a list
 * form. 0, or -1 with an exception set (b released). */
int py__get_buf(PyObject *obj, struct buf *b, int writable, int inplace_ok, int none_ok,
                const char *what);
/* The same element type on both sides: the send buffer's. A reduction (red) needs one of the
 * ten; a move without one moves bytes. 0, or -1 with TypeError set. */
int py__agree(struct buf *s, struct buf *r, int red, const char *what);
/* b holds at least count elements: 0, or -1 with ValueError set. */
int py__need(const struct buf *b, size_t count, const char *what, const char *which);

/* ---- the communicator (comm.c) ---- */

/* c is NULL once freed. A communicator freed while symmetric buffers (shmcoll.malloc) still
 * live keeps its C communicator in parked, mapped and unusable, until the last of them goes
 * (symbuf.c destroys it then). */
typedef struct {
	PyObject_HEAD shmcoll_comm *c;
	int rank, size;
	PyObject *weakrefs;
	shmcoll_comm *parked;
	Py_ssize_t nsym; /* live SymBufObjects over its memory */
	Py_ssize_t nreq; /* requests started and not yet completed */
} CommObject;

extern PyTypeObject py__CommType;

/* self's C communicator, or NULL with shmcoll.Error(EINVAL) raised once it was freed. */
shmcoll_comm *py__live(CommObject *self);
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

/* ---- requests and statuses (request.c) ---- */

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

extern PyTypeObject py__RequestType;

/* Wraps a started request; takes a and b (either may be NULL) from the caller. */
PyObject *py__request_new(PyObject *comm, shmcoll_request *req, struct buf *a, struct buf *b,
                          int recv);
/* After a call of self with buffers a and b (either NULL): the blocking call's None, the
 * started call's request (which takes the buffers), or the error raised. */
PyObject *py__called(PyObject *self, shmcoll_comm *c, int rc, shmcoll_request *req, int nb,
                     struct buf *a, struct buf *b, int recv);
/* Fills status (a Status object, or None: nothing) from st: status, or NULL with an
 * exception set. */
PyObject *py__status_fill(PyObject *status, const shmcoll_status *st);

/* ---- symmetric memory (symbuf.c) ---- */

extern PyTypeObject py__SymBufType;

#endif
