/* p2p.c - point to point, with mpi4py's arguments: Send, Recv, Isend, Irecv, the send modes
 * (Ssend, Bsend, Rsend and their non-blocking starts), Sendrecv, Sendrecv_replace, their
 * non-blocking starts Isendrecv and Isendrecv_replace (mpi4py 4), Probe, Iprobe.
 *
 * A message travels as the bytes of its elements: a contiguous datatype's buffer as it
 * lies, another packed first (a send) or received into scratch and unpacked (a receive), so
 * sender and receiver may use different datatypes of the same signature, as in MPI. A
 * receive takes up to its buffer's bytes; a longer message is cut (EMSGSIZE, MPI's
 * ERR_TRUNCATE). Ssend and Issend are the library's synchronous sends (complete once a
 * receive matched the message); Bsend and Rsend the standard send, which their rules
 * allow (the library completes a send when its buffer may be reused). */
#include "shmcoll_py.h"

#include <errno.h>
#include <string.h>

static char *at(const struct msg *m)
{
	return m->addr;
}

/* The send message k->s (dest: PROC_NULL ignores it): the bytes to send in *p, *n. */
static int send_msg(PyObject *bo, int dest, struct call *k, const char **p, Py_ssize_t *n,
                    const char *what)
{
	char *scratch;

	if (dest == PROC_NULL) {
		py__msg_ignore(&k->s);
		*p = NULL;
		*n = 0;
		return 0;
	}
	if (py__msg_simple(bo, 1, 0, &k->s) < 0 || py__msg_fits(&k->s, 0, k->s.count, what) < 0)
		return -1;
	*n = k->s.count * k->s.type->size;
	if (k->s.type->contig || *n == 0) {
		*p = at(&k->s);
		return 0;
	}
	if (!(scratch = py__call_scratch(k, *n)))
		return -1;
	py__pack(k->s.type, at(&k->s), k->s.count, scratch);
	*p = scratch;
	return 0;
}

/* finish of a receive into scratch: the elements that arrived, unpacked. */
static int finish_recv(struct call *k)
{
	py__unpack_bytes(k->r.type, k->out, (Py_ssize_t)k->st.bytes, k->r.addr);
	return 0;
}

/* The receive message k->r (source PROC_NULL ignores it): where to receive *n bytes. */
static int recv_msg(PyObject *bo, int source, struct call *k, char **p, Py_ssize_t *n,
                    Py_ssize_t extra, const char *what)
{
	k->recv = 1;
	if (source == PROC_NULL) {
		py__msg_ignore(&k->r);
		k->st = py__null_status;
		*p = NULL;
		*n = 0;
		return 0;
	}
	if (py__msg_simple(bo, 0, 0, &k->r) < 0 || py__msg_fits(&k->r, 0, k->r.count, what) < 0)
		return -1;
	*n = k->r.count * k->r.type->size;
	if (k->r.type->contig || *n == 0) {
		*p = at(&k->r);
		return 0;
	}
	/* scratch after extra bytes the caller keeps for a packed send */
	if (!(k->out = py__call_scratch(k, extra + *n)))
		return -1;
	k->out += extra;
	*p = k->out;
	k->finish = finish_recv;
	return 0;
}

/* The end of a blocking receive: its finish and status; None or NULL. */
static PyObject *recv_done(CommObject *self, struct call *k, int rc, PyObject *status)
{
	PyObject *res = NULL;

	if (rc == 0 && k->finish && k->finish(k) < 0)
		goto out;
	if (rc) {
		/* A cut message: the part that arrived is written, and the status says so (filled
		 * before the error is raised: filling it runs Python code). */
		if (rc == -EMSGSIZE && py__status_fill(status, &k->st) < 0)
			goto out;
		py__raise_rc(self->c, rc);
		goto out;
	}
	if (py__status_fill(status, &k->st) < 0)
		goto out;
	res = Py_NewRef(Py_None);
out:
	py__call_free(k);
	return res;
}

/* Send(buf, dest, tag=0) and its modes; Isend(...) -> Request. */
static PyObject *send(CommObject *self, PyObject *args, PyObject *kw, int nb, int sync,
                      const char *fmt, const char *what)
{
	static char *kwlist[] = {"buf", "dest", "tag", NULL};
	shmcoll_comm *c = py__live(self);
	shmcoll_request *req = NULL;
	struct call *k, kk;
	const char *p;
	Py_ssize_t n;
	PyObject *bo;
	int dest, tag = 0, rc = 0;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &bo, &dest, &tag) ||
	    !(k = nb ? py__call_new() : py__call_init(&kk)))
		return NULL;
	if (send_msg(bo, dest, k, &p, &n, what) < 0) {
		py__call_free(k);
		return NULL;
	}
	if (dest != PROC_NULL) {
		if (nb)
			NOGIL(rc = (sync ? shmcoll_issend : shmcoll_isend)(
			          p, (size_t)n, SHMCOLL_UINT8, dest, tag, c, &req));
		else
			NOGIL(rc = (sync ? shmcoll_ssend : shmcoll_send)(
			          p, (size_t)n, SHMCOLL_UINT8, dest, tag, c));
	}
	return py__called(self, rc, req, nb, k);
}

#define SEND(name, nb, sync)                                                                       \
	static PyObject *comm_##name(CommObject *self, PyObject *args, PyObject *kw)               \
	{                                                                                          \
		return send(self, args, kw, nb, sync, "Oi|i:" #name, #name);                       \
	}
SEND(Send, 0, 0)
SEND(Ssend, 0, 1)
SEND(Bsend, 0, 0)
SEND(Rsend, 0, 0)
SEND(Isend, 1, 0)
SEND(Issend, 1, 1)
SEND(Ibsend, 1, 0)
SEND(Irsend, 1, 0)

static PyObject *comm_irecv(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"buf", "source", "tag", NULL};
	shmcoll_comm *c = py__live(self);
	int src = SHMCOLL_ANY_SOURCE, tag = SHMCOLL_ANY_TAG, rc = 0;
	shmcoll_request *req = NULL;
	struct call *k;
	PyObject *bo;
	Py_ssize_t n;
	char *p;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, "O|ii:Irecv", kwlist, &bo, &src, &tag) ||
	    !(k = py__call_new()))
		return NULL;
	if (recv_msg(bo, src, k, &p, &n, 0, "Irecv") < 0) {
		py__call_free(k);
		return NULL;
	}
	if (src != PROC_NULL)
		NOGIL(rc = shmcoll_irecv(p, (size_t)n, SHMCOLL_UINT8, src, tag, c, &req));
	return py__called(self, rc, req, 1, k);
}

static PyObject *comm_recv(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"buf", "source", "tag", "status", NULL};
	shmcoll_comm *c = py__live(self);
	int src = SHMCOLL_ANY_SOURCE, tag = SHMCOLL_ANY_TAG, rc = 0;
	PyObject *bo, *so = Py_None;
	struct call *k, kk;
	Py_ssize_t n;
	char *p;

	if (!c ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "O|iiO:Recv", kwlist, &bo, &src, &tag, &so) ||
	    !(k = py__call_init(&kk)))
		return NULL;
	if (recv_msg(bo, src, k, &p, &n, 0, "Recv") < 0) {
		py__call_free(k);
		return NULL;
	}
	if (src != PROC_NULL)
		NOGIL(rc = shmcoll_recv(p, (size_t)n, SHMCOLL_UINT8, src, tag, c, &k->st));
	return recv_done(self, k, rc, so);
}

/* Sendrecv(sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG,
 * status=None). */
static PyObject *comm_sendrecv(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"sendbuf", "dest",    "sendtag", "recvbuf",
	                         "source",  "recvtag", "status",  NULL};
	shmcoll_comm *c = py__live(self);
	PyObject *so, *ro = Py_None, *sto = Py_None;
	int dest, stag = 0, src = SHMCOLL_ANY_SOURCE, rtag = SHMCOLL_ANY_TAG, rc = 0;
	struct call *k, kk;
	const char *sp;
	char *rp, *spk = NULL;
	Py_ssize_t sn, rn;

	if (!c ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "Oi|iOiiO:Sendrecv", kwlist, &so, &dest, &stag,
	                                 &ro, &src, &rtag, &sto) ||
	    !(k = py__call_init(&kk)))
		return NULL;
	if (send_msg(so, dest, k, &sp, &sn, "Sendrecv") < 0)
		goto fail;
	if (sp == k->scratch && sp) {
		/* The packed send lives in scratch, which the receive's scratch replaces: keep a
		 * copy in front of it. */
		spk = PyMem_Malloc((size_t)sn);
		if (!spk) {
			PyErr_NoMemory();
			goto fail;
		}
		memcpy(spk, sp, (size_t)sn);
		sp = spk;
	}
	if (recv_msg(ro, src, k, &rp, &rn, 0, "Sendrecv") < 0)
		goto fail;
	if (dest == PROC_NULL && src == PROC_NULL)
		rc = 0;
	else if (dest == PROC_NULL)
		NOGIL(rc = shmcoll_recv(rp, (size_t)rn, SHMCOLL_UINT8, src, rtag, c, &k->st));
	else if (src == PROC_NULL)
		NOGIL(rc = shmcoll_send(sp, (size_t)sn, SHMCOLL_UINT8, dest, stag, c));
	else
		NOGIL(rc = shmcoll_sendrecv(sp, (size_t)sn, SHMCOLL_UINT8, dest, stag, rp,
		                            (size_t)rn, SHMCOLL_UINT8, src, rtag, c, &k->st));
	PyMem_Free(spk);
	return recv_done(self, k, rc, sto);
fail:
	PyMem_Free(spk);
	py__call_free(k);
	return NULL;
}

/* Sendrecv_replace(buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG, status=None):
 * the message sent from buf, and the one received replacing it. */
static PyObject *comm_sendrecv_replace(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"buf", "dest", "sendtag", "source", "recvtag", "status", NULL};
	shmcoll_comm *c = py__live(self);
	PyObject *bo, *sto = Py_None;
	int dest, stag = 0, src = SHMCOLL_ANY_SOURCE, rtag = SHMCOLL_ANY_TAG, rc = 0;
	struct call *k, kk;
	char *rp, *copy = NULL;
	Py_ssize_t rn;

	if (!c ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "Oi|iiiO:Sendrecv_replace", kwlist, &bo, &dest,
	                                 &stag, &src, &rtag, &sto) ||
	    !(k = py__call_init(&kk)))
		return NULL;
	/* The buffer is both: received into as a message; sent from a packed copy of it. */
	if (recv_msg(bo, src == PROC_NULL && dest != PROC_NULL ? SHMCOLL_ANY_SOURCE : src, k, &rp,
	             &rn, 0, "Sendrecv_replace") < 0)
		goto fail;
	if (src == PROC_NULL)
		k->st = py__null_status;
	if (dest != PROC_NULL) {
		copy = PyMem_Malloc((size_t)(rn ? rn : 1));
		if (!copy) {
			PyErr_NoMemory();
			goto fail;
		}
		py__pack(k->r.type, k->r.addr, k->r.count, copy);
	}
	if (dest == PROC_NULL && src == PROC_NULL)
		rc = 0;
	else if (dest == PROC_NULL)
		NOGIL(rc = shmcoll_recv(rp, (size_t)rn, SHMCOLL_UINT8, src, rtag, c, &k->st));
	else if (src == PROC_NULL)
		NOGIL(rc = shmcoll_send(copy, (size_t)rn, SHMCOLL_UINT8, dest, stag, c));
	else
		NOGIL(rc = shmcoll_sendrecv(copy, (size_t)rn, SHMCOLL_UINT8, dest, stag, rp,
		                            (size_t)rn, SHMCOLL_UINT8, src, rtag, c, &k->st));
	if (src == PROC_NULL)
		k->finish = NULL;
	PyMem_Free(copy);
	return recv_done(self, k, rc, sto);
fail:
	PyMem_Free(copy);
	py__call_free(k);
	return NULL;
}

/* What the library's send checks (shmcoll_isend's -EINVAL), checked before an Isendrecv
 * starts its receive: a send that then failed to start would leave that receive posted,
 * taking a message nobody waits for. 0, or -1 with the library's error raised. */
static int check_dest(CommObject *self, int dest, int tag, const char *what)
{
	char msg[128];

	if (dest == PROC_NULL)
		return 0;
	if (dest < 0 || dest >= self->size)
		PyOS_snprintf(msg, sizeof(msg), "%s: dest %d out of range 0..%d", what, dest,
		              self->size - 1);
	else if (tag < 0)
		PyOS_snprintf(msg, sizeof(msg), "%s: tag %d out of range 0..%d", what, tag,
		              SHMCOLL_TAG_MAX);
	else
		return 0;
	py__raise_errno(EINVAL, msg);
	return -1;
}

/* Starts an Isendrecv's two operations of the library (without the GIL), the receive first
 * as shmcoll_sendrecv does (a message to this rank finds it posted): the receive in *req
 * and the send in *req2, or the send alone in *req when the source is PROC_NULL. */
static int start_pair(shmcoll_comm *c, char *rp, Py_ssize_t rn, int src, int rtag, const char *sp,
                      Py_ssize_t sn, int dest, int stag, shmcoll_request **req,
                      shmcoll_request **req2)
{
	int rc = 0;

	if (src != PROC_NULL)
		rc = shmcoll_irecv(rp, (size_t)rn, SHMCOLL_UINT8, src, rtag, c, req);
	if (!rc && dest != PROC_NULL)
		rc = shmcoll_isend(sp, (size_t)sn, SHMCOLL_UINT8, dest, stag, c, *req ? req2 : req);
	return rc;
}

/* Isendrecv(sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG) ->
 * Request: Sendrecv's start (mpi4py 4, MPI 4). Its receive and its send are the library's
 * non-blocking operations, which the request waits for and tests together (request.c):
 * every wait of the process moves them, as any other. */
static PyObject *comm_isendrecv(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"sendbuf", "dest",    "sendtag", "recvbuf",
	                         "source",  "recvtag", NULL};
	shmcoll_comm *c = py__live(self);
	PyObject *so, *ro = Py_None;
	int dest, stag = 0, src = SHMCOLL_ANY_SOURCE, rtag = SHMCOLL_ANY_TAG, rc;
	shmcoll_request *req = NULL;
	struct call *k;
	const char *sp;
	char *rp, *spk = NULL;
	Py_ssize_t sn, rn;

	if (!c ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "Oi|iOii:Isendrecv", kwlist, &so, &dest, &stag,
	                                 &ro, &src, &rtag) ||
	    check_dest(self, dest, stag, "Isendrecv") < 0 || !(k = py__call_new()))
		return NULL;
	if (send_msg(so, dest, k, &sp, &sn, "Isendrecv") < 0)
		goto fail;
	if (sp && sp == k->scratch) {
		/* A packed send: it stays in the call's scratch, in front of the receive's if the
		 * receive needs one (recv_msg's extra bytes), both the call's until it ends. */
		spk = k->scratch;
		k->scratch = NULL;
		k->nscratch = 0;
	}
	if (recv_msg(ro, src, k, &rp, &rn, spk ? sn : 0, "Isendrecv") < 0)
		goto fail;
	if (spk) {
		if (k->scratch) {
			memcpy(k->scratch, spk, (size_t)sn);
			PyMem_Free(spk);
		} else {
			k->scratch = spk;
			k->nscratch = sn;
		}
		sp = k->scratch;
		spk = NULL;
	}
	NOGIL(rc = start_pair(c, rp, rn, src, rtag, sp, sn, dest, stag, &req, &k->req2));
	return py__called(self, rc, req, 1, k);
fail:
	PyMem_Free(spk);
	py__call_free(k);
	return NULL;
}

/* Isendrecv_replace(buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG) -> Request:
 * Sendrecv_replace's start. The message sent is a packed copy of buf, kept in the call's
 * scratch until the send ends; the one received replaces buf. */
static PyObject *comm_isendrecv_replace(CommObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"buf", "dest", "sendtag", "source", "recvtag", NULL};
	const char *what = "Isendrecv_replace";
	shmcoll_comm *c = py__live(self);
	PyObject *bo;
	int dest, stag = 0, src = SHMCOLL_ANY_SOURCE, rtag = SHMCOLL_ANY_TAG, rc;
	shmcoll_request *req = NULL;
	struct call *k;
	char *rp, *copy;
	Py_ssize_t rn;
	int scratch;

	if (!c ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "Oi|iii:Isendrecv_replace", kwlist, &bo, &dest,
	                                 &stag, &src, &rtag) ||
	    check_dest(self, dest, stag, what) < 0 || !(k = py__call_new()))
		return NULL;
	/* As Sendrecv_replace: a send alone still reads buf as a message. */
	if (recv_msg(bo, src == PROC_NULL && dest != PROC_NULL ? SHMCOLL_ANY_SOURCE : src, k, &rp,
	             &rn, 0, what) < 0)
		goto fail;
	if (src == PROC_NULL) {
		k->st = py__null_status;
		k->finish = NULL;
	}
	/* The copy takes the scratch, in front of the receive's when it receives into one. */
	scratch = k->out != NULL;
	if (!(copy = py__call_scratch(k, scratch ? 2 * rn : rn)))
		goto fail;
	if (scratch) {
		k->out = copy + rn;
		rp = k->out;
	}
	if (dest != PROC_NULL)
		py__pack(k->r.type, k->r.addr, k->r.count, copy);
	NOGIL(rc = start_pair(c, rp, rn, src, rtag, copy, rn, dest, stag, &req, &k->req2));
	return py__called(self, rc, req, 1, k);
fail:
	py__call_free(k);
	return NULL;
}

/* Probe(source=ANY_SOURCE, tag=ANY_TAG, status=None) -> True: waits for a matching
 * message; Iprobe -> whether one is there. The status's count is the message's size. */
static PyObject *probe(CommObject *self, PyObject *args, PyObject *kw, int blocking)
{
	static char *kwlist[] = {"source", "tag", "status", NULL};
	shmcoll_comm *c = py__live(self);
	int src = SHMCOLL_ANY_SOURCE, tag = SHMCOLL_ANY_TAG, rc, flag = 1;
	PyObject *so = Py_None;
	shmcoll_status st = py__empty_status;

	if (!c || !PyArg_ParseTupleAndKeywords(args, kw, blocking ? "|iiO:Probe" : "|iiO:Iprobe",
	                                       kwlist, &src, &tag, &so))
		return NULL;
	if (src == PROC_NULL) {
		if (py__status_fill(so, &py__null_status) < 0)
			return NULL;
		Py_RETURN_TRUE;
	}
	if (blocking)
		NOGIL(rc = shmcoll_probe(src, tag, SHMCOLL_UINT8, c, &st));
	else
		NOGIL(rc = shmcoll_iprobe(src, tag, SHMCOLL_UINT8, c, &flag, &st));
	if (rc)
		return py__raise_rc(c, rc);
	if (flag) {
		st.bytes = st.total; /* a probe's status counts the whole message */
		if (py__status_fill(so, &st) < 0)
			return NULL;
	}
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

PyMethodDef py__p2p_methods[] = {
    {"Send", KW(comm_Send), METH_VARARGS | METH_KEYWORDS, "Send(buf, dest, tag=0)"},
    {"Ssend", KW(comm_Ssend), METH_VARARGS | METH_KEYWORDS,
     "Ssend(buf, dest, tag=0): returns once a receive matched the message"},
    {"Bsend", KW(comm_Bsend), METH_VARARGS | METH_KEYWORDS, "Bsend(buf, dest, tag=0): Send"},
    {"Rsend", KW(comm_Rsend), METH_VARARGS | METH_KEYWORDS, "Rsend(buf, dest, tag=0): Send"},
    {"Isend", KW(comm_Isend), METH_VARARGS | METH_KEYWORDS, "Isend(buf, dest, tag=0) -> Request"},
    {"Issend", KW(comm_Issend), METH_VARARGS | METH_KEYWORDS,
     "Issend(buf, dest, tag=0) -> Request: complete once a receive matched the message"},
    {"Ibsend", KW(comm_Ibsend), METH_VARARGS | METH_KEYWORDS,
     "Ibsend(buf, dest, tag=0) -> Request: Isend"},
    {"Irsend", KW(comm_Irsend), METH_VARARGS | METH_KEYWORDS,
     "Irsend(buf, dest, tag=0) -> Request: Isend"},
    {"Recv", KW(comm_recv), METH_VARARGS | METH_KEYWORDS,
     "Recv(buf, source=ANY_SOURCE, tag=ANY_TAG, status=None)"},
    {"Irecv", KW(comm_irecv), METH_VARARGS | METH_KEYWORDS,
     "Irecv(buf, source=ANY_SOURCE, tag=ANY_TAG) -> Request"},
    {"Sendrecv", KW(comm_sendrecv), METH_VARARGS | METH_KEYWORDS,
     "Sendrecv(sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, "
     "status=None)"},
    {"Sendrecv_replace", KW(comm_sendrecv_replace), METH_VARARGS | METH_KEYWORDS,
     "Sendrecv_replace(buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG, "
     "status=None)"},
    {"Isendrecv", KW(comm_isendrecv), METH_VARARGS | METH_KEYWORDS,
     "Isendrecv(sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG) "
     "-> Request"},
    {"Isendrecv_replace", KW(comm_isendrecv_replace), METH_VARARGS | METH_KEYWORDS,
     "Isendrecv_replace(buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG) -> Request"},
    {"Probe", KW(comm_probe), METH_VARARGS | METH_KEYWORDS,
     "Probe(source=ANY_SOURCE, tag=ANY_TAG, status=None) -> True"},
    {"Iprobe", KW(comm_iprobe), METH_VARARGS | METH_KEYWORDS,
     "Iprobe(source=ANY_SOURCE, tag=ANY_TAG, status=None) -> bool"},
    {NULL, NULL, 0, NULL},
};
