/* scatterv.c - rank p's recvbuf (recvcount elements) gets sendcounts[p] elements of the
 * root's sendbuf from displs[p]. Only the root knows the counts, so this runs on the
 * point-to-point engine (lib/core/p2p.h), as gatherv.c does:
 *   1. Every rank takes the call's tag (the communicator's count of such calls) in a
 *      context of its own.
 *   2. The root sends block p to every peer p (eager, or by rendezvous) and copies its own
 *      (unless in place), then waits until it may reuse sendbuf.
 *   3. A non-root receives its block and waits for it. A message whose size is not its
 *      recvcount is a count mismatch: -EPROTO, the communicator broken. */
#include <errno.h>
#include <stdlib.h>

#include "lib/coll/coll.h"
#include "lib/coll/proto.h"

static int scatterv_p2p(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es;
	const uint8_t *own;
	int p, rc;

	if (t->at == 0) {
		rc = shmcoll__vops_new(n, t, n->rank == t->root ? n->size : 1);
		if (rc)
			return rc;
		if (n->rank != t->root) {
			shmcoll__p2p_irecv(n, &t->ops[0], t->fn, t->recv, t->scount * es, t->root,
			                   (int)t->aux, P2P_CTX_COLL);
		} else {
			for (p = 0; p < n->size; p++)
				if (p != n->rank)
					shmcoll__p2p_isend(
					    n, &t->ops[p], t->fn, t->send + t->sdispls[p] * es,
					    t->scounts[p] * es, p, (int)t->aux, P2P_CTX_COLL);
			own = t->send + t->sdispls[n->rank] * es;
			if (t->scount && t->recv != own)
				memcpy(t->recv, own, t->scount * es);
		}
	}
	return shmcoll__vops_finish(n, t, n->rank == t->root ? n->size : 1,
	                            n->rank == t->root ? NULL : &t->scount);
}

void shmcoll__scatterv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                            const size_t *sendcounts, const size_t *displs, void *recv,
                            size_t recvcount, shmcoll_dtype dt, int root)
{
	shmcoll__coll_task(t, "shmcoll_scatterv", scatterv_p2p, KIND_SCATTERV, dt, SHMCOLL_SUM,
	                   root, send, recv, 0);
	shmcoll__vtask(t, sendcounts, displs, NULL, NULL, recvcount);
	t->aux = shmcoll__p2p_coll_tag(n);
}
