/* probe.c - the tests' and benchmarks' view inside a communicator (probe.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/api/api.h"
#include "lib/api/probe.h"
#include "lib/coll/coll.h"
#include "lib/core/algo.h"
#include "lib/core/heap.h"
#include "lib/core/node.h"
#include "lib/hier/hier.h"

static struct shmcoll_node *probe_node(shmcoll_comm *c)
{
	return c->local;
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

const char *shmcoll__probe_choice(shmcoll_comm *c, const char *collective, size_t bytes)
{
	const struct shmcoll_node *n = probe_node(c);
	int k = shmcoll__kind_lookup(collective, strlen(collective));

	switch (k) {
	case KIND_ALLREDUCE:
		return shmcoll__algo_name(
		    (uint32_t)shmcoll__algo_reduction(n, KIND_ALLREDUCE, bytes, sizeof(double)));
	case KIND_REDUCE:
		return shmcoll__algo_name(
		    (uint32_t)shmcoll__algo_reduction(n, KIND_REDUCE, bytes, sizeof(double)));
	case KIND_BARRIER:
	case KIND_BCAST:
		return shmcoll__algo_name(
		    (uint32_t)shmcoll__algo_tree(n, (uint32_t)k, SHMCOLL_TREE_MIN_RANKS));
	default:
		return "unknown";
	}
}

size_t shmcoll__probe_cma_min(shmcoll_comm *c)
{
	return probe_node(c)->cma.min;
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

	return shmcoll__heap_peer(n, p, shmcoll__heap_off(n, mine, 1), 1);
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
	shmcoll__kinds[kind].init(c->u.node, &call->node,
	                          &(const struct shmcoll_args){.kind = (uint32_t)kind,
	                                                       .fn = collective,
	                                                       .send = send,
	                                                       .recv = recv,
	                                                       .count = count,
	                                                       .dt = dt,
	                                                       .op = op,
	                                                       .root = root});
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
	return *done ? call->node.head.rc : 0;
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

/* A two-rank communicator in private memory (nothing shared, no peer): rank me's view, the
 * other rank a fiction whose words the caller writes. */
struct fake {
	struct shmcoll_node n;
	uint8_t *mem;
};

static int fake_open(struct fake *f, int me)
{
	struct shmcoll_layout lay;
	char err[160];

	memset(f, 0, sizeof(*f));
	if (shmcoll__arena_layout(2, 256 * 1024, &lay, err, sizeof(err)) < 0)
		return -EINVAL;
	f->mem = aligned_alloc(4096, (lay.total_bytes + 4095) / 4096 * 4096);
	if (!f->mem)
		return -ENOMEM;
	memset(f->mem, 0, lay.total_bytes);
	f->n.rank = me;
	f->n.size = 2;
	f->n.arena.base = f->mem;
	f->n.arena.bytes = lay.total_bytes;
	f->n.arena.hdr = (struct shmcoll_arena_hdr *)f->mem;
	f->n.arena.lay = lay;
	f->n.arena.nranks = 2;
	f->n.st.me = shmcoll__ctrl(&f->n.arena, (uint32_t)me);
	/* The fiction is another process, so nothing is read at an address it names. */
	f->n.st.me->proc.pid = (int32_t)getpid();
	shmcoll__ctrl(&f->n.arena, (uint32_t)!me)->proc.pid = (int32_t)getpid() + 1;
	shmcoll__task_queue_init(&f->n);
	f->n.waiter.timeout_ns = -1;
	f->n.waiter.abort_word = &f->n.arena.hdr->aborted;
	if (shmcoll__p2p_init(&f->n, err, sizeof(err)) < 0) {
		free(f->mem);
		return -ENOMEM;
	}
	if (shmcoll__heap_init(&f->n) < 0) {
		shmcoll__p2p_fini(&f->n);
		free(f->mem);
		return -ENOMEM;
	}
	return 0;
}

static void fake_close(struct fake *f)
{
	shmcoll__p2p_fail_all(&f->n, -ECANCELED);
	shmcoll__p2p_fini(&f->n);
	shmcoll__heap_fini(&f->n);
	free(f->mem);
}

int shmcoll__probe_p2p_fuzz(const uint8_t *data, size_t len, size_t *ring_bytes)
{
	static uint8_t big[1 << 17], small[64], none[1], sendbuf[100000];
	struct shmcoll_p2p_op r[4], s[2];
	struct fake f;
	uint32_t head = 0, tail = 0, cap;
	uint8_t flags = len ? data[0] : 0;
	int rc, i;

	rc = fake_open(&f, 0);
	if (rc < 0)
		return rc;
	cap = (uint32_t)f.n.arena.lay.ring_bytes;
	if (ring_bytes)
		*ring_bytes = cap;
	if (len > 1)
		memcpy(&head, data + 1, len - 1 < 4 ? len - 1 : 4);
	if (len > 5)
		memcpy(&tail, data + 5, len - 5 < 4 ? len - 5 : 4);
	if (len > 9)
		memcpy(shmcoll__ring(&f.n.arena, 1, 0), data + 9, len - 9 < cap ? len - 9 : cap);
	/* The blocking receive's short cut first (it looks only while nothing is outstanding),
	 * then receives of each kind, as flags says: a specific source and tag, wildcards, a
	 * capacity of nothing, one large enough for a streamed message. */
	if (flags & 16)
		shmcoll__p2p_recv_fast(&f.n, &r[0], small, sizeof(small), 1,
		                       flags & 32 ? P2P_ANY : 3);
	if (flags & 1)
		shmcoll__p2p_irecv(&f.n, &r[0], "fuzz", small, sizeof(small), 1, 3, P2P_CTX_USER);
	if (flags & 2)
		shmcoll__p2p_irecv(&f.n, &r[1], "fuzz", big, sizeof(big), P2P_ANY, P2P_ANY,
		                   P2P_CTX_USER);
	if (flags & 4)
		shmcoll__p2p_irecv(&f.n, &r[2], "fuzz", none, 0, 1, P2P_ANY, P2P_CTX_USER);
	if (flags & 8)
		shmcoll__p2p_irecv(&f.n, &r[3], "fuzz", big, sizeof(big), P2P_ANY, 7, P2P_CTX_COLL);
	/* Sends whose replies (clear-to-send, finish) the fiction may name: ids 1 and 2. */
	shmcoll__p2p_isend(&f.n, &s[0], "fuzz", sendbuf, sizeof(sendbuf), 1, 5, P2P_CTX_USER);
	shmcoll__p2p_isend(&f.n, &s[1], "fuzz", sendbuf, 10, 1, 6, P2P_CTX_USER);
	store_release(shmcoll__ring_tail(&f.n.arena, 0, 1), tail);
	store_release(shmcoll__ring_head(&f.n.arena, 1, 0), head);
	for (i = 0; i < 2; i++)
		shmcoll__node_progress(&f.n);
	rc = load_relaxed(&f.n.broken) ? -(int)load_relaxed(&f.n.broken) : 0;
	fake_close(&f);
	return rc;
}

size_t shmcoll__probe_p2p_seed(int which, uint8_t *out, size_t cap)
{
	static uint8_t buf[100000];
	struct shmcoll_p2p_op s[4];
	struct fake f;
	uint32_t head, ring;
	size_t len = 0;

	if (which < 0 || which > 3 || fake_open(&f, 1) < 0)
		return 0;
	memset(buf, 0x5a, sizeof(buf));
	ring = (uint32_t)f.n.arena.lay.ring_bytes;
	switch (which) {
	case 0: /* eager messages of several sizes and tags */
		shmcoll__p2p_isend(&f.n, &s[0], "seed", buf, 8, 0, 3, P2P_CTX_USER);
		shmcoll__p2p_isend(&f.n, &s[1], "seed", buf, 100, 0, 7, P2P_CTX_USER);
		shmcoll__p2p_isend(&f.n, &s[2], "seed", buf, 0, 0, 1, P2P_CTX_USER);
		break;
	case 1: /* a request to send */
		shmcoll__p2p_isend(&f.n, &s[0], "seed", buf, sizeof(buf), 0, 4, P2P_CTX_USER);
		break;
	case 2: /* a collective's message, then a user's */
		shmcoll__p2p_isend(&f.n, &s[0], "seed", buf, 40, 0, 7, P2P_CTX_COLL);
		shmcoll__p2p_isend(&f.n, &s[1], "seed", buf, 40, 0, 3, P2P_CTX_USER);
		break;
	default: /* a request to send answered: its data streamed after a clear-to-send */
		shmcoll__p2p_irecv(&f.n, &s[0], "seed", buf, sizeof(buf), 0, 5, P2P_CTX_USER);
		shmcoll__p2p_isend(&f.n, &s[1], "seed", buf, 30, 0, 6, P2P_CTX_USER);
		break;
	}
	head = f.n.p2p.peers[0].head;
	if (cap >= 9 + (head < ring ? head : ring)) {
		out[0] = 0xf;
		memcpy(out + 1, &head, 4);
		memset(out + 5, 0, 4);
		memcpy(out + 9, shmcoll__ring(&f.n.arena, 1, 0), head < ring ? head : ring);
		len = 9 + (head < ring ? head : ring);
	}
	fake_close(&f);
	return len;
}
