/* solo.c - a communicator of one rank: every collective is a copy of the caller's own block
 * to where it goes (nothing for bcast, barrier and exscan), made without the step engine.
 * The step engine would stage it, publish a step no one reads and copy it again: 94 ns for
 * an 8-byte allreduce and 66 us for 1 MiB, against a memcpy. */
#include <string.h>

#include "lib/coll/coll.h"

static int solo(struct shmcoll_node *n, struct shmcoll_task *t)
{
	const uint8_t *from = t->send;
	uint8_t *to = t->recv;
	size_t es = t->es, bytes;

	(void)n;
	switch (t->kind) {
	case KIND_ALLREDUCE:
	case KIND_REDUCE:
	case KIND_ALLGATHER:
	case KIND_REDUCE_SCATTER:
	case KIND_GATHER:
	case KIND_SCATTER:
	case KIND_ALLTOALL:
	case KIND_SCAN:
		bytes = t->count * es;
		break;
	case KIND_ALLGATHERV:
	case KIND_GATHERV:
		to += t->rdispls[0] * es;
		bytes = t->scount * es;
		break;
	case KIND_SCATTERV:
		from += t->sdispls[0] * es;
		bytes = t->scount * es;
		break;
	case KIND_ALLTOALLV:
		from += t->sdispls[0] * es;
		to += t->rdispls[0] * es;
		bytes = t->scounts[0] * es;
		break;
	case KIND_REDUCE_SCATTERV:
		bytes = t->rcounts[0] * es;
		break;
	default: /* barrier, bcast, exscan: rank 0 of one gets nothing */
		return 0;
	}
	/* The in-place forms all come to from == to with one rank; other overlaps the entry
	 * refused. */
	if (bytes && from != to)
		memcpy(to, from, bytes);
	return 0;
}

int shmcoll__alone(const struct shmcoll_node *n, struct shmcoll_task *t)
{
	if (n->size != 1)
		return 0;
	t->advance = solo;
	return 1;
}
