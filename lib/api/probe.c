/* probe.c - the tests' and benchmarks' view inside a communicator (probe.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/api/api.h"
#include "lib/api/probe.h"
#include "lib/coll/coll.h"
#include "lib/core/heap.h"
#include "lib/core/node.h"
#include "lib/hier/hier.h"

static struct shmcoll_node *probe_node(shmcoll_comm *c)
{
	return c->kind == COMM_HIER ? shmcoll__hier_local(c->u.hier) : c->u.node;
}

uint32_t shmcoll__probe_my_step(shmcoll_comm *c)
{
	return probe_node(c)->st.seq;
}

void shmcoll__probe_jump_steps(shmcoll_comm *c, uint32_t seq)
{
	struct shmcoll_node *n = probe_node(c);

	/* Everything this rank wrote has been read (no call is running): clean as of now. */
	n->st.seq = seq;
	n->st.clean = seq;
	store_release(&n->st.me->seq, seq);
}

uint32_t shmcoll__probe_step(shmcoll_comm *c, int p)
{
	struct shmcoll_node *n = probe_node(c);

	return load_acquire(&shmcoll__ctrl(&n->arena, (uint32_t)p)->seq);
}

int shmcoll__probe_pid(shmcoll_comm *c, int p)
{
	struct shmcoll_node *n = probe_node(c);

	return (int)shmcoll__ctrl(&n->arena, (uint32_t)p)->proc.pid;
}

int shmcoll__probe_set_algo(shmcoll_comm *c, const char *spec)
{
	char err[128];

	return shmcoll__algo_parse(probe_node(c)->tune.algo, spec, err, sizeof(err));
}

const char *shmcoll__probe_algo(shmcoll_comm *c, const char *collective)
{
	int k = shmcoll__kind_lookup(collective, strlen(collective));

	return k < 0 ? "unknown" : shmcoll__algo_name(probe_node(c)->tune.algo[k]);
}

size_t shmcoll__probe_chunk_bytes(shmcoll_comm *c)
{
	return probe_node(c)->tune.chunk_bytes;
}

int shmcoll__probe_cma(shmcoll_comm *c)
{
	return probe_node(c)->cma.ok;
}

size_t shmcoll__probe_heap_bytes(shmcoll_comm *c)
{
	return (size_t)probe_node(c)->heap.bytes;
}

size_t shmcoll__probe_heap_blocks(shmcoll_comm *c)
{
	return probe_node(c)->heap.nblocks;
}

uint64_t shmcoll__probe_heap_off(shmcoll_comm *c, const void *ptr)
{
	return shmcoll__heap_off(probe_node(c), ptr, 1);
}

void *shmcoll__probe_peer(shmcoll_comm *c, const void *mine, int p)
{
	struct shmcoll_node *n = probe_node(c);

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

struct shmcoll_probe_call {
	struct shmcoll_task node; /* on a node communicator */
	struct hier_task *hier;   /* on one over several nodes */
};

struct shmcoll_probe_call *shmcoll__probe_start(shmcoll_comm *c, const char *collective,
                                                const void *send, void *recv, size_t count,
                                                shmcoll_dtype dt, shmcoll_op op, int root)
{
	struct shmcoll_probe_call *call;
	int kind = shmcoll__kind_lookup(collective, strlen(collective));

	if (kind < KIND_BARRIER || kind > KIND_ALLTOALL)
		return NULL;
	call = calloc(1, sizeof(*call));
	if (!call)
		return NULL;
	if (c->kind == COMM_HIER) {
		call->hier =
		    shmcoll__hier_call_new(c->u.hier, kind, send, recv, count, dt, op, root);
		if (!call->hier) {
			free(call);
			return NULL;
		}
		shmcoll__hier_start(c->u.hier, call->hier);
		return call;
	}
	shmcoll__coll_init(c->u.node, &call->node, kind, send, recv, count, dt, op, root);
	shmcoll__task_start(c->u.node, &call->node);
	return call;
}

int shmcoll__probe_test(shmcoll_comm *c, struct shmcoll_probe_call *call, int *done)
{
	if (c->kind == COMM_HIER) {
		shmcoll__hier_test(c->u.hier, call->hier, done);
		return *done ? shmcoll__hier_result(call->hier) : 0;
	}
	shmcoll__task_test(c->u.node, &call->node, done);
	return *done ? call->node.rc : 0;
}

int shmcoll__probe_wait(shmcoll_comm *c, struct shmcoll_probe_call *call)
{
	if (c->kind == COMM_HIER)
		return shmcoll__hier_wait(c->u.hier, call->hier);
	return shmcoll__task_wait(c->u.node, &call->node);
}

void shmcoll__probe_free(struct shmcoll_probe_call *call)
{
	if (call)
		shmcoll__hier_call_free(call->hier);
	free(call);
}
