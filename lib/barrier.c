/* barrier.c - no rank leaves before every rank has entered.
 *
 * Protocol: one step. Each rank publishes it and waits until every peer has
 * published it, i.e. entered the barrier; the descriptors are checked so a
 * barrier matched with another collective fails with -EPROTO. */
#include <errno.h>

#include "lib/internal.h"

int shmcoll_barrier(shmcoll_comm *c)
{
	const char *fn = "shmcoll_barrier";
	struct shmcoll_desc *d;
	int rc;

	if (!c)
		return -EINVAL;
	rc = shmcoll__enter(c, fn);
	if (rc < 0)
		return rc;
	d = shmcoll__desc_begin(c, KIND_BARRIER, SHMCOLL_UINT8, SHMCOLL_SUM, -1, 0);
	return shmcoll__chunk_step(c, fn, d, 1, 0);
}
