/* engine.c - what every collective shares: argument checks, call
 * descriptors, and the step (publish my sequence number, wait for every
 * peer's), with the error messages that name who did not arrive. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/hier.h"
#include "lib/internal.h"

int shmcoll__fail(shmcoll_comm *c, int rc, const char *fn_fmt, ...)
{
	va_list ap;

	va_start(ap, fn_fmt);
	vsnprintf(c->err, sizeof(c->err), fn_fmt, ap);
	va_end(ap);
	/* The first failure that breaks the communicator is quoted by every
	 * later -ECANCELED. */
	if (load_relaxed(&c->broken) && !c->cause[0])
		memcpy(c->cause, c->err, sizeof(c->cause));
	return rc;
}

static const char *const kind_names[KIND_COUNT] = {
    [KIND_BARRIER] = "barrier",     [KIND_BCAST] = "bcast",
    [KIND_REDUCE] = "reduce",       [KIND_ALLREDUCE] = "allreduce",
    [KIND_ALLGATHER] = "allgather", [KIND_REDUCE_SCATTER] = "reduce_scatter",
    [KIND_GATHER] = "gather",       [KIND_SCATTER] = "scatter",
    [KIND_ALLTOALL] = "alltoall",   [KIND_MALLOC] = "malloc",
    [KIND_FREE] = "free",
};

static const char *const dtype_names[SHMCOLL_DTYPE_COUNT] = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",
    "uint64", "float16", "bfloat16", "float32", "float64",
};

static const char *const op_names[SHMCOLL_OP_COUNT] = {
    "sum", "prod", "min", "max", "avg", "band", "bor", "bxor",
};

const char *shmcoll__kind_name(uint32_t kind)
{
	return kind > 0 && kind < KIND_COUNT ? kind_names[kind] : "unknown";
}

const char *shmcoll__dtype_name(uint32_t dtype)
{
	return dtype < SHMCOLL_DTYPE_COUNT ? dtype_names[dtype] : "unknown";
}

const char *shmcoll__op_name(uint32_t op)
{
	return op < SHMCOLL_OP_COUNT ? op_names[op] : "unknown";
}

size_t shmcoll_dtype_size(shmcoll_dtype dtype)
{
	static const unsigned char sizes[SHMCOLL_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};

	return (unsigned)dtype < SHMCOLL_DTYPE_COUNT ? sizes[dtype] : 0;
}

int shmcoll__check_comm(shmcoll_comm *c, const char *fn)
{
	(void)fn;
	return c ? 0 : -EINVAL;
}

int shmcoll__check_type(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, size_t count,
                        size_t mult, size_t *bytes)
{
	size_t es = shmcoll_dtype_size(dtype);

	if (!es)
		return shmcoll__fail(c, -EINVAL, "%s: unknown dtype %d", fn, (int)dtype);
	if (count > SIZE_MAX / es / mult)
		return shmcoll__fail(c, -EINVAL,
		                     "%s: count %zu of %s (x%zu) overflows size_t bytes", fn, count,
		                     dtype_names[dtype], mult);
	*bytes = count * es * mult;
	return 0;
}

int shmcoll__check_op(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, shmcoll_op op)
{
	if ((unsigned)op >= SHMCOLL_OP_COUNT)
		return shmcoll__fail(c, -EINVAL, "%s: unknown op %d", fn, (int)op);
	if (!shmcoll__reduce_lookup(dtype, op))
		return shmcoll__fail(c, -EINVAL, "%s: op %s is not defined on dtype %s", fn,
		                     op_names[op], shmcoll__dtype_name(dtype));
	return 0;
}

int shmcoll__check_root(shmcoll_comm *c, const char *fn, int root)
{
	if (root < 0 || root >= c->size)
		return shmcoll__fail(c, -EINVAL, "%s: root %d out of range 0..%d", fn, root,
		                     c->size - 1);
	return 0;
}

int shmcoll__check_buf(shmcoll_comm *c, const char *fn, const char *name, const void *buf,
                       size_t bytes)
{
	if (!buf && bytes)
		return shmcoll__fail(c, -EINVAL, "%s: %s is NULL with %zu bytes to move", fn, name,
		                     bytes);
	return 0;
}

int shmcoll__check_overlap(shmcoll_comm *c, const char *fn, const void *a, size_t na, const void *b,
                           size_t nb, const void *inplace_a)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	if (!na || !nb || a == inplace_a)
		return 0;
	if (x < y + nb && y < x + na)
		return shmcoll__fail(c, -EINVAL,
		                     "%s: sendbuf and recvbuf overlap without being the "
		                     "in-place form",
		                     fn);
	return 0;
}

int shmcoll__enter(shmcoll_comm *c, const char *fn)
{
	if (c->hier)
		return shmcoll__hier_enter(c, fn);
	if (!load_relaxed(&c->broken) && !load_relaxed(&c->arena.hdr->aborted)) {
		c->err[0] = '\0';
		return 0;
	}
	if (!load_relaxed(&c->broken)) {
		uint32_t word = load_relaxed(&c->arena.hdr->aborted);
		int why = (int)(word & 0xff), by = (int)(word >> 8) - 1;

		/* A peer found the call this rank is entering mismatched before
		 * this rank entered it (rooted and inline calls check a peer as
		 * soon as it arrives): this rank is party to that mismatch, so it
		 * reports it, once, as a failed wait would. A rank arriving after
		 * its peers timed out waiting for it just finds the communicator
		 * aborted. */
		atomic_store(&c->broken, why ? why : ECANCELED);
		if (why == EPROTO)
			return shmcoll__fail(c, -EPROTO, "%s: rank %d detected mismatched calls",
			                     fn, by);
		/* A peer died while this rank was between calls: this call is
		 * the one it would have waited in. */
		if (why == EOWNERDEAD)
			return shmcoll__fail(c, -EOWNERDEAD, "%s: rank %d (pid %d) died", fn, by,
			                     shmcoll__peer_pid(c, by));
	}
	return shmcoll__fail(c, -ECANCELED, "%s: the communicator was aborted earlier%s%s", fn,
	                     c->cause[0] ? ": " : " (by a peer or shmcoll_comm_abort)", c->cause);
}

int shmcoll__guard(shmcoll_comm *c, const char *fn)
{
	uint32_t s = c->seq + 1;
	int i, rc;

	if (seq_reached(c->clean, s - 2))
		return 0;
	/* A peer that published s - 1 has finished reading what we wrote at
	 * s - 2 or before, whatever protocol either of us ran. */
	for (i = 1; i < c->size; i++) {
		rc = shmcoll__wait_rank(c, fn, (c->rank + i) % c->size, s - 1);
		if (rc < 0)
			return rc;
	}
	c->clean = s - 2;
	return 0;
}

/* Builds the call word and descriptor of a call whose first step is the
 * next one. Both stay private until that step publishes them, so the line
 * peers poll changes once per step, not twice. */
static struct shmcoll_desc *describe(shmcoll_comm *c, uint32_t kind, shmcoll_dtype dtype,
                                     shmcoll_op op, int root, uint64_t count)
{
	uint32_t step = c->seq + 1;
	struct shmcoll_call *k = &c->call;
	struct shmcoll_desc *d = &c->desc;

	k->step = step;
	k->kind = (uint8_t)kind;
	k->dtype = (uint8_t)dtype;
	k->op = (uint8_t)op;
	k->algo = ALGO_FLAT;
	k->root = root;
	k->zc = 0;
	k->count = count;
	d->src_off = NO_OFF;
	d->res_off = NO_OFF;
	d->aux = 0;
	d->addr = 0;
	d->step = step;
	return d;
}

int shmcoll__begin(shmcoll_comm *c, const char *fn, uint32_t kind, shmcoll_dtype dtype,
                   shmcoll_op op, int root, uint64_t count, struct shmcoll_desc **out)
{
	*out = describe(c, kind, dtype, op, root, count);
	/* Zero-copy buffers are learnt afresh by every call's checks. */
	memset(c->zc, 0, (size_t)c->size * sizeof(*c->zc));
	memset(c->zr, 0, (size_t)c->size * sizeof(*c->zr));
	return shmcoll__guard(c, fn);
}

/* Before an inline call writes its message for step s into slot
 * s % SHMCOLL_MSG_RING: every peer must be done with what that slot held,
 * written at s - SHMCOLL_MSG_RING or before, i.e. have published the step
 * after it. One look at every peer's seq usually shows them all far enough
 * along to cover the next few calls too, so back-to-back calls of a rank
 * that runs ahead (a root) pay for it once per ring, not once per call. */
static int msg_guard(shmcoll_comm *c, const char *fn)
{
	uint32_t s = c->seq + 1, need = s - SHMCOLL_MSG_RING + 1, low = c->seq + 1, cur;
	int i, p, rc;

	if (seq_reached(c->clean, s - SHMCOLL_MSG_RING))
		return 0;
	for (i = 1; i < c->size; i++) {
		p = (c->rank + i) % c->size;
		cur = load_relaxed(&shmcoll__ctrl(&c->arena, (uint32_t)p)->seq);
		if (!seq_reached(cur, need)) {
			rc = shmcoll__wait_rank(c, fn, p, need);
			if (rc < 0)
				return rc;
			cur = need;
		}
		if (!seq_reached(cur, low))
			low = cur;
	}
	/* Acquire: pairs with the publish of each seq read above, so their
	 * reads of what the slot held happened before we overwrite it. */
	fence_acquire();
	/* A peer that published low has read all we wrote before low. */
	c->clean = low - 1;
	return 0;
}

int shmcoll__begin_msg(shmcoll_comm *c, const char *fn, uint32_t kind, shmcoll_dtype dtype,
                       shmcoll_op op, int root, uint64_t count, struct shmcoll_desc **out)
{
	*out = describe(c, kind, dtype, op, root, count);
	return msg_guard(c, fn);
}

struct shmcoll_call *shmcoll__call(shmcoll_comm *c)
{
	return &c->call;
}

void shmcoll__break(shmcoll_comm *c, int why)
{
	shmcoll__break_by(c, why, c->rank);
}

void shmcoll__break_by(shmcoll_comm *c, int why, int who)
{
	uint32_t none = 0;
	int p;

	atomic_store(&c->broken, why);
	/* The first cause wins: (rank + 1) << 8 | errno, so a rank woken by it
	 * can report what happened and who: the rank that saw it, or for
	 * EOWNERDEAD the rank that died. seq_cst: a waiter re-checks the word
	 * after each futex sleep, which is woken or times out of its slice
	 * (wait.c). Async-signal-safe: atomics and futex calls only. */
	atomic_compare_exchange_strong(&c->arena.hdr->aborted, &none,
	                               ((uint32_t)(who + 1) << 8) | ((uint32_t)why & 0xff));
	for (p = 0; p < c->size; p++)
		shmcoll__wake_all(&shmcoll__ctrl(&c->arena, (uint32_t)p)->seq);
	shmcoll__wake_all(&c->arena.hdr->attached);
}

/* The peers of step that had not published it, as "2, 5". */
static void missing_ranks(const shmcoll_comm *c, uint32_t step, char *who, size_t len)
{
	size_t n = 0;
	int p;

	who[0] = '\0';
	for (p = 0; p < c->size && n + 16 < len; p++) {
		struct shmcoll_ctrl *pc = shmcoll__ctrl(&c->arena, (uint32_t)p);

		if (!seq_reached(load_relaxed(&pc->seq), step))
			n += (size_t)snprintf(who + n, len - n, "%s%d", n ? ", " : "", p);
	}
}

static int step_failed(shmcoll_comm *c, const char *fn, int rc, uint32_t step)
{
	uint32_t word = load_relaxed(&c->arena.hdr->aborted);
	int why = (int)(word & 0xff), by = (int)(word >> 8) - 1;
	char who[160];

	missing_ranks(c, step, who, sizeof(who));
	if (rc == -EOWNERDEAD) {
		shmcoll__break_by(c, EOWNERDEAD, c->dead_rank);
		return shmcoll__fail(c, rc,
		                     "%s: rank %d (pid %d) died; this rank was waiting for rank(s) "
		                     "%s (step %u)",
		                     fn, c->dead_rank, shmcoll__peer_pid(c, c->dead_rank), who,
		                     step);
	}
	if (rc == -EPROTO) {
		shmcoll__break(c, EPROTO);
		return shmcoll__fail(c, rc,
		                     "%s: mismatched calls: rank %d destroyed its communicator "
		                     "while this rank waits for it (step %u)",
		                     fn, c->left_rank, step);
	}
	if (rc == -ETIMEDOUT) {
		shmcoll__break(c, ETIMEDOUT);
		return shmcoll__fail(c, rc,
		                     "%s: timed out after %lld ms waiting for rank(s) %s (step %u)",
		                     fn, (long long)(c->waiter.timeout_ns / 1000000), who, step);
	}
	/* Woken by another rank's failure: report its cause as ours. */
	atomic_store(&c->broken, why ? why : ECANCELED);
	if (why == ETIMEDOUT)
		return shmcoll__fail(c, -ETIMEDOUT,
		                     "%s: rank %d timed out; this rank was waiting for rank(s) "
		                     "%s (step %u)",
		                     fn, by, who, step);
	if (why == EPROTO)
		return shmcoll__fail(c, -EPROTO, "%s: rank %d detected mismatched calls", fn, by);
	if (why == EOWNERDEAD)
		return shmcoll__fail(c, -EOWNERDEAD,
		                     "%s: rank %d (pid %d) died; this rank was waiting for rank(s) "
		                     "%s (step %u)",
		                     fn, by, shmcoll__peer_pid(c, by), who, step);
	return shmcoll__fail(c, -ECANCELED, "%s: the communicator was aborted by rank %d", fn, by);
}

void shmcoll__publish_next(shmcoll_comm *c, const struct shmcoll_desc *first)
{
	uint32_t step = c->seq + 1;

	if (first) {
		c->call.zc = (first->src_off != NO_OFF) | (first->res_off != NO_OFF) << 1;
		c->me->call[step & 1] = c->call;
		c->me->desc[step & 1] = *first;
	}
	/* Release: our staged data and call word for this step are visible to
	 * a peer whose wait for it returns. */
	shmcoll__publish(&c->me->seq, &c->me->sleepers, step);
	c->seq = step;
}

int shmcoll__wait_rank(shmcoll_comm *c, const char *fn, int p, uint32_t want)
{
	struct shmcoll_ctrl *pc = shmcoll__ctrl(&c->arena, (uint32_t)p);
	int rc;

	/* For the liveness check, should the wait take its slow path. */
	c->waiting_for = p;
	c->waiting_step = want;
	/* Acquire: pairs with the publish of want on rank p. */
	rc = shmcoll__wait_geq(&c->waiter, &pc->seq, &pc->sleepers, want);
	return rc < 0 ? step_failed(c, fn, rc, want) : 0;
}

/* Waits until every peer has published the step this rank last published. */
static int wait_all(shmcoll_comm *c, const char *fn)
{
	int i, rc;

	for (i = 1; i < c->size; i++) {
		rc = shmcoll__wait_rank(c, fn, (c->rank + i) % c->size, c->seq);
		if (rc < 0)
			return rc;
	}
	/* Every peer published seq: it has read all we wrote before it. */
	c->clean = c->seq - 1;
	return 0;
}

int shmcoll__step(shmcoll_comm *c, const char *fn)
{
	shmcoll__publish_next(c, NULL);
	return wait_all(c, fn);
}

static int mismatch(shmcoll_comm *c, const char *fn, const struct shmcoll_call *mine, int p,
                    const struct shmcoll_call *k)
{
	shmcoll__break(c, EPROTO);
	if (k->step != mine->step)
		return shmcoll__fail(c, -EPROTO,
		                     "%s: mismatched calls: rank %d is inside a different "
		                     "collective at step %u (its %s began at step %u)",
		                     fn, p, mine->step, shmcoll__kind_name(k->kind), k->step);
	if (k->algo != mine->algo)
		return shmcoll__fail(c, -EPROTO,
		                     "%s: mismatched algorithms: rank %d runs %s, rank %d runs %s "
		                     "(is SHMCOLL_ALGO the same on every rank?)",
		                     fn, c->rank, shmcoll__algo_name(mine->algo), p,
		                     shmcoll__algo_name(k->algo));
	return shmcoll__fail(c, -EPROTO,
	                     "%s: mismatched calls: rank %d called %s(count=%llu, %s, %s, "
	                     "root=%d), rank %d called %s(count=%llu, %s, %s, root=%d)",
	                     fn, c->rank, shmcoll__kind_name(mine->kind),
	                     (unsigned long long)mine->count, shmcoll__dtype_name(mine->dtype),
	                     shmcoll__op_name(mine->op), mine->root, p, shmcoll__kind_name(k->kind),
	                     (unsigned long long)k->count, shmcoll__dtype_name(k->dtype),
	                     shmcoll__op_name(k->op), k->root);
}

static int same_call(const struct shmcoll_call *a, const struct shmcoll_call *b)
{
	return a->step == b->step && a->kind == b->kind && a->dtype == b->dtype && a->op == b->op &&
	       a->algo == b->algo && a->root == b->root && a->count == b->count;
}

void shmcoll__msg_publish(shmcoll_comm *c, const struct shmcoll_desc *d, const void *data,
                          size_t len)
{
	struct shmcoll_msg *m = shmcoll__msg(c, c->rank, d->step);

	m->len = (uint32_t)len;
	m->call = c->call;
	if (len)
		memcpy(m->data, data, len);
	/* Release: the call word and data are visible to whoever sees the
	 * stamp. seq follows without the call word, which an inline call keeps
	 * in its message only (shmcoll__check_rank looks there). */
	store_release(&m->stamp, d->step);
	shmcoll__publish_next(c, NULL);
}

const uint8_t *shmcoll__msg_wait(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *d,
                                 int p, int *rc)
{
	const struct shmcoll_msg *m = shmcoll__msg(c, p, d->step);
	int i;

	/* Spin on the message line itself: one transfer brings stamp, call
	 * word and data. With more ranks than CPUs, or after the spin budget,
	 * the ordinary wait on seq (yield, futex, timeout, abort) takes over;
	 * seq is published after the message, so the message is there then. */
	*rc = 0;
	for (i = c->waiter.oversubscribed ? 0 : SHMCOLL_MSG_SPINS; i > 0; i--) {
		if (load_relaxed(&m->stamp) == d->step)
			break;
		cpu_relax();
	}
	if (i == 0) {
		*rc = shmcoll__wait_rank(c, fn, p, d->step);
		if (*rc < 0)
			return NULL;
	}
	/* Acquire: pairs with the release of stamp in shmcoll__msg_publish(). */
	fence_acquire();
	/* A peer in another call published the step without this message
	 * (or with another call word): report it from its call word. */
	if (load_relaxed(&m->stamp) != d->step || !same_call(&c->call, &m->call)) {
		*rc = shmcoll__wait_rank(c, fn, p, d->step);
		if (*rc == 0)
			*rc = shmcoll__check_rank(c, fn, d, p, 0);
		if (*rc == 0)
			*rc = mismatch(c, fn, &c->call, p, &m->call);
		return NULL;
	}
	return m->data;
}

int shmcoll__msg_gather(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *d,
                        const uint8_t *send, uint8_t *recv, size_t bytes)
{
	const uint8_t *m;
	int p, rc;

	for (p = 0; p < c->size; p++) {
		uint8_t *block = recv + (size_t)p * bytes;

		if (p == c->rank) {
			if (send != block)
				memcpy(block, send, bytes);
			continue;
		}
		m = shmcoll__msg_wait(c, fn, d, p, &rc);
		if (!m)
			return rc;
		memcpy(block, m, bytes);
	}
	/* Every peer has begun this call: it has read all we wrote before. */
	c->clean = c->seq - 1;
	return 0;
}

int shmcoll__check_rank(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *mine, int p,
                        uint64_t src_bytes)
{
	const struct shmcoll_layout *l = &c->arena.lay;
	uint32_t par = mine->step & 1;
	const struct shmcoll_call *me = &c->call;
	const struct shmcoll_ctrl *pc = shmcoll__ctrl(&c->arena, (uint32_t)p);
	const struct shmcoll_call *k = &pc->call[par];
	const struct shmcoll_msg *m = shmcoll__msg(c, p, mine->step);
	uint64_t off;

	/* A rank in an inline call leaves its call words alone and describes
	 * the call in its message (shmcoll__msg_publish); it cannot have
	 * rewritten that slot since, as this rank has not passed the step. */
	if (k->step != mine->step && load_relaxed(&m->stamp) == mine->step)
		k = &m->call;
	if (p != c->rank && !same_call(me, k))
		return mismatch(c, fn, me, p, k);
	c->zc[p] = c->zr[p] = NULL;
	if (!k->zc)
		return 0;
	if (k->zc & 1) {
		off = pc->desc[par].src_off;
		if (off > l->heap_stride || src_bytes > l->heap_stride - off)
			goto outside;
		c->zc[p] = c->arena.base + l->heap_off + (uint64_t)p * l->heap_stride + off;
	}
	if (k->zc & 2) {
		off = pc->desc[par].res_off;
		if (off > l->heap_stride || src_bytes > l->heap_stride - off)
			goto outside;
		c->zr[p] = c->arena.base + l->heap_off + (uint64_t)p * l->heap_stride + off;
	}
	return 0;
outside:
	shmcoll__break(c, EPROTO);
	return shmcoll__fail(c, -EPROTO, "%s: rank %d described a buffer outside its heap", fn, p);
}

int shmcoll__check_peers(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *mine,
                         uint64_t src_bytes)
{
	int p, rc;

	for (p = 0; p < c->size; p++) {
		rc = shmcoll__check_rank(c, fn, mine, p, src_bytes);
		if (rc < 0)
			return rc;
	}
	return 0;
}

uint64_t shmcoll__heap_off(const shmcoll_comm *c, const void *buf, size_t bytes)
{
	uintptr_t b = (uintptr_t)buf, h = (uintptr_t)c->heap;
	uint64_t len = c->arena.lay.heap_stride;

	if (!buf || !bytes || b < h || b - h > len || bytes > len - (b - h))
		return NO_OFF;
	return (uint64_t)(b - h);
}

int shmcoll__step_from(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *d, int first,
                       uint64_t src_bytes, int from)
{
	int rc;

	shmcoll__publish_next(c, first ? d : NULL);
	if (from == STEP_NONE)
		return 0;
	if (from != STEP_ALL) {
		rc = shmcoll__wait_rank(c, fn, from, c->seq);
		if (rc == 0 && first)
			rc = shmcoll__check_rank(c, fn, d, from, src_bytes);
		return rc;
	}
	rc = wait_all(c, fn);
	if (rc == 0 && first)
		rc = shmcoll__check_peers(c, fn, d, src_bytes);
	return rc;
}

int shmcoll__chunk_step(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *d, int first,
                        uint64_t src_bytes)
{
	return shmcoll__step_from(c, fn, d, first, src_bytes, STEP_ALL);
}

int shmcoll__zc_release(shmcoll_comm *c, const char *fn, int skip)
{
	int p;

	for (p = 0; p < c->size; p++)
		if (p != skip && c->zc[p])
			return c->size > 1 ? shmcoll__step(c, fn) : 0;
	return 0;
}
