/* scatterv.c - rank p's recvbuf (recvcount elements) gets sendcounts[p] elements of the
 * root's sendbuf from displs[p]. Only the root knows the counts, so the call is always one
 * step of the message ring (engine.h), as scatter's inline protocol is, and blocks too large
 * for the root's message go on the point-to-point engine (lib/core/p2p.h) beside it:
 *   1. Every rank takes the call's tag (the communicator's count of calls that use
 *      point-to-point) in a context of its own.
 *   2. The root publishes its message: when every peer's block fits in it together with a
 *      table of each block's offset and count, the blocks themselves; else only that they
 *      come as messages, which it sends (eager, or by rendezvous). It copies its own block
 *      (unless in place), waits until it may reuse sendbuf, and waits for nobody else.
 *   3. A non-root reads the root's message: an inline block whose count is not its
 *      recvcount is a mismatch (-EPROTO, the communicator broken); else it copies it, or
 *      receives its message, whose size the point-to-point engine checks the same way. */
#include <errno.h>
#include <stdlib.h>

#include "lib/coll/coll.h"
#include "lib/coll/proto.h"

enum { AT_GUARD = 1, AT_ROOT, AT_WAIT };

/* The message: a 32-bit head (1: the blocks are inline), then, inline, one (offset, count)
 * entry per rank and the blocks. Inline data is at most SHMCOLL_INLINE_MAX bytes, so 16 bits
 * hold any offset and count. */
struct sentry {
	uint16_t off, count;
};
#define HEAD_BYTES sizeof(uint32_t)

/* Whether the root's blocks for its peers fit in its message with the table. */
static int fits(const struct shmcoll_node *n, const struct shmcoll_task *t)
{
	size_t bytes = HEAD_BYTES + (size_t)n->size * sizeof(struct sentry);
	int q;

	for (q = 0; q < n->size; q++) {
		if (q == n->rank)
			continue;
		if (t->scounts[q] * t->es > SHMCOLL_INLINE_MAX)
			return 0;
		bytes += t->scounts[q] * t->es;
		if (bytes > SHMCOLL_INLINE_MAX)
			return 0;
	}
	return 1;
}

static int scatterv_msg(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es, table = HEAD_BYTES + (size_t)n->size * sizeof(struct sentry), off, len;
	uint8_t *buf;
	const uint8_t *m, *own;
	struct sentry e = {0, 0};
	uint32_t head;
	int q, rc;

	switch (t->at) {
	case AT_GUARD:
		goto guard;
	case AT_ROOT:
		goto root;
	case AT_WAIT:
		goto wait;
	}
	shmcoll__describe_inline(n, t);
guard:
	rc = shmcoll__await_msg_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	if (n->rank == t->root) {
		head = (uint32_t)fits(n, t);
		buf = shmcoll__msg_data(n, t);
		memcpy(buf, &head, HEAD_BYTES);
		if (head) {
			for (q = 0, off = 0; q < n->size; q++) {
				len = q == n->rank ? 0 : t->scounts[q] * es;
				e.off = (uint16_t)off;
				e.count = (uint16_t)(q == n->rank ? 0 : t->scounts[q]);
				memcpy(buf + HEAD_BYTES + (size_t)q * sizeof(e), &e, sizeof(e));
				if (len)
					memcpy(buf + table + off, t->send + t->sdispls[q] * es,
					       len);
				off += len;
			}
		} else {
			rc = shmcoll__vops_new(n, t, n->size);
			if (rc)
				return rc;
			for (q = 0; q < n->size; q++)
				if (q != n->rank)
					shmcoll__p2p_isend(
					    n, &t->ops[q], t->fn, t->send + t->sdispls[q] * es,
					    t->scounts[q] * es, q, (int)t->aux, P2P_CTX_COLL);
		}
		shmcoll__msg_commit(n, t, head ? table + off : HEAD_BYTES);
		own = t->send + t->sdispls[n->rank] * es;
		if (t->scount && t->recv != own)
			memcpy(t->recv, own, t->scount * es);
		if (!t->ops)
			return 0;
		goto wait;
	}
	shmcoll__msg_publish(n, t, NULL, 0);
root:
	rc = shmcoll__await_msg(n, t, t->root, &m);
	if (rc)
		return shmcoll__suspend(t, AT_ROOT, rc);
	shmcoll__msg_seen(n, t);
	/* This rank's block, if every peer's were as long as its own. */
	shmcoll__msg_prefetch(m, table + (size_t)(n->rank - (n->rank > t->root)) * t->scount * es,
	                      t->scount * es);
	memcpy(&head, m, HEAD_BYTES);
	if (head) {
		if (table > SHMCOLL_INLINE_MAX)
			goto bad;
		memcpy(&e, m + HEAD_BYTES + (size_t)n->rank * sizeof(e), sizeof(e));
		if (e.count != t->scount ||
		    e.off + (size_t)e.count * es > SHMCOLL_INLINE_MAX - table)
			goto bad;
		if (t->scount)
			memcpy(t->recv, m + table + e.off, t->scount * es);
		return 0;
	}
	rc = shmcoll__vops_new(n, t, 1);
	if (rc)
		return rc;
	shmcoll__p2p_irecv(n, &t->ops[0], t->fn, t->recv, t->scount * es, t->root, (int)t->aux,
	                   P2P_CTX_COLL);
wait:
	rc = shmcoll__vops_finish(n, t, n->rank == t->root ? n->size : 1,
	                          n->rank == t->root ? NULL : &t->scount);
	return shmcoll__suspend(t, AT_WAIT, rc);
bad:
	shmcoll__node_break(n, EPROTO);
	return shmcoll__node_fail(n, -EPROTO,
	                          "%s: mismatched counts: the root sends %u elements to rank %d, "
	                          "which expects %zu (its recvcount)",
	                          t->fn, e.count, n->rank, t->scount);
}

void shmcoll__scatterv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                            const size_t *sendcounts, const size_t *displs, void *recv,
                            size_t recvcount, shmcoll_dtype dt, int root)
{
	shmcoll__coll_task(t, "shmcoll_scatterv", scatterv_msg, KIND_SCATTERV, dt, SHMCOLL_SUM,
	                   root, send, recv, 0);
	shmcoll__vtask(t, sendcounts, displs, NULL, NULL, recvcount);
	if (shmcoll__alone(n, t))
		return;
	t->aux = shmcoll__p2p_coll_tag(n);
}
