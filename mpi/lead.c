/* lead.c - shmcoll's own multi-node communicator over a communicator that spans nodes
 * (st->wide): each node's shmcoll communicator (st->shm), joined by
 * shmcoll_comm_create_hosted with PMPI among the leaders as the leaders' transport, so that
 * lib/hier's composition (its chunked pipelines, its leaders' algorithms) runs the
 * collectives hier.c would otherwise compose a second time.
 *
 * The transport: each of the leader's transfers is a PMPI_Isend or PMPI_Irecv of bytes on
 * st->leaders, which only this state uses, with a tag of its own (LEAD_TAG), apart from the
 * tag 0 of hier.c's parts and from the PMPI collectives there, which match no message. lib/hier
 * runs one call at a time per communicator and finishes its exchanges before the call
 * returns, and MPI keeps the messages of one pair, tag and communicator in order, so the
 * k-th send meets the k-th receive as the transport asks; no sequence number or header is
 * needed. Its functions run on the thread in the MPI call (lib/hier never hands them to the
 * progress thread: st->wide's non-blocking calls are refused, and none is made), so the MPI
 * needs no more than the program's own thread level. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "mpi/shmcoll_mpi.h"

/* Above any tag hier.c uses on st->leaders (0), below the 32767 every MPI allows. */
#define LEAD_TAG 29

struct lead_net {
	MPI_Comm leaders;
	int nslots;
	MPI_Request *req; /* per slot (2 * peer + 1 for a receive) */
	size_t *len;      /* per slot: the bytes a receive must get */
};

/* A failed MPI call as an errno for shmcoll: the MPI's error handler on st->leaders
 * (MPI_ERRORS_ARE_FATAL, by default) has usually ended the job before. */
static int mpi_errno(int rc)
{
	return rc == MPI_SUCCESS ? 0 : -EIO;
}

static int t_start(void *ctx, int slot, int peer, int send, void *buf, size_t len)
{
	struct lead_net *t = ctx;

	/* Every transfer of lib/hier's leaders here is at most a chunk of a pipeline or a
	 * node's blocks of a call whose bytes the wrappers checked against INT_MAX (fits). */
	if (len > INT_MAX || slot < 0 || slot >= t->nslots)
		return -EMSGSIZE;
	t->len[slot] = len;
	if (send)
		return mpi_errno(
		    PMPI_Isend(buf, (int)len, MPI_BYTE, peer, LEAD_TAG, t->leaders, &t->req[slot]));
	return mpi_errno(
	    PMPI_Irecv(buf, (int)len, MPI_BYTE, peer, LEAD_TAG, t->leaders, &t->req[slot]));
}

/* A receive of another length than its own is the peer's call of another shape. */
static int t_got(const struct lead_net *t, int slot, MPI_Status *s)
{
	int n;

	if (!(slot & 1))
		return 0;
	if (PMPI_Get_count(s, MPI_BYTE, &n) != MPI_SUCCESS || (size_t)n != t->len[slot])
		return -EPROTO;
	return 0;
}

static int t_test(void *ctx, int slot)
{
	struct lead_net *t = ctx;
	MPI_Status s;
	int flag = 0, rc;

	rc = mpi_errno(PMPI_Test(&t->req[slot], &flag, &s));
	if (rc < 0 || !flag)
		return rc;
	rc = t_got(t, slot, &s);
	return rc < 0 ? rc : 1;
}

static int t_wait(void *ctx, int slot)
{
	struct lead_net *t = ctx;
	MPI_Status s;
	int rc;

	rc = mpi_errno(PMPI_Wait(&t->req[slot], &s));
	return rc < 0 ? rc : t_got(t, slot, &s);
}

static void t_cancel(void *ctx, int slot)
{
	struct lead_net *t = ctx;

	if (t->req[slot] == MPI_REQUEST_NULL)
		return;
	PMPI_Cancel(&t->req[slot]);
	PMPI_Wait(&t->req[slot], MPI_STATUS_IGNORE);
}

int wide_create(struct cstate *st)
{
	shmcoll_transport tr = {
	    .start = t_start, .test = t_test, .wait = t_wait, .cancel = t_cancel};
	struct lead_net *t = calloc(1, sizeof(*t));
	int i, rc;

	if (t) {
		t->leaders = st->leaders;
		t->nslots = 2 * st->nnodes;
		t->req = malloc((size_t)t->nslots * sizeof(*t->req));
		t->len = calloc((size_t)t->nslots, sizeof(*t->len));
	}
	if (!t || !t->req || !t->len) {
		/* Every rank must still reach the creation, which is collective: a rank
		 * without the few bytes fails it on every rank through its node. */
		shmcoll_comm_abort(st->shm);
		rc = -ENOMEM;
	} else {
		for (i = 0; i < t->nslots; i++)
			t->req[i] = MPI_REQUEST_NULL;
		tr.ctx = t;
		rc = shmcoll_comm_create_hosted(st->shm, st->nnodes, st->my_node, &tr, &st->wide);
	}
	if (rc < 0) {
		if (t) {
			free(t->req);
			free(t->len);
		}
		free(t);
		return rc;
	}
	st->lead_net = t;
	return 0;
}

void wide_destroy(struct cstate *st)
{
	struct lead_net *t = st->lead_net;

	if (st->wide)
		shmcoll_comm_destroy(st->wide);
	st->wide = NULL;
	if (t) {
		free(t->req);
		free(t->len);
	}
	free(t);
	st->lead_net = NULL;
}

int wide_rank(const struct cstate *st, int rank)
{
	return st->node_of[rank] * st->max_node + st->lrank_of[rank];
}
