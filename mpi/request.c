/* request.c - the non-blocking calls' generalized requests and MPI's
 * progress rule: a call's own buffers, its completion, and the wrappers of
 * the waits and tests that drive it. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi/shmcoll_mpi.h"

/* Non-blocking collectives. MPI_Iallreduce ... MPI_Ibarrier, MPI_Iallgatherv ...
 * MPI_Ialltoallv, MPI_Ireduce_scatter, MPI_Iscan and MPI_Iexscan on a communicator within a
 * node start shmcoll's non-blocking call and hand the caller a generalized request
 * (MPI_Grequest_start), which the MPI's own MPI_Wait, MPI_Test, MPI_Waitall ... accept. An
 * MPI completes a generalized request only when someone calls MPI_Grequest_complete: the
 * interposer does, from its wrappers of the wait and test calls. MPI's progress rule (every
 * outstanding operation of the process moves while it waits or tests on any) holds there
 * by one loop: each round tests the calls of ours (shmcoll's test moves every shmcoll
 * communicator of the process, in every wait) and completes those done, then tests the
 * caller's requests with PMPI (which moves the MPI's own engine, so a native message a peer
 * waits for moves too); a round in which nothing completed yields, and after many sleeps
 * 50 us. No wait blocks inside the MPI while a call of ours is outstanding. Everything a call needs
 * after its start (packed buffers, a logical op's input, counts and displacements as shmcoll reads
 * them, where to unpack) belongs to its request; the request is freed by the MPI's free callback.
 * The path is decided as for the blocking calls, from what every rank agrees on (MPI_Iexscan with a
 * logical op goes to PMPI, as MPI_Exscan does); across nodes, and for the LOC ops, the calls go to
 * PMPI. A program that never starts one pays one atomic load per wait or test. */

static pthread_mutex_t nb_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nbreq *nb_head;
static atomic_int nb_live; /* calls not complete: zero keeps the wait wrappers cheap */

static int nb_query(void *extra, MPI_Status *status)
{
	struct nbreq *q = extra;

	/* A collective's status is empty. */
	PMPI_Status_set_elements(status, MPI_BYTE, 0);
	PMPI_Status_set_cancelled(status, 0);
	status->MPI_SOURCE = MPI_ANY_SOURCE;
	status->MPI_TAG = MPI_ANY_TAG;
	return q->rc;
}

static int nb_free(void *extra)
{
	free(extra);
	return MPI_SUCCESS;
}

static int nb_cancel(void *extra, int complete)
{
	(void)extra;
	(void)complete;
	return MPI_SUCCESS; /* a collective cannot be cancelled: it completes */
}

/* A call failed after its start: said on stderr, the node's communicator aborted (the
 * peers' calls fail now) and left to PMPI from then on, as a blocking call's failure does;
 * the error reaches the caller through the request. */
static int nb_failed(struct nbreq *q, const char *what, int rc)
{
	struct cstate *st = q->st;

	if (rc < 0 && *shmcoll_last_error(st->shm))
		fprintf(stderr, "shmcoll-mpi: %s on rank %d: %s\n", coll_names[q->c], st->rank,
		        shmcoll_last_error(st->shm));
	else
		fprintf(stderr, "shmcoll-mpi: %s on rank %d: %s failed (%d)\n", coll_names[q->c],
		        st->rank, what, rc);
	shmcoll_comm_abort(st->shm);
	st->usable = 0;
	return MPI_ERR_OTHER;
}

/* The end of q: its buffers freed, its result mrc (an MPI code) for the query callback,
 * and the request complete. */
static void nb_complete(struct nbreq *q, int mrc)
{
	q->sreq = NULL;
	if (q->udup)
		PMPI_Type_free(&q->utype);
	q->udup = 0;
	free(q->packed);
	free(q->tmp);
	free(q->vz);
	q->packed = q->tmp = NULL;
	q->vz = NULL;
	q->rc = mrc;
	PMPI_Grequest_complete(q->req);
	put_state(q->st);
	q->st = NULL;
}

/* shmcoll's call is over with rc: the unpacking, then the completion. */
static void nb_finish(struct nbreq *q, int rc)
{
	int mrc = MPI_SUCCESS;

	if (rc < 0) {
		mrc = nb_failed(q, q->fn, rc);
	} else {
		if (q->ubuf && q->uv.counts)
			mrc = vpack(1, q->ubuf, q->utype, &q->uv, q->st->size, -1, q->packed,
			            q->st->comm);
		else if (q->ubuf)
			mrc = pack_blocks(1, q->ubuf, q->ucount, q->utype, &q->us, q->nblocks,
			                  q->packed, q->st->comm);
		if (mrc != MPI_SUCCESS)
			mrc = nb_failed(q, "MPI_Unpack", mrc);
		else
			do_move(&q->after);
	}
	nb_complete(q, mrc);
}

static void nb_put_back(struct nbreq *q)
{
	pthread_mutex_lock(&nb_lock);
	q->prev = NULL;
	q->next = nb_head;
	if (nb_head)
		nb_head->prev = q;
	nb_head = q;
	atomic_fetch_add(&nb_live, 1);
	pthread_mutex_unlock(&nb_lock);
}

/* Whether r is in reqs[0 .. n-1]. */
static int nb_among(MPI_Request r, int n, const MPI_Request *reqs)
{
	int i;

	for (i = 0; reqs && i < n; i++)
		if (reqs[i] == r)
			return 1;
	return 0;
}

/* One round of the progress rule for the calls of ours: each one this thread started, or
 * that is among the n requests the caller waits on or tests, tested once (the first test
 * that finds its call pending also moves every shmcoll communicator of the process, so
 * the others, another thread's included, move too), and those done completed. Another
 * thread's calls are left to it: it may be inside a call on their communicator. Whether any
 * completed. */
static int nb_progress(int n, const MPI_Request *reqs)
{
	struct nbreq *q, *next, *done = NULL;
	pthread_t me = pthread_self();
	int fin, any = 0;

	if (!atomic_load_explicit(&nb_live, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&nb_lock);
	for (q = nb_head; q; q = next) {
		next = q->next;
		if (!pthread_equal(q->owner, me) && !nb_among(q->req, n, reqs))
			continue;
		q->src = shmcoll_test(&q->sreq, &fin, NULL);
		if (!fin && q->src >= 0)
			continue;
		if (q->prev)
			q->prev->next = q->next;
		else
			nb_head = q->next;
		if (q->next)
			q->next->prev = q->prev;
		atomic_fetch_sub(&nb_live, 1);
		q->next = done;
		done = q;
	}
	pthread_mutex_unlock(&nb_lock);
	for (q = done; q; q = next) {
		next = q->next;
		nb_finish(q, q->src);
		any = 1;
	}
	return any;
}

/* After a round of a wait: *idle counts rounds in which nothing completed. Such a round
 * yields (ranks may outnumber the CPUs: no round spins without letting a peer run), and
 * after 2000 of them (a few ms) each sleeps 50 us. */
static void nb_idle(unsigned *idle, int moved)
{
	const struct timespec nap = {0, 50000};

	if (moved) {
		*idle = 0;
		return;
	}
	if (++*idle < 2000)
		sched_yield();
	else
		nanosleep(&nap, NULL);
}

/* Whether any call of ours is outstanding: then no wait may block inside the MPI. */
static int nb_outstanding(void)
{
	return atomic_load_explicit(&nb_live, memory_order_acquire) != 0;
}

/* A new call of c on st (its generalized request started): NULL with the failure
 * reported (the node's communicator aborted, so no peer waits for this rank). */
struct nbreq *nb_new(struct cstate *st, enum coll c, const char *fn)
{
	struct nbreq *q = calloc(1, sizeof(*q));
	int rc;

	if (!q) {
		fail(st, c, "memory for a request", -ENOMEM);
		return NULL;
	}
	q->st = st;
	q->c = c;
	q->fn = fn;
	q->owner = pthread_self();
	rc = PMPI_Grequest_start(nb_query, nb_free, nb_cancel, q, &q->req);
	if (rc != MPI_SUCCESS) {
		free(q);
		fail(st, c, "MPI_Grequest_start", rc);
		return NULL;
	}
	atomic_fetch_add_explicit(&st->refs, 1, memory_order_relaxed);
	return q;
}

/* After shmcoll's start returned rc (q->sreq set, or NULL for a call with nothing to
 * move): the request goes to the caller. */
int nb_started(struct nbreq *q, int rc, MPI_Request *request)
{
	MPI_Comm comm = q->st->comm;
	enum coll c = q->c;

	*request = q->req;
	if (rc < 0 || !q->sreq) {
		/* Complete at once: MPI_Wait returns the error, if any. */
		nb_finish(q, rc);
		if (rc < 0)
			PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
		return rc < 0 ? MPI_ERR_OTHER : via_shm(c);
	}
	nb_put_back(q);
	return via_shm(q->c);
}

/* The unpacking q owes at completion: nblocks blocks of count dt elements into buf. */
int nb_unpack_to(struct nbreq *q, void *buf, int count, MPI_Datatype dt, const struct side *s,
                 int nblocks)
{
	int ni, na, nd, comb;

	q->ubuf = buf;
	q->ucount = count;
	q->nblocks = nblocks;
	q->us = *s;
	q->utype = dt;
	/* The caller may free a derived type once the call started. */
	if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS)
		return MPI_ERR_TYPE;
	if (comb != MPI_COMBINER_NAMED) {
		if (PMPI_Type_dup(dt, &q->utype) != MPI_SUCCESS)
			return MPI_ERR_TYPE;
		q->udup = 1;
	}
	return MPI_SUCCESS;
}

/* Buffer bytes of q's own (for packed data), or NULL. */
void *nb_buf(void **slot, long long bytes)
{
	*slot = malloc(bytes > 0 ? (size_t)bytes : 1);
	return *slot;
}

/* Buffer i of q (call_buf): 2 is tmp, 3 packed. */
static void *nb_slot(struct nbreq *q, int i, size_t bytes)
{
	return nb_buf(i == 2 ? &q->tmp : &q->packed, (long long)bytes);
}

/* Buffer i (2: what this rank sends, packed or made 0/1; 3: what it receives, packed, or a
 * logical op's input) of bytes for a call: st's scratch buffer for a blocking call (q NULL),
 * kept for the next; for a non-blocking one, the request's own, freed at its completion,
 * since a later call on the communicator may reuse the scratch before then. NULL: no
 * memory. */
void *call_buf(struct cstate *st, struct nbreq *q, int i, size_t bytes)
{
	return q ? nb_slot(q, i, bytes) : scratch(st, i, bytes);
}

/* q's vz (4 * P size_t, then 2 * P ints), allocated on first use; NULL: no memory. */
size_t *nb_vz(struct nbreq *q)
{
	size_t P = (size_t)q->st->size;

	if (!q->vz)
		q->vz = malloc(4 * P * sizeof(*q->vz) + 2 * P * sizeof(int));
	return q->vz;
}

/* A v-side's byte counts and displacements (if filled) moved from from to the same place
 * in to. */
static void keep_vside(struct vside *s, const size_t *from, size_t *to, size_t P)
{
	size_t at;

	if (!s->bc)
		return;
	at = (size_t)(s->bc - from);
	memcpy(to + at, s->bc, 2 * P * sizeof(*to)); /* bc, then bd */
	s->bc = to + at;
	s->bd = s->bc + P;
}

/* A v-collective's sides were decided in st->vz, which the communicator's next call may
 * overwrite before this one completes: their arrays go to q's own, and the call is
 * prepared there. */
int nb_keep(struct nbreq *q, struct vcall *v)
{
	size_t P = (size_t)q->st->size, *from = v->vz;

	v->what = "memory for the counts";
	if (!(v->vz = nb_vz(q)))
		return -ENOMEM;
	keep_vside(&v->s, from, v->vz, P);
	keep_vside(&v->r, from, v->vz, P);
	return MPI_SUCCESS;
}

/* The unpacking q owes at completion: every block of v's receive side into buf (dt), from
 * q->packed; the side's counts and displs copied into q (after nb_keep). */
int nb_unpack_v(struct nbreq *q, struct vcall *v, void *buf, MPI_Datatype dt)
{
	size_t P = (size_t)q->st->size;
	int *ints = (int *)(void *)(q->vz + 4 * P);

	memcpy(ints, v->r.counts, P * sizeof(int));
	memcpy(ints + P, v->r.displs, P * sizeof(int));
	q->uv = v->r;
	q->uv.counts = ints;
	q->uv.displs = ints + P;
	v->what = "MPI_Type_dup";
	return nb_unpack_to(q, buf, 0, dt, &v->r.t, 1);
}

/* A call that could not be set up after its request started: completed with the error,
 * nothing written to the caller's buffers, and the node's communicator aborted (the peers
 * that started theirs fail now). */
int nb_setup_failed(struct nbreq *q, const char *what, int rc, MPI_Request *request)
{
	MPI_Comm comm = q->st->comm;

	*request = q->req;
	nb_complete(q, nb_failed(q, what, rc));
	PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
	return MPI_ERR_OTHER;
}

/* The waits and tests. A test: one round of nb_progress, then the MPI's test. A wait: while
 * any call of ours is outstanding, rounds of nb_progress and the MPI's test until it says
 * done; with none, the MPI's own wait. */

EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
	unsigned idle = 0;
	int rc, flag, moved;

	while (request && nb_outstanding()) {
		moved = nb_progress(1, request);
		rc = PMPI_Test(request, &flag, status);
		if (rc != MPI_SUCCESS || flag)
			return rc;
		nb_idle(&idle, moved);
	}
	return PMPI_Wait(request, status);
}

EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
	nb_progress(request ? 1 : 0, request);
	return PMPI_Test(request, flag, status);
}

EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
	unsigned idle = 0;
	int rc, flag, moved;

	while (requests && nb_outstanding()) {
		moved = nb_progress(count, requests);
		rc = PMPI_Testall(count, requests, &flag, statuses);
		if (rc != MPI_SUCCESS || flag)
			return rc;
		nb_idle(&idle, moved);
	}
	return PMPI_Waitall(count, requests, statuses);
}

EXPORT int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
	nb_progress(count, requests);
	return PMPI_Testall(count, requests, flag, statuses);
}

EXPORT int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
	unsigned idle = 0;
	int rc, flag, moved;

	while (requests && nb_outstanding()) {
		moved = nb_progress(count, requests);
		rc = PMPI_Testany(count, requests, index, &flag, status);
		if (rc != MPI_SUCCESS || flag)
			return rc;
		nb_idle(&idle, moved);
	}
	return PMPI_Waitany(count, requests, index, status);
}

EXPORT int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
	nb_progress(count, requests);
	return PMPI_Testany(count, requests, index, flag, status);
}

EXPORT int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                        MPI_Status statuses[])
{
	unsigned idle = 0;
	int rc, moved;

	while (requests && nb_outstanding()) {
		moved = nb_progress(incount, requests);
		rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
		if (rc != MPI_SUCCESS || *outcount != 0)
			return rc;
		nb_idle(&idle, moved);
	}
	return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
}

EXPORT int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                        MPI_Status statuses[])
{
	nb_progress(incount, requests);
	return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

EXPORT int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
	nb_progress(1, &request);
	return PMPI_Request_get_status(request, flag, status);
}

/* Whether r is one of ours not complete yet. */
static int nb_pending(MPI_Request r)
{
	struct nbreq *q;

	if (r == MPI_REQUEST_NULL || !nb_outstanding())
		return 0;
	pthread_mutex_lock(&nb_lock);
	for (q = nb_head; q && q->req != r; q = q->next)
		;
	pthread_mutex_unlock(&nb_lock);
	return q != NULL;
}

/* A freed request's call must still complete: ours is completed first. */
EXPORT int MPI_Request_free(MPI_Request *request)
{
	unsigned idle = 0;

	while (request && nb_pending(*request))
		nb_idle(&idle, nb_progress(1, request));
	return PMPI_Request_free(request);
}
