/* reduce.c - the root gets op over all ranks' vectors.
 *
 * The direct protocol (direct.c) is also available: every rank reduces 1/P of
 * the vector and the root gathers the slices, so the reduction work is
 * spread over all ranks instead of falling on the root. It only pays from
 * 64 MiB (below, see DIRECT_MIN_BYTES).
 *
 * Flat protocol, for each chunk of at most slot_half bytes:
 *   1. Each rank other than the root copies its chunk into its staging half
 *      for this step and publishes it without waiting for anyone. The root
 *      reads its own sendbuf directly, staging it only when in place
 *      (sendbuf == recvbuf).
 *   2. The root publishes the step, waits for every peer's (checking their
 *      call words on the first chunk) and reduces all ranks' chunks in rank
 *      order into recvbuf.
 *   A rank waits only before it rewrites a half (shmcoll__guard), so
 *   back-to-back reductions overlap by one call. Small vectors only: the
 *   root is read from staging, never in place, so no rank needs to learn
 *   whether another was read in place. */
#include <errno.h>
#include <string.h>

#include "lib/hier.h"
#include "lib/internal.h"

/* The direct protocol is the default from this size on. Measured at P = 2-4
 * (docs/BENCHMARKS.md), the flat one wins at every size up to 32 MiB: its
 * non-roots stage and leave, so their copies overlap the root's reduction,
 * while the direct protocol adds a copy per slice. */
#define DIRECT_MIN_BYTES ((size_t)64 << 20)

/* Flat with the payload inline: non-roots publish their message and leave;
 * the root folds every message (its own vector straight from sendbuf). */
static int reduce_inline(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d,
                         const uint8_t *send, uint8_t *recv, size_t count, size_t es,
                         shmcoll__reduce_fn reduce, int root)
{
	int p, rc;

	if (c->rank != root) {
		shmcoll__msg_publish(c, d, send, count * es);
		return 0;
	}
	shmcoll__msg_publish(c, d, NULL, 0);
	for (p = 0; p < c->size; p++) {
		c->srcs[p] = p == root ? send : shmcoll__msg_wait(c, fn, d, p, &rc);
		if (!c->srcs[p])
			return rc;
	}
	c->clean = c->seq - 1;
	if (send != recv) {
		reduce(recv, c->srcs, c->size, count);
		return 0;
	}
	/* In place: the kernel's dst may not be one of its sources. */
	{
		uint8_t tmp[SHMCOLL_INLINE_MAX];

		memcpy(tmp, send, count * es);
		c->srcs[root] = tmp;
		reduce(recv, c->srcs, c->size, count);
	}
	return 0;
}

static int reduce_flat(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d, const uint8_t *send,
                       uint8_t *recv, size_t count, size_t es, shmcoll__reduce_fn reduce, int root)
{
	size_t cap = shmcoll__chunk_elems(c, es, 1), done, n;
	int p, rc, is_root = c->rank == root, inplace = is_root && send == recv;

	for (done = 0; done < count; done += n) {
		uint32_t step = c->seq + 1;

		n = min_size(cap, count - done);
		if (!is_root || inplace) {
			if ((rc = shmcoll__guard(c, fn)) < 0)
				return rc;
			memcpy(shmcoll__slot(c, c->rank, step), send + done * es, n * es);
		}
		rc = shmcoll__step_from(c, fn, d, done == 0, count * es,
		                        is_root ? STEP_ALL : STEP_NONE);
		if (rc < 0)
			return rc;
		if (!is_root)
			continue;
		for (p = 0; p < c->size; p++)
			c->srcs[p] = shmcoll__slot(c, p, step);
		if (!inplace)
			c->srcs[root] = send + done * es;
		reduce(recv + done * es, c->srcs, c->size, n);
	}
	return 0;
}

int shmcoll_reduce(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                   shmcoll_op op, int root, shmcoll_comm *c)
{
	const char *fn = "shmcoll_reduce";
	const uint8_t *send = sendbuf;
	uint8_t *recv = recvbuf;
	struct shmcoll_desc *d;
	size_t bytes, es;
	int rc, is_root, algo;

	if (!c)
		return -EINVAL;
	rc = shmcoll__check_type(c, fn, dtype, count, 1, &bytes);
	if (!rc)
		rc = shmcoll__check_op(c, fn, dtype, op);
	if (!rc)
		rc = shmcoll__check_root(c, fn, root);
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "sendbuf", sendbuf, bytes);
	is_root = c->rank == root;
	if (!rc && is_root)
		rc = shmcoll__check_buf(c, fn, "recvbuf", recvbuf, bytes);
	if (!rc && is_root)
		rc = shmcoll__check_overlap(c, fn, sendbuf, bytes, recvbuf, bytes, recvbuf);
	if (!rc)
		rc = shmcoll__enter(c, fn);
	if (rc || !count)
		return rc;
	if (c->hier)
		return shmcoll__hier_reduce(c, send, recv, count, dtype, op, root);

	es = shmcoll_dtype_size(dtype);
	algo = shmcoll__algo_reduction(c, KIND_REDUCE, bytes, es, DIRECT_MIN_BYTES);
	if (shmcoll__inline(c, algo, bytes)) {
		rc = shmcoll__begin_msg(c, fn, KIND_REDUCE, dtype, op, root, count, &d);
		return rc < 0 ? rc
		              : reduce_inline(c, fn, d, send, recv, count, es,
		                              shmcoll__reduce_lookup(dtype, op), root);
	}
	rc = shmcoll__begin(c, fn, KIND_REDUCE, dtype, op, root, count, &d);
	if (rc < 0)
		return rc;
	shmcoll__call(c)->algo = (uint8_t)algo;
	if (algo == ALGO_FLAT)
		return reduce_flat(c, fn, d, send, recv, count, es,
		                   shmcoll__reduce_lookup(dtype, op), root);
	/* Peers read this rank's sendbuf in place unless the root reduces into
	 * it; a non-root rank's recvbuf is never touched. */
	if (!is_root || send != recv)
		d->src_off = shmcoll__heap_off(c, send, bytes);
	return shmcoll__reduce_direct(c, fn, d, send, recv, count, es,
	                              shmcoll__reduce_lookup(dtype, op), root);
}
