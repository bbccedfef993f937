/* gatherv.c - the root's recvbuf gets rank p's sendbuf (sendcount elements on p,
 * recvcounts[p] on the root) at displs[p]. Only the root knows the counts, so this runs on
 * the point-to-point engine (lib/core/p2p.h), whose messages carry their sizes: no rank
 * needs to know another's count to agree on steps.
 *
 *   1. Every rank takes the call's tag: the communicator's count of such calls, the same on
 *      every rank because collectives are called in the same order everywhere; the
 *      messages go in a context of their own, so they never match the user's.
 *   2. A non-root sends its sendbuf to the root (eager, or by rendezvous, which the root
 *      reads in one copy or has streamed) and waits until it may reuse it.
 *   3. The root posts a receive per peer into its block and copies its own (unless in
 *      place), then waits for them all. A message whose size is not recvcounts[p] is a
 *      count mismatch: -EPROTO, the communicator broken. */
#include <errno.h>
#include <stdlib.h>

#include "lib/coll/coll.h"
#include "lib/coll/proto.h"

static int gatherv_p2p(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es;
	uint8_t *own;
	int p, rc;

	if (t->at == 0) {
		rc = shmcoll__vops_new(n, t, n->rank == t->root ? n->size : 1);
		if (rc)
			return rc;
		if (n->rank != t->root) {
			shmcoll__p2p_isend(n, &t->ops[0], t->fn, t->send, t->scount * es, t->root,
			                   (int)t->aux, P2P_CTX_COLL);
		} else {
			for (p = 0; p < n->size; p++)
				if (p != n->rank)
					shmcoll__p2p_irecv(
					    n, &t->ops[p], t->fn, t->recv + t->rdispls[p] * es,
					    t->rcounts[p] * es, p, (int)t->aux, P2P_CTX_COLL);
			own = t->recv + t->rdispls[n->rank] * es;
			if (t->scount && t->send != own)
				memcpy(own, t->send, t->scount * es);
		}
	}
	return shmcoll__vops_finish(n, t, n->rank == t->root ? n->size : 1,
	                            n->rank == t->root ? t->rcounts : NULL);
}

void shmcoll__gatherv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                           size_t sendcount, void *recv, const size_t *recvcounts,
                           const size_t *displs, shmcoll_dtype dt, int root)
{
	shmcoll__coll_task(t, "shmcoll_gatherv", gatherv_p2p, KIND_GATHERV, dt, SHMCOLL_SUM, root,
	                   send, recv, 0);
	shmcoll__vtask(t, NULL, NULL, recvcounts, displs, sendcount);
	t->aux = shmcoll__p2p_coll_tag(n);
}
