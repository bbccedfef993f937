/* bcast.c - every rank gets the root's vector.
 *
 * Protocol, for each chunk of at most slot_half bytes:
 *   1. The root copies its chunk into its staging half for this step, unless
 *      buf is in its symmetric heap (then the others read it in place).
 *   2. Every rank publishes the step and waits for every peer's; the first
 *      chunk checks the peers' descriptors.
 *   3. Every other rank copies the root's chunk into its buf.
 *   Halves are reused two steps later as in allreduce.c; a final step when
 *   the root was read in place keeps it from returning while a rank reads. */
#include <errno.h>
#include <string.h>

#include "lib/internal.h"

int shmcoll_bcast(void *buf, size_t count, shmcoll_dtype dtype, int root, shmcoll_comm *c)
{
	const char *fn = "shmcoll_bcast";
	uint8_t *b = buf;
	struct shmcoll_desc *d;
	size_t bytes, es, cap, done, n;
	int rc, is_root;

	if (!c)
		return -EINVAL;
	rc = shmcoll__check_type(c, fn, dtype, count, 1, &bytes);
	if (!rc)
		rc = shmcoll__check_root(c, fn, root);
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "buf", buf, bytes);
	if (!rc)
		rc = shmcoll__enter(c, fn);
	if (rc || !count)
		return rc;

	es = shmcoll_dtype_size(dtype);
	cap = shmcoll__chunk_elems(c, es, 1);
	is_root = c->rank == root;
	d = shmcoll__desc_begin(c, KIND_BCAST, dtype, SHMCOLL_SUM, root, count);
	if (is_root)
		d->src_off = shmcoll__heap_off(c, b, bytes);
	for (done = 0; done < count; done += n) {
		uint32_t step = c->seq + 1;

		n = min_size(cap, count - done);
		if (is_root && d->src_off == NO_OFF)
			memcpy(shmcoll__slot(c, c->rank, step), b + done * es, n * es);
		rc = shmcoll__chunk_step(c, fn, d, done == 0, bytes);
		if (rc < 0)
			return rc;
		if (!is_root)
			memcpy(b + done * es,
			       c->zc[root] ? c->zc[root] + done * es : shmcoll__slot(c, root, step),
			       n * es);
	}
	return shmcoll__zc_release(c, fn, -1);
}
