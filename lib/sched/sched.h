/* sched.h - the schedules of the collectives as pure functions of (rank, size, root, sizes):
 * who talks to whom in which round, and which elements each message covers. No I/O, no
 * shared memory, no state: the protocols (lib/coll, lib/hier) ask them, and
 * tests/test_sched.c checks them exhaustively apart from any transport. */
#ifndef SHMCOLL_SCHED_H
#define SHMCOLL_SCHED_H

#include <stddef.h>

/* The largest rank count any schedule is asked about (shm/arena.h: SHMCOLL_MAX_RANKS; the
 * leaders: lib/net/frame.h SHMCOLL_NODES_MAX). */
#define SHMCOLL_SCHED_MAX 1024

/* The smaller of two sizes: how every layer above cuts a vector into chunks. */
static inline size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* --- k-nomial tree (bcast, barrier on many ranks) ------------------------------------------
 * Ranks are renumbered relative to the root, v = (rank - root) mod P. The parent of v > 0
 * clears v's lowest non-zero base-k digit; v's children add one non-zero digit below that
 * one: v + j * k^l for j = 1..k-1 and every k^l under v's lowest non-zero digit, while below
 * P. With k = 2 this is the binomial tree; its depth is ceil(log_k P). Radix 4: depth log4(P),
 * at most 3 children per level, so a parent waits on few ranks and the release reaches 64
 * ranks in three hops. */
#define SHMCOLL_TREE_RADIX     4
#define SHMCOLL_TREE_DEPTH_MAX 5 /* 4^5 = SHMCOLL_SCHED_MAX */
/* A rank of the topology-aware tree (below) may lead at three levels, each a k-nomial tree
 * whose depth rounds its log up: over at most SHMCOLL_SCHED_MAX ranks the three depths add
 * up to at most SHMCOLL_TREE_DEPTH_MAX + 2 (5 x 5 x 17 ranks: 2 + 2 + 3). */
#define SHMCOLL_TREE_MAX_CHILDREN ((SHMCOLL_TREE_RADIX - 1) * (SHMCOLL_TREE_DEPTH_MAX + 2))

struct shmcoll_tree {
	int parent;    /* -1 at the root */
	int nchildren; /* children in the order they are listed: nearest subtree first */
	int children[SHMCOLL_TREE_MAX_CHILDREN];
};

/* rank's place in the k-nomial tree of size ranks rooted at root (all in range). */
void shmcoll__tree(int rank, int size, int root, struct shmcoll_tree *t);

/* --- topology-aware tree (bcast, barrier on many ranks across L3 domains and sockets) ------
 * A rank's place on the machine: its package (socket) and its L3 domain, -1 where unknown.
 * Two ranks share a domain when both ids are equal (an L3 id need not be unique across
 * packages). The hierarchical tree is three k-nomial trees (SHMCOLL_TREE_RADIX), each over a
 * list of ranks whose first is its root:
 *   - within each L3 domain, rooted at the domain's leader: root if it is in the domain, else
 *     the domain's lowest rank; the others follow in rank order;
 *   - over the domain leaders of each package, rooted at the package's leader: root in
 *     root's package, else the package's lowest rank; the other leaders follow in the order
 *     of their domains' lowest ranks;
 *   - over the package leaders, rooted at root; the others follow in rank order.
 * So each domain is one subtree entered by one edge, and packages - 1 edges cross packages.
 * A rank lists its children from the highest level down: in a release the longest hop
 * starts first. With any place unknown, or every rank in one domain, it is shmcoll__tree's
 * tree. Costs O(size x domains) time and a few KiB of stack: callers keep the result. */
struct shmcoll_place {
	int pkg; /* package id, or -1 */
	int l3;  /* L3 domain id, or -1 */
};

void shmcoll__tree_topo(int rank, int size, int root, const struct shmcoll_place *places,
                        struct shmcoll_tree *t);

/* A pretend machine (SHMCOLL_TOPOLOGY, e.g. "2x2x4"): packages x L3 domains per package x
 * ranks per domain, three whole numbers in 1..SHMCOLL_SCHED_MAX joined by 'x', nothing
 * else. Returns 0 with the layout in dims, or -1. */
int shmcoll__topo_parse(const char *spec, int dims[3]);

/* The place of rank in that layout: its index rank mod the layout's ranks, laid out package
 * by package and domain by domain (ranks beyond the layout wrap around to the first). */
struct shmcoll_place shmcoll__topo_place(const int dims[3], int rank);

/* --- segments and slices ------------------------------------------------------------------ */

/* Segment k of n over m elements, [*lo, *lo + *len): the n segments tile [0, m) in order and
 * differ in length by at most one. (The leaders' ring.) */
void shmcoll__segment(size_t m, int n, int k, size_t *lo, size_t *len);

/* The elements [*off, *off + *len) of slice q of chunk i when count elements are cut into
 * chunks of cn elements and each chunk into P slices of ceil(chunk / P) elements (the last
 * slices of a short chunk may be empty). (The direct reduce-scatter + allgather protocol.) */
void shmcoll__slice(size_t count, size_t cn, size_t P, size_t i, size_t q, size_t *off,
                    size_t *len);

/* Chunks of at most cap elements that count elements take (0 for count 0). */
static inline size_t shmcoll__nchunks(size_t count, size_t cap)
{
	return (count + cap - 1) / cap;
}

/* --- recursive doubling (the leaders' small allreduce) ------------------------------------
 * p2 is the largest power of two <= n. Members p2.. (the extras) first send their vector to
 * member - p2 and at the end receive the result from it; members below n - p2 first receive
 * and fold that extra vector. Then in round r = 0 .. rounds-1 each member below p2 exchanges
 * with member ^ (1 << r) and folds, the lower member's value first on both sides, so every
 * member ends with the same bits. */
struct shmcoll_rd {
	int p2;     /* the largest power of two <= n */
	int rounds; /* log2(p2): the exchange rounds of a member below p2, 0 for an extra */
	int extra;  /* the extra member this one folds in first and answers last, or -1; for an
	             * extra: its partner below p2 */
	int is_extra;
};

void shmcoll__rd_plan(int me, int n, struct shmcoll_rd *rd);

/* The partner of member me in round r of its plan. */
static inline int shmcoll__rd_peer(int me, int r)
{
	return me ^ (1 << r);
}

/* --- ring (the leaders' large allreduce, reduce-scatter and allgather) --------------------
 * Step s = 0 .. n-2 of member me: it sends to me + 1 and receives from me - 1 (mod n).
 * Reduce-scatter: it sends its partial of block (me - s - 1) and folds the received one into
 * block (me - s - 2); after n - 1 steps member me holds block me reduced over every member.
 * Allgather: it sends block (me - s) and receives block (me - s - 1); after n - 1 steps
 * every member has every block. Blocks are indices 0..n-1 (mod n). */
struct shmcoll_ring_step {
	int to, from;   /* neighbours */
	int send, recv; /* block indices */
};

void shmcoll__ring_rs(int me, int n, int s, struct shmcoll_ring_step *st);
void shmcoll__ring_ag(int me, int n, int s, struct shmcoll_ring_step *st);

/* --- dissemination barrier (the leaders) --------------------------------------------------
 * Round r = 0 .. ceil(log2 n) - 1: send to me + 2^r, receive from me - 2^r (mod n); after
 * round r every member has heard, directly or not, from the 2^(r+1) - 1 members before it. */
int shmcoll__dissem_rounds(int n);
void shmcoll__dissem_peers(int me, int n, int r, int *to, int *from);

#endif
