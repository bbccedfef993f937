/* alltoallv.c - rank r sends sendcounts[q] elements from sdispls[q] of its sendbuf to rank
 * q, which receives them at rdispls[r] of its recvbuf. A rank knows only its own counts, so
 * the number of steps is agreed at the first one, where every rank waits for every peer
 * anyway: each publishes how many chunks its longest block needs, and all take the
 * largest.
 *
 * Message first (the default): the first step is every rank's message (engine.h's ring),
 * which says how many windows its longest block needs and, where its whole contribution is
 * small (a header, a table of each peer's offset and count, and the blocks, at most
 * SHMCOLL_INLINE_MAX bytes, and no block longer than a window), carries it inline (the
 * blocks alone when every peer's count is the same: proto.h's even form); the
 * others stage their first window beside it. Each rank reads every peer's message - an
 * inline one's count for it against its recvcounts, a mismatch being -EPROTO - and copies
 * its blocks; the steps after the first are those of the flat protocol below. A call whose
 * ranks are all inline is one step, as alltoall's inline protocol is.
 *
 * Flat protocol, for chunk k of every block, a chunk of at most w elements, w =
 * slot_half / (size * elemsize):
 *   1. Each rank copies chunk k of every block q != r that has one to position q of its
 *      staging half for this step.
 *   2. Every rank publishes the step and waits for every peer's; the first step checks the
 *      peers' call words and learns the number of steps.
 *   3. Rank r copies position r of every peer p whose block to r (recvcounts[p]) has a
 *      chunk k into recvbuf at rdispls[p]. Its own block it copies once, from sendbuf.
 *   Halves are reused two steps later as in allreduce.c.
 *
 * With SHMCOLL_CHECK=1 a first step shows every rank's sendcounts (in its staging half),
 * and each rank compares what its peers send it with its recvcounts: -EPROTO on a
 * difference. Without it a mismatch is not detected (the receiver reads as much as its own
 * counts say, never outside the staging halves). */
#include <errno.h>

#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/kernels/copy.h"

enum { AT_CGUARD = 1, AT_CSTEP, AT_GUARD, AT_STEP, AT_MGUARD, AT_PEER, AT_SGUARD };

/* The head of a rank's first-step message: bit 0 set when its blocks follow the table in
 * this message, the rest the windows its longest block to a peer needs (0 inline). Then,
 * inline, one entry per rank: where its block starts in the data after the table, and its
 * count. Small, so a small call's message stays within the line the reader polls (inline
 * data is at most SHMCOLL_INLINE_MAX bytes: 16 bits hold any offset and count). */
struct ventry {
	uint16_t off, count;
};
#define VHEAD_BYTES sizeof(uint32_t)

/* Chunks of w elements this rank's longest block to a peer needs. */
static size_t send_chunks(const struct shmcoll_node *n, const struct shmcoll_task *t, size_t w)
{
	size_t longest = 0;
	int q;

	for (q = 0; q < n->size; q++)
		if (q != n->rank && t->scounts[q] > longest)
			longest = t->scounts[q];
	return (longest + w - 1) / w;
}

/* SHMCOLL_CHECK: the counts every peer sends this rank against recvcounts. */
static int check_counts(struct shmcoll_node *n, struct shmcoll_task *t)
{
	const size_t *theirs;
	int p;

	for (p = 0; p < n->size; p++) {
		if (p == n->rank)
			continue;
		theirs = (const size_t *)shmcoll__slot(n, p, t->step);
		if (theirs[n->rank] != t->rcounts[p]) {
			shmcoll__node_break(n, EPROTO);
			return shmcoll__node_fail(
			    n, -EPROTO,
			    "%s: mismatched counts: rank %d sends %zu elements to rank %d, which "
			    "expects %zu (recvcounts[%d])",
			    t->fn, p, theirs[n->rank], n->rank, t->rcounts[p], p);
		}
	}
	return 0;
}

/* After the call's first step (every peer waited for): the number of steps, the largest
 * need any rank published with it. Read before this rank publishes another step, so no peer
 * can have begun a call that rewrites those descriptors. */
static void learn_steps(struct shmcoll_node *n, struct shmcoll_task *t)
{
	uint64_t need;
	int p;

	for (p = 0; p < n->size; p++) {
		need = shmcoll__ctrl(&n->arena, (uint32_t)p)->desc[t->d->step & 1].aux;
		if (need > t->nchunks)
			t->nchunks = (size_t)need;
	}
}

/* Window i (w elements of each block) of this rank's blocks for its peers into its staging
 * half for step, block p at position p. */
static void stage_window(struct shmcoll_node *n, const struct shmcoll_task *t, uint32_t step,
                         size_t i, size_t w)
{
	uint8_t *slot = shmcoll__slot(n, n->rank, step);
	size_t es = t->es;
	int p;

	for (p = 0; p < n->size; p++)
		if (p != n->rank && t->scounts[p] > i * w)
			memcpy(slot + (size_t)p * w * es, t->send + (t->sdispls[p] + i * w) * es,
			       min_size(w, t->scounts[p] - i * w) * es);
}

/* Window i of every peer's block for this rank, from their staging halves for t->step. */
static void take_window(struct shmcoll_node *n, const struct shmcoll_task *t, size_t i, size_t w)
{
	size_t es = t->es;
	int p;

	for (p = 0; p < n->size; p++)
		if (p != n->rank && t->rcounts[p] > i * w)
			shmcoll__copy_out(t->recv + (t->rdispls[p] + i * w) * es,
			                  shmcoll__slot(n, p, t->step) + (size_t)n->rank * w * es,
			                  min_size(w, t->rcounts[p] - i * w) * es);
}

/* This rank's own block, straight from sendbuf. */
static void own_block(const struct shmcoll_node *n, const struct shmcoll_task *t)
{
	if (t->scounts[n->rank])
		shmcoll__copy_out(t->recv + t->rdispls[n->rank] * t->es,
		                  t->send + t->sdispls[n->rank] * t->es,
		                  t->scounts[n->rank] * t->es);
}

static int alltoallv_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t w = shmcoll__chunk_elems(n, t->es, (size_t)n->size);
	int rc;

	switch (t->head.at) {
	case AT_CGUARD:
		goto cguard;
	case AT_CSTEP:
		goto cstep;
	case AT_GUARD:
		goto guard;
	case AT_STEP:
		goto step;
	}
	shmcoll__describe(n, t);
	t->d->aux = send_chunks(n, t, w);
	t->nchunks = 1;
	if (n->tune.check) {
	cguard:
		rc = shmcoll__await_guard(n, t);
		if (rc)
			return shmcoll__suspend(t, AT_CGUARD, rc);
		t->step = n->st.seq + 1;
		memcpy(shmcoll__slot(n, n->rank, t->step), t->scounts,
		       (size_t)n->size * sizeof(size_t));
		shmcoll__publish_next(n, t->d);
	cstep:
		rc = shmcoll__await_from(n, t, STEP_ALL, 1, 0);
		if (rc)
			return shmcoll__suspend(t, AT_CSTEP, rc);
		rc = check_counts(n, t);
		if (rc)
			return rc;
		learn_steps(n, t);
	}
	own_block(n, t);
	for (t->i = 0; t->i < t->nchunks; t->i++) {
	guard:
		rc = shmcoll__await_guard(n, t);
		if (rc)
			return shmcoll__suspend(t, AT_GUARD, rc);
		t->step = n->st.seq + 1;
		stage_window(n, t, t->step, t->i, w);
		shmcoll__publish_next(n, t->i == 0 && !n->tune.check ? t->d : NULL);
	step:
		rc = shmcoll__await_from(n, t, STEP_ALL, t->i == 0 && !n->tune.check, 0);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		if (t->i == 0 && !n->tune.check)
			learn_steps(n, t);
		take_window(n, t, t->i, w);
	}
	return 0;
}

/* Whether this rank's blocks go inline: all of them, with the header and table, in one
 * message, and none longer than a window (so no peer reads a later window of it). */
static int goes_inline(const struct shmcoll_node *n, const struct shmcoll_task *t)
{
	size_t bytes = VHEAD_BYTES + (size_t)n->size * sizeof(struct ventry), b;
	int q;

	for (q = 0; q < n->size; q++) {
		if (q == n->rank)
			continue;
		/* b > a window's bytes, multiplied out: no division on the small call's path. */
		b = t->scounts[q] * t->es;
		if (b > SHMCOLL_INLINE_MAX || b * (size_t)n->size > n->arena.lay.slot_half)
			return 0;
		bytes += b;
		if (bytes > SHMCOLL_INLINE_MAX)
			return 0;
	}
	return 1;
}

/* Builds this rank's first-step message in buf (its data, SHMCOLL_INLINE_MAX bytes): the
 * length to commit (proto.h's even form when every peer's count is the same). */
static size_t message(const struct shmcoll_node *n, const struct shmcoll_task *t, int inl,
                      size_t need, uint8_t *buf)
{
	uint32_t head = inl ? 1 : (uint32_t)need << 1;
	struct ventry e;
	uint8_t *data = buf + VHEAD_BYTES + (size_t)n->size * sizeof(e);
	size_t off = 0, len;
	int q;

	if (inl && shmcoll__even_blocks(n, t->scounts, n->rank, t->es, &len))
		return shmcoll__even_pack(n, buf, t->send, t->sdispls, n->rank, len, t->es);
	memcpy(buf, &head, VHEAD_BYTES);
	if (!inl)
		return VHEAD_BYTES;
	for (q = 0; q < n->size; q++) {
		len = q == n->rank ? 0 : t->scounts[q] * t->es;
		e.off = (uint16_t)off;
		e.count = (uint16_t)(q == n->rank ? 0 : t->scounts[q]);
		memcpy(buf + VHEAD_BYTES + (size_t)q * sizeof(e), &e, sizeof(e));
		if (len)
			memcpy(data + off, t->send + t->sdispls[q] * t->es, len);
		off += len;
	}
	return (size_t)(data + off - buf);
}

/* Rank p's first-step message m: its blocks for this rank (inline, or the first window in
 * its staging half), and its need. 0 or -EPROTO. */
static int take_first(struct shmcoll_node *n, struct shmcoll_task *t, int p, const uint8_t *m)
{
	uint32_t head, len = shmcoll__msg_len(n, t, p);
	struct ventry e;
	size_t es = t->es, table = VHEAD_BYTES + (size_t)n->size * sizeof(e), off;
	const uint8_t *data;

	if (len & SHMCOLL_MSG_EVEN) {
		off = shmcoll__even_offset(n, m, p, len, t->rcounts[p] * es);
		if (off == SIZE_MAX) {
			shmcoll__node_break(n, EPROTO);
			return shmcoll__node_fail(
			    n, -EPROTO,
			    "%s: mismatched counts: rank %d sends %zu elements to rank %d, which "
			    "expects %zu (recvcounts[%d])",
			    t->fn, p, shmcoll__even_count(n, len, es), n->rank, t->rcounts[p], p);
		}
		if (t->rcounts[p])
			shmcoll__copy_out(t->recv + t->rdispls[p] * es, m + off,
			                  t->rcounts[p] * es);
		return 0;
	}
	/* This rank's block, if p's blocks were all as long as the one this rank expects. */
	shmcoll__msg_prefetch(m, table + shmcoll__pos_without(n->rank, p) * t->rcounts[p] * es,
	                      t->rcounts[p] * es);
	memcpy(&head, m, VHEAD_BYTES);
	if ((head >> 1) > t->nchunks)
		t->nchunks = head >> 1;
	if (head & 1) {
		if (table > SHMCOLL_INLINE_MAX) {
			shmcoll__node_break(n, EPROTO);
			return shmcoll__node_fail(
			    n, -EPROTO, "%s: rank %d wrote an inline table that cannot fit", t->fn,
			    p);
		}
		memcpy(&e, m + VHEAD_BYTES + (size_t)n->rank * sizeof(e), sizeof(e));
		data = m + table;
		if (e.count != t->rcounts[p] ||
		    e.off + (size_t)e.count * es > SHMCOLL_INLINE_MAX - table) {
			shmcoll__node_break(n, EPROTO);
			return shmcoll__node_fail(
			    n, -EPROTO,
			    "%s: mismatched counts: rank %d sends %u elements to rank %d, which "
			    "expects %zu (recvcounts[%d])",
			    t->fn, p, e.count, n->rank, t->rcounts[p], p);
		}
		if (e.count)
			shmcoll__copy_out(t->recv + t->rdispls[p] * es, data + e.off,
			                  (size_t)e.count * es);
		return 0;
	}
	if (t->rcounts[p]) {
		size_t w = shmcoll__chunk_elems(n, es, (size_t)n->size);

		shmcoll__copy_out(t->recv + t->rdispls[p] * es,
		                  shmcoll__slot(n, p, t->step) + (size_t)n->rank * w * es,
		                  min_size(w, t->rcounts[p]) * es);
	}
	return 0;
}

/* The steps after the message: windows 1.. of the flat protocol. */
static int later_windows(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t w = shmcoll__chunk_elems(n, t->es, (size_t)n->size);
	int rc;

	switch (t->head.at) {
	case AT_SGUARD:
		goto sguard;
	case AT_STEP:
		goto step;
	}
	for (t->i = 1; t->i < t->nchunks; t->i++) {
	sguard:
		rc = shmcoll__await_guard(n, t);
		if (rc)
			return shmcoll__suspend(t, AT_SGUARD, rc);
		t->step = n->st.seq + 1;
		stage_window(n, t, t->step, t->i, w);
		shmcoll__publish_next(n, NULL);
	step:
		rc = shmcoll__await_from(n, t, STEP_ALL, 0, 0);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		take_window(n, t, t->i, w);
	}
	return 0;
}

static int alltoallv_msg(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es;
	const uint8_t *m;
	int rc;

	switch (t->head.at) {
	case AT_MGUARD:
		goto mguard;
	case AT_GUARD:
		goto guard;
	case AT_PEER:
		goto peer;
	case AT_SGUARD:
	case AT_STEP:
		return later_windows(n, t);
	}
	shmcoll__describe_inline(n, t);
	t->nchunks = 1;
	t->off = (size_t)goes_inline(n, t); /* this rank inline: the whole call, once */
	t->len = t->off ? 0 : send_chunks(n, t, shmcoll__chunk_elems(n, es, (size_t)n->size));
mguard:
	rc = shmcoll__await_msg_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_MGUARD, rc);
	t->i = 0;
	if (!t->off) {
	guard:
		rc = shmcoll__await_guard(n, t);
		if (rc)
			return shmcoll__suspend(t, AT_GUARD, rc);
		stage_window(n, t, n->st.seq + 1, 0, shmcoll__chunk_elems(n, es, (size_t)n->size));
	}
	t->step = n->st.seq + 1;
	shmcoll__msg_commit(n, t, message(n, t, (int)t->off, t->len, shmcoll__msg_data(n, t)));
	own_block(n, t);
	if (t->len > t->nchunks)
		t->nchunks = t->len;
	for (t->p = 0; t->p < n->size; t->p++) {
		if (t->p == n->rank)
			continue;
	peer:
		rc = shmcoll__await_msg(n, t, t->p, &m);
		if (rc)
			return shmcoll__suspend(t, AT_PEER, rc);
		rc = take_first(n, t, t->p, m);
		if (rc)
			return rc;
	}
	/* Every peer has begun this call: it has read all we wrote before. */
	n->st.clean = n->st.seq - 1;
	if (t->nchunks < 2)
		return 0;
	t->head.at = 0;
	return later_windows(n, t);
}

void shmcoll__alltoallv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                             const size_t *sendcounts, const size_t *sdispls, void *recv,
                             const size_t *recvcounts, const size_t *rdispls, shmcoll_dtype dt)
{
	/* Which protocol is part of the call word (its op, unused otherwise), so ranks that
	 * differ in SHMCOLL_CHECK fail the call-word check instead of misreading each other. */
	shmcoll__coll_task(t, "shmcoll_alltoallv", n->tune.check ? alltoallv_flat : alltoallv_msg,
	                   KIND_ALLTOALLV, dt, n->tune.check ? SHMCOLL_PROD : SHMCOLL_SUM, -1, send,
	                   recv, 0);
	shmcoll__vtask(t, sendcounts, sdispls, recvcounts, rdispls, 0);
	if (shmcoll__alone(n, t))
		return;
}
