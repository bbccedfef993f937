/* engine.c - the step engine (engine.h): call words and descriptors, the guards that keep
 * the reuse rule, publishing and awaiting steps and messages, and the messages that name who
 * did not arrive when a wait fails. */
#include "lib/core/engine.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/core/algo.h"
#include "lib/core/heap.h"
#include "lib/kernels/copy.h"
#include "lib/kernels/kernels.h"

void shmcoll__describe(struct shmcoll_node *n, struct shmcoll_task *t)
{
	struct shmcoll_desc *d = &n->st.desc;

	shmcoll__describe_inline(n, t);
	d->src_off = NO_OFF;
	d->res_off = NO_OFF;
	d->aux = 0;
	d->addr = 0;
	/* Zero-copy buffers are learnt afresh by every call's checks. */
	memset(n->st.zc, 0, (size_t)n->size * sizeof(*n->st.zc));
	memset(n->st.zr, 0, (size_t)n->size * sizeof(*n->st.zr));
}

/* The peers of step that had not published it, as "2, 5". */
static void missing_ranks(const struct shmcoll_node *n, uint32_t step, char *who, size_t len)
{
	size_t used = 0;
	int p;

	who[0] = '\0';
	for (p = 0; p < n->size && used + 16 < len; p++) {
		struct shmcoll_ctrl *pc = shmcoll__ctrl(&n->arena, (uint32_t)p);

		if (!seq_reached(load_relaxed(&pc->seq), step))
			used +=
			    (size_t)snprintf(who + used, len - used, "%s%d", used ? ", " : "", p);
	}
}

/* A wait for step ended with rc: breaks the communicator (or learns who broke it) and
 * returns the error with a message naming who was missing. */
static int step_failed(struct shmcoll_node *n, const char *fn, int rc, uint32_t step)
{
	int why, by;
	char who[160];

	shmcoll__node_aborted(n, &why, &by);
	missing_ranks(n, step, who, sizeof(who));
	if (rc == -EOWNERDEAD) {
		shmcoll__node_break_by(n, EOWNERDEAD, n->live.dead_rank);
		return shmcoll__node_fail(n, rc,
		                          "%s: rank %d (pid %d) died; this rank was waiting for "
		                          "rank(s) %s (step %u)",
		                          fn, n->live.dead_rank,
		                          shmcoll__peer_pid(n, n->live.dead_rank), who, step);
	}
	if (rc == -EPROTO) {
		shmcoll__node_break(n, EPROTO);
		return shmcoll__node_fail(
		    n, rc,
		    "%s: mismatched calls: rank %d destroyed its communicator "
		    "while this rank waits for it (step %u)",
		    fn, n->live.left_rank, step);
	}
	if (rc == -ETIMEDOUT) {
		shmcoll__node_break(n, ETIMEDOUT);
		return shmcoll__node_fail(
		    n, rc, "%s: timed out after %lld ms waiting for rank(s) %s (step %u)", fn,
		    (long long)(n->waiter.timeout_ns / 1000000), who, step);
	}
	/* Woken by another rank's failure: report its cause as ours. */
	atomic_store(&n->broken, why ? why : ECANCELED);
	if (why == ETIMEDOUT)
		return shmcoll__node_fail(
		    n, -ETIMEDOUT,
		    "%s: rank %d timed out; this rank was waiting for rank(s) "
		    "%s (step %u)",
		    fn, by, who, step);
	if (why == EPROTO)
		return shmcoll__node_fail(n, -EPROTO, "%s: rank %d detected mismatched calls", fn,
		                          by);
	if (why == EOWNERDEAD)
		return shmcoll__node_fail(n, -EOWNERDEAD,
		                          "%s: rank %d (pid %d) died; this rank was waiting for "
		                          "rank(s) %s (step %u)",
		                          fn, by, shmcoll__peer_pid(n, by), who, step);
	return shmcoll__node_fail(n, -ECANCELED, "%s: the communicator was aborted by rank %d", fn,
	                          by);
}

/* The bounded wait for rank p's step want. */
static int wait_rank(struct shmcoll_node *n, const char *fn, int p, uint32_t want)
{
	struct shmcoll_ctrl *pc = shmcoll__ctrl(&n->arena, (uint32_t)p);
	struct shmcoll_cpus cpus;
	int rc;

	/* For the liveness check, should the wait take its slow path. */
	n->live.waiting_for = p;
	n->live.waiting_step = want;
	/* Acquire: pairs with the publish of want on rank p. */
	cpus = shmcoll__cpus_with(n, p);
	rc = shmcoll__wait_geq_on(&n->waiter, &pc->seq, &pc->sleepers, want, &cpus);
	return rc < 0 ? step_failed(n, fn, rc, want) : 0;
}

/* A task advancing without blocking found rank p short of step want. It fails as the
 * blocking wait would - when the communicator was aborted, when the wait has lasted the
 * timeout (counted from the first time this await found p short), or when the liveness
 * check, run every SHMCOLL_CHECK_NS, finds a dead or departed peer - and is otherwise
 * pending. */
static int pending(struct shmcoll_node *n, struct shmcoll_task *t, int p, uint32_t want)
{
	int64_t now;
	int rc = 0;

	/* The first miss only marks the await: a non-blocking start usually finds its peers not
	 * there yet and is then waited for, blocking, and a clock read would cost the start
	 * more than the look (the timeout counts from the second miss). */
	if (!t->wait_since) {
		t->wait_since = 1;
		return load_relaxed(&n->arena.hdr->aborted)
		           ? step_failed(n, t->fn, -ECANCELED, want)
		           : SHMCOLL_PENDING;
	}
	now = shmcoll__now_ns();
	if (t->wait_since == 1)
		t->wait_since = t->checked = now;
	if (load_relaxed(&n->arena.hdr->aborted))
		rc = -ECANCELED;
	else if (n->waiter.timeout_ns >= 0 && now - t->wait_since >= n->waiter.timeout_ns)
		rc = -ETIMEDOUT;
	else if (now - t->checked >= SHMCOLL_CHECK_NS && n->waiter.check) {
		t->checked = now;
		n->live.waiting_for = p;
		n->live.waiting_step = want;
		rc = n->waiter.check(n->waiter.check_ctx);
	}
	return rc < 0 ? step_failed(n, t->fn, rc, want) : SHMCOLL_PENDING;
}

int shmcoll__await_rank(struct shmcoll_node *n, struct shmcoll_task *t, int p, uint32_t want)
{
	if (t->head.blocking)
		return wait_rank(n, t->fn, p, want);
	if (!seq_reached(load_relaxed(&shmcoll__ctrl(&n->arena, (uint32_t)p)->seq), want))
		return pending(n, t, p, want);
	/* Acquire: pairs with the publish of want on rank p. */
	fence_acquire();
	t->wait_since = 0;
	return 0;
}

int shmcoll__await_guard(struct shmcoll_node *n, struct shmcoll_task *t)
{
	uint32_t s = n->st.seq + 1;
	int rc;

	if (seq_reached(n->st.clean, s - 2))
		return 0;
	/* A peer that published s - 1 has finished reading what we wrote at s - 2 or before,
	 * whatever protocol either of us ran. */
	for (; t->k < n->size - 1; t->k++) {
		rc = shmcoll__await_rank(n, t, (n->rank + 1 + t->k) % n->size, s - 1);
		if (rc)
			return rc;
	}
	t->k = 0;
	n->st.clean = s - 2;
	return 0;
}

/* One look at every peer's seq usually shows them all far enough along to cover the next
 * few calls too, so back-to-back calls of a rank that runs ahead (a root) pay for it once
 * per ring, not once per call. */
int shmcoll__await_msg_guard(struct shmcoll_node *n, struct shmcoll_task *t)
{
	uint32_t ring = (uint32_t)n->arena.lay.msg_ring;
	uint32_t s = n->st.seq + 1, need = s - ring + 1, cur;
	int p, rc;

	if (seq_reached(n->st.clean, s - ring))
		return 0;
	if (t->k == 0)
		t->low = n->st.seq + 1;
	for (; t->k < n->size - 1; t->k++) {
		p = (n->rank + 1 + t->k) % n->size;
		cur = load_relaxed(&shmcoll__ctrl(&n->arena, (uint32_t)p)->seq);
		if (!seq_reached(cur, need)) {
			rc = shmcoll__await_rank(n, t, p, need);
			if (rc)
				return rc;
			cur = need;
		}
		if (!seq_reached(cur, t->low))
			t->low = cur;
	}
	t->k = 0;
	/* Acquire: pairs with the publish of each seq read above, so their reads of what the
	 * slot held happened before we overwrite it. */
	fence_acquire();
	/* A peer that published low has read all we wrote before low. */
	n->st.clean = t->low - 1;
	return 0;
}

/* Publishes the next step. fenced: with a sequentially consistent store, for the inline
 * calls without a root, whose every rank waits for the others right after publishing
 * (shm/wait.h; docs/BENCHMARKS.md, "Publishing without a fence"). */
static inline void publish_seq(struct shmcoll_node *n, int fenced)
{
	uint32_t step = n->st.seq + 1;

	/* Release: our staged data and call word for this step are visible to a peer whose
	 * wait for it returns. */
	if (fenced)
		shmcoll__publish_fenced(&n->st.me->seq, &n->st.me->sleepers, step);
	else
		shmcoll__publish(&n->st.me->seq, &n->st.me->sleepers, step);
	n->st.seq = step;
}

void shmcoll__publish_next(struct shmcoll_node *n, const struct shmcoll_desc *first)
{
	uint32_t step = n->st.seq + 1;

	if (first) {
		n->st.call.zc = (first->src_off != NO_OFF) | (first->res_off != NO_OFF) << 1;
		n->st.me->call[step & 1] = n->st.call;
		n->st.me->desc[step & 1] = *first;
	}
	publish_seq(n, 0);
}

int shmcoll__await_all(struct shmcoll_node *n, struct shmcoll_task *t)
{
	int rc;

	for (; t->k < n->size - 1; t->k++) {
		rc = shmcoll__await_rank(n, t, (n->rank + 1 + t->k) % n->size, n->st.seq);
		if (rc)
			return rc;
	}
	t->k = 0;
	/* Every peer published seq: it has read all we wrote before it. */
	n->st.clean = n->st.seq - 1;
	return 0;
}

static int mismatch(struct shmcoll_node *n, const char *fn, const struct shmcoll_call *mine, int p,
                    const struct shmcoll_call *k)
{
	shmcoll__node_break(n, EPROTO);
	if (k->step != mine->step)
		return shmcoll__node_fail(n, -EPROTO,
		                          "%s: mismatched calls: rank %d is inside a different "
		                          "collective at step %u (its %s began at step %u)",
		                          fn, p, mine->step, shmcoll__kind_name(k->kind), k->step);
	if (k->algo != mine->algo)
		return shmcoll__node_fail(
		    n, -EPROTO,
		    "%s: mismatched algorithms: rank %d runs %s, rank %d runs "
		    "%s (is SHMCOLL_ALGO the same on every rank?)",
		    fn, n->rank, shmcoll__algo_name(mine->algo), p, shmcoll__algo_name(k->algo));
	if (k->kind == mine->kind && k->count != mine->count &&
	    (k->kind == KIND_ALLGATHERV || k->kind == KIND_REDUCE_SCATTERV))
		return shmcoll__node_fail(n, -EPROTO,
		                          "%s: mismatched calls: ranks %d and %d passed different "
		                          "recvcounts to %s",
		                          fn, n->rank, p, shmcoll__kind_name(k->kind));
	return shmcoll__node_fail(n, -EPROTO,
	                          "%s: mismatched calls: rank %d called %s(count=%llu, %s, %s, "
	                          "root=%d), rank %d called %s(count=%llu, %s, %s, root=%d)",
	                          fn, n->rank, shmcoll__kind_name(mine->kind),
	                          (unsigned long long)mine->count, shmcoll__dtype_name(mine->dtype),
	                          shmcoll__op_name(mine->op), mine->root, p,
	                          shmcoll__kind_name(k->kind), (unsigned long long)k->count,
	                          shmcoll__dtype_name(k->dtype), shmcoll__op_name(k->op), k->root);
}

static int same_call(const struct shmcoll_call *a, const struct shmcoll_call *b)
{
	return a->step == b->step && a->kind == b->kind && a->dtype == b->dtype && a->op == b->op &&
	       a->algo == b->algo && a->root == b->root && a->count == b->count;
}

int shmcoll__check_rank(struct shmcoll_node *n, struct shmcoll_task *t, int p, uint64_t src_bytes)
{
	uint32_t par = t->d->step & 1;
	const struct shmcoll_call *me = &n->st.call;
	const struct shmcoll_ctrl *pc = shmcoll__ctrl(&n->arena, (uint32_t)p);
	const struct shmcoll_call *k = &pc->call[par];
	const struct shmcoll_msg *m = shmcoll__msg(n, p, t->d->step);

	/* A rank in an inline call leaves its call words alone and describes the call in its
	 * message (shmcoll__msg_publish); it cannot have rewritten that slot since, as this
	 * rank has not passed the step. */
	if (k->step != t->d->step && load_relaxed(&m->stamp) == t->d->step)
		k = &m->call;
	if (p != n->rank && !same_call(me, k))
		return mismatch(n, t->fn, me, p, k);
	n->st.zc[p] = n->st.zr[p] = NULL;
	if (!k->zc)
		return 0;
	if (k->zc & 1) {
		n->st.zc[p] = shmcoll__heap_peer(n, p, pc->desc[par].src_off, src_bytes);
		if (!n->st.zc[p])
			goto outside;
	}
	if (k->zc & 2) {
		n->st.zr[p] = shmcoll__heap_peer(n, p, pc->desc[par].res_off, src_bytes);
		if (!n->st.zr[p])
			goto outside;
	}
	return 0;
outside:
	shmcoll__node_break(n, EPROTO);
	return shmcoll__node_fail(n, -EPROTO, "%s: rank %d described a buffer outside its heap",
	                          t->fn, p);
}

int shmcoll__check_peers(struct shmcoll_node *n, struct shmcoll_task *t, uint64_t src_bytes)
{
	int p, rc;

	for (p = 0; p < n->size; p++) {
		rc = shmcoll__check_rank(n, t, p, src_bytes);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int shmcoll__await_from(struct shmcoll_node *n, struct shmcoll_task *t, int from, int first,
                        uint64_t src_bytes)
{
	int rc;

	if (from == STEP_NONE)
		return 0;
	if (from != STEP_ALL) {
		rc = shmcoll__await_rank(n, t, from, n->st.seq);
		if (rc == 0 && first)
			rc = shmcoll__check_rank(n, t, from, src_bytes);
		return rc;
	}
	rc = shmcoll__await_all(n, t);
	if (rc == 0 && first)
		rc = shmcoll__check_peers(n, t, src_bytes);
	return rc;
}

/* Publishes this rank's message for the task's step, its data written. */
static inline void msg_commit(struct shmcoll_node *n, struct shmcoll_task *t, struct shmcoll_msg *m,
                              size_t len)
{
	m->len = (uint32_t)len;
	m->call = n->st.call;
	/* Release: the call word and data are visible to whoever sees the stamp. seq follows
	 * without the call word, which an inline call keeps in its message only
	 * (shmcoll__check_rank looks there). */
	store_release(&m->stamp, t->d->step);
	publish_seq(n, t->root < 0);
}

void shmcoll__msg_publish2(struct shmcoll_node *n, struct shmcoll_task *t, const void *a,
                           size_t alen, const void *b, size_t blen)
{
	struct shmcoll_msg *m = shmcoll__msg(n, n->rank, t->d->step);

	/* A rooted call's messages go one way, run ahead of their readers and so rewrite
	 * lines a reader holds: rep movsb, which does not fetch them back first
	 * (lib/kernels/copy.h). A call without a root waits for its peers right after its
	 * own write, where rep movsb's start-up cost is on the path: memcpy (P=2, 60 ns hop,
	 * 512 B-1 KiB: allreduce and alltoall 0.85-0.90x with rep movsb; docs/BENCHMARKS.md). */
	uint8_t *to = m->data;
	size_t len = alen + blen, flags = 0;

	if (shmcoll__msg_in_big(n, t, len)) { /* at most msg_max: shmcoll__algo_inline */
		to = shmcoll__msg_big(n, n->rank, t->d->step);
		flags = SHMCOLL_MSG_BIG;
	}
	if (t->root >= 0) {
		if (alen)
			shmcoll__copy_in_msg(to, a, alen);
		if (blen)
			shmcoll__copy_in_msg(to + alen, b, blen);
	} else {
		if (alen)
			memcpy(to, a, alen);
		if (blen)
			memcpy(to + alen, b, blen);
	}
	msg_commit(n, t, m, len | flags);
}

void shmcoll__msg_commit(struct shmcoll_node *n, struct shmcoll_task *t, size_t len)
{
	msg_commit(n, t, shmcoll__msg(n, n->rank, t->d->step), len);
}

int shmcoll__await_msg(struct shmcoll_node *n, struct shmcoll_task *t, int p, const uint8_t **data)
{
	uint32_t step = t->d->step;
	const struct shmcoll_msg *m = shmcoll__msg(n, p, step);
	int i, rc, got = 0;

	if (t->head.blocking) {
		/* Spin on the message line itself. With more ranks than CPUs, after the spin
		 * budget, or once the peer is seen to have last run on this CPU (shm/wait.h's
		 * pace), the ordinary wait on seq (yield, futex, timeout, abort) takes over; seq
		 * is published after the message, so the message is there then. */
		int look = shmcoll__pace_look();

		for (i = 0; i < (n->waiter.oversubscribed ? 0 : SHMCOLL_MSG_SPINS); i++) {
			if (load_relaxed(&m->stamp) == step) {
				got = 1;
				break;
			}
			if (i == look) {
				struct shmcoll_cpus cpus = shmcoll__cpus_with(n, p);

				if (shmcoll__pace_peer_here(&cpus))
					break;
			}
			cpu_relax();
		}
		if (!got) {
			rc = wait_rank(n, t->fn, p, step);
			if (rc < 0)
				return rc;
		}
	} else if (load_relaxed(&m->stamp) != step &&
	           (!t->wait_since ||
	            !seq_reached(load_relaxed(&shmcoll__ctrl(&n->arena, (uint32_t)p)->seq),
	                         step))) {
		/* A first miss does not read p's seq: that is another line from p's cache, and
		 * a start usually finds its peers not there yet (see pending()). A peer in
		 * another call is found at the next look. */
		return pending(n, t, p, step);
	} else {
		t->wait_since = 0;
	}
	/* Acquire: pairs with the release of stamp in shmcoll__msg_publish() (or, with the
	 * stamp not there, of seq: the peer is in another call). */
	fence_acquire();
	/* A peer in another call published the step without this message (or with another
	 * call word): report it from its call word. */
	if (load_relaxed(&m->stamp) != step || !same_call(&n->st.call, &m->call)) {
		rc = shmcoll__await_rank(n, t, p, step);
		if (rc == 0)
			rc = shmcoll__check_rank(n, t, p, 0);
		if (rc == 0)
			rc = mismatch(n, t->fn, &n->st.call, p, &m->call);
		return rc;
	}
	*data = m->len & SHMCOLL_MSG_BIG ? shmcoll__msg_big(n, p, step) : m->data;
	return 0;
}

int shmcoll__await_msg_gather(struct shmcoll_node *n, struct shmcoll_task *t, const uint8_t *send,
                              uint8_t *recv, size_t bytes)
{
	const uint8_t *m;
	int rc;

	/* t->k: the ranks done, in rank order. */
	for (; t->k < n->size; t->k++) {
		uint8_t *block = recv + (size_t)t->k * bytes;

		if (t->k == n->rank) {
			if (send != block)
				memcpy(block, send, bytes);
			continue;
		}
		rc = shmcoll__await_msg(n, t, t->k, &m);
		if (rc)
			return rc;
		memcpy(block, m, bytes);
		if (t->root >= 0)
			shmcoll__msg_prefetch_next(n, t, t->k, 0, bytes, SHMCOLL_INLINE_MAX);
	}
	t->k = 0;
	/* Every peer has begun this call: it has read all we wrote before. */
	n->st.clean = n->st.seq - 1;
	return 0;
}

int shmcoll__zc_any(const struct shmcoll_node *n, int skip)
{
	int p;

	for (p = 0; p < n->size; p++)
		if (p != skip && n->st.zc[p])
			return n->size > 1;
	return 0;
}
