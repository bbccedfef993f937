/* gatherv.c - the root's recvbuf gets rank p's sendbuf (sendcount elements on p,
 * recvcounts[p] on the root) at displs[p]. Only the root knows the counts, so no rank can
 * agree on a number of steps from them: the call is always one step of the message ring
 * (engine.h), as gather's inline protocol is, and a block too large for a message goes on
 * the point-to-point engine (lib/core/p2p.h) beside it.
 *
 *   1. Every rank takes the call's tag (the communicator's count of calls that use
 *      point-to-point, the same on every rank since collectives are called in the same
 *      order everywhere) in a context of its own, so its messages never match the user's.
 *   2. A non-root publishes its message: when the block fits, the block itself; else its
 *      count and where the block is. A block that fits its slot's half it copies there
 *      first (once the root has published the step before this one, so it read what the
 *      rank staged in that half before); a larger one it sends to the root (eager, or by
 *      rendezvous, which the root reads in one copy or has streamed), and waits until it
 *      may reuse sendbuf. It waits for nobody else in the step.
 *   3. The root publishes an empty message, copies its own block (unless in place), and
 *      reads every peer's message: a count that is not recvcounts[p] is a mismatch
 *      (-EPROTO, the communicator broken); an inline or staged block it copies, for a
 *      larger one it posts a receive into the block. Then it waits for those receives.
 * A small call costs what gather's inline one does, a middling one what gather's staged one
 * does (two copies, no handshake), a large one what point-to-point does. */
#include <errno.h>
#include <stdlib.h>

#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/kernels/copy.h"

enum { AT_GUARD = 1, AT_PEER, AT_WAIT, AT_SGUARD };

/* Rank t->p sends sent elements where the root expects recvcounts[t->p]: the communicator
 * breaks. */
static int mismatch(struct shmcoll_node *n, struct shmcoll_task *t, uint64_t sent)
{
	shmcoll__node_break(n, EPROTO);
	if (t->ops)
		shmcoll__p2p_fail_all(n, -EPROTO);
	free(t->ops);
	t->ops = NULL;
	return shmcoll__node_fail(n, -EPROTO,
	                          "%s: mismatched counts: rank %d sends %llu elements, the root "
	                          "expects %zu (recvcounts[%d])",
	                          t->fn, t->p, (unsigned long long)sent, t->rcounts[t->p], t->p);
}

/* A non-root's message: its block itself when it fits (the committed length is the block's
 * bytes: no head, so a block of up to 32 bytes stays in the line the root polls), else
 * OUT_OF_LINE (a point-to-point message) or STAGED (in the sender's slot half of the step)
 * as the length and the count (8 bytes) as the data. */
#define OUT_OF_LINE (SHMCOLL_INLINE_MAX + 1u)
#define STAGED      (SHMCOLL_INLINE_MAX + 2u)

static int gatherv_msg(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es, bytes = t->scount * es, want;
	uint64_t count;
	uint32_t len;
	const uint8_t *m;
	uint8_t *own;
	int rc;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_SGUARD:
		goto sguard;
	case AT_PEER:
		goto peer;
	case AT_WAIT:
		goto wait;
	}
	shmcoll__describe_inline(n, t);
guard:
	rc = shmcoll__await_msg_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	if (n->rank != t->root) {
		if (bytes <= SHMCOLL_INLINE_MAX) {
			shmcoll__msg_publish(n, t, t->send, bytes);
			return 0;
		}
		if (bytes <= n->arena.lay.slot_half) {
		sguard:
			rc = shmcoll__await_guard(n, t);
			if (rc)
				return shmcoll__suspend(t, AT_SGUARD, rc);
			count = t->scount;
			shmcoll__copy_in(shmcoll__slot(n, n->rank, t->d->step), t->send, bytes);
			memcpy(shmcoll__msg_data(n, t), &count, sizeof(count));
			shmcoll__msg_commit(n, t, STAGED);
			return 0;
		}
		rc = shmcoll__vops_new(n, t, 1);
		if (rc)
			return rc;
		shmcoll__p2p_isend(n, &t->ops[0], t->fn, t->send, bytes, t->root, (int)t->aux,
		                   P2P_CTX_COLL);
		count = t->scount;
		memcpy(shmcoll__msg_data(n, t), &count, sizeof(count));
		shmcoll__msg_commit(n, t, OUT_OF_LINE);
		goto wait;
	}
	shmcoll__msg_publish(n, t, NULL, 0);
	own = t->recv + t->rdispls[n->rank] * es;
	if (bytes && t->send != own)
		memcpy(own, t->send, bytes);
	for (t->p = 0; t->p < n->size; t->p++) {
		if (t->p == n->rank)
			continue;
	peer:
		rc = shmcoll__await_msg(n, t, t->p, &m);
		if (rc)
			return shmcoll__suspend(t, AT_PEER, rc);
		want = t->rcounts[t->p] * es;
		shmcoll__msg_prefetch(m, 0, want);
		len = shmcoll__msg_len(n, t, t->p);
		if (len <= SHMCOLL_INLINE_MAX) {
			if (len != want)
				return mismatch(n, t, len / es);
			if (want)
				shmcoll__copy_out(t->recv + t->rdispls[t->p] * es, m, want);
			continue;
		}
		memcpy(&count, m, sizeof(count));
		if ((len != OUT_OF_LINE && len != STAGED) || count != t->rcounts[t->p] ||
		    (len == STAGED && want > n->arena.lay.slot_half))
			return mismatch(n, t, count);
		if (len == STAGED) {
			shmcoll__copy_out(t->recv + t->rdispls[t->p] * es,
			                  shmcoll__slot(n, t->p, t->d->step), want);
			continue;
		}
		if (!t->ops) {
			rc = shmcoll__vops_new(n, t, n->size);
			if (rc)
				return rc;
		}
		shmcoll__p2p_irecv(n, &t->ops[t->p], t->fn, t->recv + t->rdispls[t->p] * es, want,
		                   t->p, (int)t->aux, P2P_CTX_COLL);
	}
	/* Every peer has begun this call: it has read all we wrote before. */
	n->st.clean = n->st.seq - 1;
	if (!t->ops)
		return 0;
wait:
	rc = shmcoll__vops_finish(n, t, n->rank == t->root ? n->size : 1,
	                          n->rank == t->root ? t->rcounts : NULL);
	return shmcoll__suspend(t, AT_WAIT, rc);
}

void shmcoll__gatherv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                           size_t sendcount, void *recv, const size_t *recvcounts,
                           const size_t *displs, shmcoll_dtype dt, int root)
{
	shmcoll__coll_task(t, "shmcoll_gatherv", gatherv_msg, KIND_GATHERV, dt, SHMCOLL_SUM, root,
	                   send, recv, 0);
	shmcoll__vtask(t, NULL, NULL, recvcounts, displs, sendcount);
	if (shmcoll__alone(n, t))
		return;
	t->aux = shmcoll__p2p_coll_tag(n);
}
