/* vops.c - what the collectives built on point-to-point messages share (gatherv.c,
 * scatterv.c): their operations, waiting for them with or without blocking, and telling a
 * count mismatch from the sizes of the messages that arrived. */
#include <errno.h>
#include <stdlib.h>

#include "lib/coll/coll.h"
#include "lib/coll/proto.h"

int shmcoll__vops_new(struct shmcoll_node *n, struct shmcoll_task *t, int nops)
{
	t->ops = calloc((size_t)nops, sizeof(*t->ops));
	if (t->ops)
		return 0;
	shmcoll__node_break(n, ENOMEM);
	return shmcoll__node_fail(n, -ENOMEM, "%s: out of memory for %d messages", t->fn, nops);
}

static int end(struct shmcoll_task *t, int rc)
{
	free(t->ops);
	t->ops = NULL;
	return rc;
}

int shmcoll__vops_finish(struct shmcoll_node *n, struct shmcoll_task *t, int nops,
                         const size_t *expect)
{
	struct shmcoll_p2p_op *op;
	int i, done, rc = 0;

	for (i = 0; i < nops; i++) {
		op = &t->ops[i];
		if (!op->kind)
			continue; /* this rank's own block: never a message */
		if (t->head.blocking) {
			shmcoll__p2p_wait(n, op);
		} else {
			shmcoll__p2p_test(n, op, &done);
			if (!done)
				return SHMCOLL_PENDING; /* the caller records where it resumes */
		}
	}
	/* The first failure in rank order; a truncated or short message is a mismatch. */
	for (i = 0; i < nops && !rc; i++) {
		op = &t->ops[i];
		if (!op->kind)
			continue;
		if (op->head.rc < 0 && op->head.rc != -EMSGSIZE)
			rc = op->head.rc;
		else if (expect && op->total != expect[i] * t->es) {
			shmcoll__node_break(n, EPROTO);
			rc = shmcoll__node_fail(
			    n, -EPROTO,
			    "%s: mismatched counts: rank %d sent %llu bytes, rank %d expected %zu "
			    "elements of %zu bytes",
			    t->fn, op->src, (unsigned long long)op->total, n->rank, expect[i],
			    t->es);
			shmcoll__p2p_fail_all(n, -EPROTO);
		}
	}
	return end(t, rc);
}

int shmcoll__node_run(struct shmcoll_node *n, struct shmcoll_task *t)
{
	return shmcoll__task_run(n, t);
}
