/* probe.c - the tests' and benchmarks' view inside a communicator (probe.h). */
#include <errno.h>
#include <string.h>

#include "lib/api/api.h"
#include "lib/api/probe.h"
#include "lib/core/heap.h"
#include "lib/core/node.h"
#include "lib/hier/hier.h"

struct shmcoll_node *shmcoll__probe_node(shmcoll_comm *c)
{
	return c->kind == COMM_HIER ? shmcoll__hier_local(c->u.hier) : c->u.node;
}

uint32_t shmcoll__probe_my_step(shmcoll_comm *c)
{
	return shmcoll__probe_node(c)->st.seq;
}

uint32_t shmcoll__probe_step(shmcoll_comm *c, int p)
{
	struct shmcoll_node *n = shmcoll__probe_node(c);

	return load_acquire(&shmcoll__ctrl(&n->arena, (uint32_t)p)->seq);
}

int shmcoll__probe_pid(shmcoll_comm *c, int p)
{
	struct shmcoll_node *n = shmcoll__probe_node(c);

	return (int)shmcoll__ctrl(&n->arena, (uint32_t)p)->proc.pid;
}

int shmcoll__probe_set_algo(shmcoll_comm *c, const char *spec)
{
	char err[128];

	return shmcoll__algo_parse(shmcoll__probe_node(c)->tune.algo, spec, err, sizeof(err));
}

const char *shmcoll__probe_algo(shmcoll_comm *c, const char *collective)
{
	struct shmcoll_node *n = shmcoll__probe_node(c);
	uint32_t k;

	for (k = 1; k < KIND_COUNT; k++)
		if (!strcmp(shmcoll__kind_name(k), collective))
			return shmcoll__algo_name(n->tune.algo[k]);
	return "unknown";
}

size_t shmcoll__probe_chunk_bytes(shmcoll_comm *c)
{
	return shmcoll__probe_node(c)->tune.chunk_bytes;
}

int shmcoll__probe_cma(shmcoll_comm *c)
{
	return shmcoll__probe_node(c)->cma.ok;
}

size_t shmcoll__probe_heap_bytes(shmcoll_comm *c)
{
	return (size_t)shmcoll__probe_node(c)->heap.bytes;
}

size_t shmcoll__probe_heap_blocks(shmcoll_comm *c)
{
	return shmcoll__probe_node(c)->heap.nblocks;
}

uint64_t shmcoll__probe_heap_off(shmcoll_comm *c, const void *ptr)
{
	return shmcoll__heap_off(shmcoll__probe_node(c), ptr, 1);
}

void *shmcoll__probe_peer(shmcoll_comm *c, const void *mine, int p)
{
	struct shmcoll_node *n = shmcoll__probe_node(c);

	return shmcoll__heap_of(n, p) + ((const uint8_t *)mine - n->heap.base);
}

const char *shmcoll__probe_transport(shmcoll_comm *c)
{
	return c->kind == COMM_HIER ? shmcoll__hier_transport(c->u.hier) : NULL;
}

size_t shmcoll__probe_hier_chunk_bytes(void)
{
	return SHMCOLL_HIER_CHUNK_BYTES;
}
