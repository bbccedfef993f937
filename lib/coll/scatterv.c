/* scatterv.c - rank p's recvbuf (recvcount elements) gets sendcounts[p] elements of the
 * root's sendbuf from displs[p]. Only the root knows the counts, so the call is always one
 * step of the message ring (engine.h), as scatter's inline protocol is, and blocks too large
 * for the root's message go on the point-to-point engine (lib/core/p2p.h) beside it:
 *   1. Every rank takes the call's tag (the communicator's count of calls that use
 *      point-to-point) in a context of its own.
 *   2. The root publishes its message: when every peer's block fits in it together with a
 *      table of each block's offset and count, the blocks themselves (without the table
 *      when every peer's count is the same: proto.h's even form); else, when they fit
 *      its slot's half together, the table, with the blocks staged there (once every peer
 *      has published the step before this one, so it read what the root staged in that
 *      half before); else only that they come as messages, which it sends (eager, or by
 *      rendezvous). It copies its own block (unless in place), waits until it may reuse
 *      sendbuf (point to point), and waits for nobody else.
 *   3. A non-root reads the root's message: an inline or staged block whose count is not
 *      its recvcount is a mismatch (-EPROTO, the communicator broken); else it copies it,
 *      or receives its message, whose size the point-to-point engine checks the same way. */
#include <errno.h>
#include <stdlib.h>

#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/kernels/copy.h"

enum { AT_GUARD = 1, AT_SGUARD, AT_ROOT, AT_WAIT };

/* The message: with every peer's count the same and their blocks fitting, the blocks alone
 * (proto.h's even form, HEAD_EVEN here); else a 32-bit head (HEAD_P2P, HEAD_INLINE or
 * HEAD_STAGED), then, inline, one (offset, count) entry per rank and the blocks, or, staged,
 * one (offset in the root's slot half, count) entry per rank. Inline data is at most
 * SHMCOLL_INLINE_MAX bytes, so 16 bits hold any offset and count; staged data at most a slot
 * half, if that fits 32 bits. */
enum { HEAD_P2P, HEAD_INLINE, HEAD_STAGED, HEAD_EVEN /* no head: proto.h's even form */ };
struct sentry {
	uint16_t off, count;
};
struct stentry {
	uint32_t off, count;
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

/* Whether the root's blocks for its peers fit its slot half, and their table its message. */
static int stages(const struct shmcoll_node *n, const struct shmcoll_task *t)
{
	size_t room = n->arena.lay.slot_half < UINT32_MAX ? n->arena.lay.slot_half : UINT32_MAX;
	size_t bytes = 0;
	int q;

	if (HEAD_BYTES + (size_t)n->size * sizeof(struct stentry) > SHMCOLL_INLINE_MAX)
		return 0;
	for (q = 0; q < n->size; q++) {
		if (q == n->rank)
			continue;
		if (t->scounts[q] * t->es > room - bytes)
			return 0;
		bytes += t->scounts[q] * t->es;
	}
	return 1;
}

/* The root's staged form: the table in its message, the blocks in its slot half. */
static void stage(struct shmcoll_node *n, struct shmcoll_task *t)
{
	uint8_t *buf = shmcoll__msg_data(n, t), *slot = shmcoll__slot(n, n->rank, t->d->step);
	uint32_t head = HEAD_STAGED;
	struct stentry e = {0, 0};
	size_t off = 0, len;
	int q;

	memcpy(buf, &head, HEAD_BYTES);
	for (q = 0; q < n->size; q++) {
		len = q == n->rank ? 0 : t->scounts[q] * t->es;
		e.off = (uint32_t)off;
		e.count = (uint32_t)(len ? t->scounts[q] : 0);
		memcpy(buf + HEAD_BYTES + (size_t)q * sizeof(e), &e, sizeof(e));
		if (len)
			memcpy(slot + off, t->send + t->sdispls[q] * t->es, len);
		off += len;
	}
	shmcoll__msg_commit(n, t, HEAD_BYTES + (size_t)n->size * sizeof(e));
}

static int scatterv_msg(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es, table = HEAD_BYTES + (size_t)n->size * sizeof(struct sentry), off, len,
	       c;
	uint8_t *buf;
	const uint8_t *m, *own;
	struct sentry e = {0, 0};
	struct stentry se;
	uint64_t sent = 0;
	uint32_t head;
	int q, rc;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_SGUARD:
		goto sguard;
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
		head = shmcoll__even_blocks(n, t->scounts, n->rank, es, &c) ? HEAD_EVEN
		       : fits(n, t)                                         ? HEAD_INLINE
		       : stages(n, t)                                       ? HEAD_STAGED
		                                                            : HEAD_P2P;
		if (head == HEAD_EVEN) {
			shmcoll__msg_commit(n, t,
			                    shmcoll__even_pack(n, shmcoll__msg_data(n, t), t->send,
			                                       t->sdispls, n->rank, c, es));
		} else if (head == HEAD_STAGED) {
		sguard:
			rc = shmcoll__await_guard(n, t);
			if (rc)
				return shmcoll__suspend(t, AT_SGUARD, rc);
			stage(n, t);
		} else {
			buf = shmcoll__msg_data(n, t);
			memcpy(buf, &head, HEAD_BYTES);
			if (head == HEAD_INLINE) {
				for (q = 0, off = 0; q < n->size; q++) {
					len = q == n->rank ? 0 : t->scounts[q] * es;
					e.off = (uint16_t)off;
					e.count = (uint16_t)(q == n->rank ? 0 : t->scounts[q]);
					memcpy(buf + HEAD_BYTES + (size_t)q * sizeof(e), &e,
					       sizeof(e));
					if (len)
						memcpy(buf + table + off,
						       t->send + t->sdispls[q] * es, len);
					off += len;
				}
			} else {
				rc = shmcoll__vops_new(n, t, n->size);
				if (rc)
					return rc;
				for (q = 0; q < n->size; q++)
					if (q != n->rank)
						shmcoll__p2p_isend(n, &t->ops[q], t->fn,
						                   t->send + t->sdispls[q] * es,
						                   t->scounts[q] * es, q,
						                   (int)t->aux, P2P_CTX_COLL);
			}
			shmcoll__msg_commit(n, t, head ? table + off : HEAD_BYTES);
		}
		own = t->send + t->sdispls[n->rank] * es;
		if (t->scount && t->recv != own)
			shmcoll__copy_out(t->recv, own, t->scount * es);
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
	len = shmcoll__msg_len(n, t, t->root);
	if (len & SHMCOLL_MSG_EVEN) {
		off = shmcoll__even_offset(n, m, t->root, (uint32_t)len, t->scount * es);
		if (off == SIZE_MAX) {
			sent = shmcoll__even_count(n, len, es);
			goto bad;
		}
		if (t->scount)
			shmcoll__copy_out(t->recv, m + off, t->scount * es);
		return 0;
	}
	/* This rank's block, if every peer's were as long as its own. */
	shmcoll__msg_prefetch(m, table + shmcoll__pos_without(n->rank, t->root) * t->scount * es,
	                      t->scount * es);
	memcpy(&head, m, HEAD_BYTES);
	if (head == HEAD_INLINE) {
		if (table > SHMCOLL_INLINE_MAX)
			goto bad;
		memcpy(&e, m + HEAD_BYTES + (size_t)n->rank * sizeof(e), sizeof(e));
		sent = e.count;
		if (e.count != t->scount ||
		    e.off + (size_t)e.count * es > SHMCOLL_INLINE_MAX - table)
			goto bad;
		if (t->scount)
			shmcoll__copy_out(t->recv, m + table + e.off, t->scount * es);
		return 0;
	}
	if (head == HEAD_STAGED) {
		if (HEAD_BYTES + (size_t)n->size * sizeof(se) > SHMCOLL_INLINE_MAX)
			goto bad;
		memcpy(&se, m + HEAD_BYTES + (size_t)n->rank * sizeof(se), sizeof(se));
		sent = se.count;
		if (se.count != t->scount ||
		    se.off + (size_t)se.count * es > n->arena.lay.slot_half)
			goto bad;
		if (t->scount)
			shmcoll__copy_out(t->recv, shmcoll__slot(n, t->root, t->d->step) + se.off,
			                  t->scount * es);
		return 0;
	}
	if (head != HEAD_P2P)
		goto bad;
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
	                          "%s: mismatched counts: the root sends %llu elements to rank %d, "
	                          "which expects %zu (its recvcount)",
	                          t->fn, (unsigned long long)sent, n->rank, t->scount);
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
