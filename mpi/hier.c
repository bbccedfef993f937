/* hier.c - the collectives of a communicator that spans nodes. Each *_multi runs the shmcoll
 * part of one blocking collective after its wrapper decided the path and prepared the
 * buffers. Where the nodes are of one size, lib/hier composes them (st->wide, lead.c: shmcoll
 * in each node, PMPI as its leaders' transport): the four whose ranks' order does not
 * matter (allreduce, reduce, bcast, barrier) always, the five that move blocks by rank
 * (allgather, reduce_scatter_block, gather, scatter, alltoall) where node order is rank order
 * (ordered), as lib/hier's ranks are node-major. The rest is composed here, shmcoll inside
 * each node and PMPI's collectives among the nodes' leaders: nodes of different sizes, the
 * block calls over interleaved nodes (lib/hier has no rank map), and the variable-count calls
 * (whose leaders' counts are PMPI's v-collectives', or, in gatherv and scatterv, known to the
 * root only, which lib/hier's forms, padding every block to the largest, would not keep). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/shmcoll_mpi.h"

/* Reduce to each node's leader, allreduce among leaders, bcast in the node. */
int allreduce_multi(struct cstate *st, const void *in, void *out, int count, MPI_Datatype dt,
                    MPI_Op op, shmcoll_dtype sdt, shmcoll_op sop)
{
	int rc;

	if (st->wide)
		return shm_done(st, C_ALLREDUCE, "shmcoll_allreduce",
		                shmcoll_allreduce(in, out, (size_t)count, sdt, sop, st->wide));
	rc = shmcoll_reduce(in, st->lrank == 0 ? out : NULL, (size_t)count, sdt, sop, 0, st->shm);
	if (rc < 0)
		return fail(st, C_ALLREDUCE, "shmcoll_reduce", rc);
	if (st->lrank == 0) {
		rc = PMPI_Allreduce(MPI_IN_PLACE, out, count, dt, op, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_ALLREDUCE, "MPI_Allreduce among leaders", rc);
	}
	rc = shmcoll_bcast(out, (size_t)count, sdt, 0, st->shm);
	return shm_done(st, C_ALLREDUCE, "shmcoll_bcast", rc);
}

/* Reduce to each node's leader, reduce among leaders to the root's node's
 * leader, then, if the root is not that leader, one message from it to the
 * root. A leader's partial result goes to scratch, and the leaders' reduce
 * is not in place: MPICH 4.0.2's MPI_Reduce with MPI_IN_PLACE at a root
 * other than 0 reads MPI_IN_PLACE as a buffer from about 2 KiB on
 * (MPIR_CVAR_REDUCE_DEVICE_COLLECTIVE=0 avoids it). in is the root's recvbuf
 * when it reduces in place. */
int reduce_multi(struct cstate *st, const void *in, void *out, int count, MPI_Datatype dt,
                 MPI_Op op, shmcoll_dtype sdt, shmcoll_op sop, int root, size_t bytes)
{
	int rnode = st->node_of[root], rlocal = st->lrank_of[root], rc = MPI_SUCCESS;
	char *part = NULL, *dst = NULL;

	if (st->wide)
		return shm_done(st, C_REDUCE, "shmcoll_reduce",
		                shmcoll_reduce(in, out, (size_t)count, sdt, sop,
		                               wide_rank(st, root), st->wide));
	if (st->lrank == 0) {
		/* The root's node's leader needs a second buffer unless it is the root. */
		part = scratch(st, 0, st->my_node == rnode && rlocal != 0 ? 2 * bytes : bytes);
		if (!part)
			return fail(st, C_REDUCE, "scratch buffer", MPI_ERR_NO_MEM);
		if (st->my_node == rnode)
			dst = rlocal == 0 ? out : part + bytes;
	}
	rc = shmcoll_reduce(in, part, (size_t)count, sdt, sop, 0, st->shm);
	if (rc < 0)
		return fail(st, C_REDUCE, "shmcoll_reduce", rc);
	if (st->lrank == 0) {
		rc = PMPI_Reduce(part, dst, count, dt, op, rnode, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_REDUCE, "MPI_Reduce among leaders", rc);
	}
	if (st->my_node == rnode && rlocal != 0) {
		if (st->lrank == 0)
			rc = PMPI_Send(dst, count, dt, rlocal, 0, st->node);
		else if (st->rank == root)
			rc = PMPI_Recv(out, count, dt, 0, 0, st->node, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return fail(st, C_REDUCE, "leader to root", rc);
	}
	return via_shm(C_REDUCE);
}

/* The root's node first (everyone there, its leader included, gets the
 * data from the root), then the leaders (as bytes, in pieces of at most
 * INT_MAX: each leader may hold them packed or as its own type), then
 * every other node. */
int bcast_multi(struct cstate *st, void *buf, int root, size_t bytes)
{
	int rnode = st->node_of[root], rc = MPI_SUCCESS;
	size_t at, k;

	if (st->wide)
		return shm_done(
		    st, C_BCAST, "shmcoll_bcast",
		    shmcoll_bcast(buf, bytes, SHMCOLL_UINT8, wide_rank(st, root), st->wide));
	if (st->my_node == rnode) {
		rc = shmcoll_bcast(buf, bytes, SHMCOLL_UINT8, st->lrank_of[root], st->shm);
		if (rc < 0)
			return fail(st, C_BCAST, "shmcoll_bcast", rc);
	}
	if (st->lrank == 0) {
		for (at = 0; at < bytes && rc == MPI_SUCCESS; at += k) {
			k = bytes - at < INT_MAX ? bytes - at : INT_MAX;
			rc = PMPI_Bcast((char *)buf + at, (int)k, MPI_BYTE, rnode, st->leaders);
		}
		if (rc != MPI_SUCCESS)
			return fail(st, C_BCAST, "MPI_Bcast among leaders", rc);
	}
	if (st->my_node == rnode)
		return via_shm(C_BCAST);
	rc = shmcoll_bcast(buf, bytes, SHMCOLL_UINT8, 0, st->shm);
	return shm_done(st, C_BCAST, "shmcoll_bcast", rc);
}

/* Nobody leaves the second node barrier before its leader left the
 * leaders' barrier, which no leader leaves before every node's first. */
int barrier_multi(struct cstate *st)
{
	int rc;

	if (st->wide)
		return shm_done(st, C_BARRIER, "shmcoll_barrier", shmcoll_barrier(st->wide));
	rc = shmcoll_barrier(st->shm);
	if (rc < 0)
		return fail(st, C_BARRIER, "shmcoll_barrier", rc);
	if (st->lrank == 0) {
		rc = PMPI_Barrier(st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_BARRIER, "MPI_Barrier among leaders", rc);
	}
	return shm_done(st, C_BARRIER, "shmcoll_barrier", shmcoll_barrier(st->shm));
}

/* The other five move whole node blocks among the leaders with PMPI's
 * v-collectives (MPI_BYTE for data movement, so that no rank depends on
 * another's datatype; the caller's type for reduce-scatter), and a leader
 * copies blocks from node order into rank order or back (see node_order)
 * unless the two are the same. Those counts and displacements are ints: a
 * call whose leader would hold more than INT_MAX bytes (elements, in
 * reduce_scatter_block) goes to PMPI, decided by every rank from the size,
 * the nodes and the block, which all know (see fits). */

/* Whether a * b * c (a, b >= 1, c >= 0) fits an int. */
int fits(long long a, long long b, long long c)
{
	return c <= INT_MAX / a / b;
}

static int node_size(const struct cstate *st, int n)
{
	return st->node_start[n + 1] - st->node_start[n];
}

/* Blocks of b bytes, all size of them, from node order in src to rank order
 * in dst, or back. */
static void to_rank_order(const struct cstate *st, void *dst, const void *src, size_t b)
{
	int i;

	for (i = 0; i < st->size; i++)
		memcpy((char *)dst + (size_t)st->rank_at[i] * b, (const char *)src + (size_t)i * b,
		       b);
}

static void to_node_order(const struct cstate *st, void *dst, const void *src, size_t b)
{
	int i;

	for (i = 0; i < st->size; i++)
		memcpy((char *)dst + (size_t)i * b, (const char *)src + (size_t)st->rank_at[i] * b,
		       b);
}

/* A leaders' v-collective's counts and displacements for whole node blocks
 * of per bytes per rank, in node order: into vc and vc + nnodes. */
static void node_counts(struct cstate *st, size_t per)
{
	int n;

	for (n = 0; n < st->nnodes; n++) {
		st->vc[n] = (int)((size_t)node_size(st, n) * per);
		st->vc[st->nnodes + n] = (int)((size_t)st->node_start[n] * per);
	}
}

/* Gather to each node's leader, at its node's place in node order; an
 * allgatherv of whole node blocks among the leaders; the leader puts them
 * in rank order; bcast of all of recvbuf in the node. Ordered, the leader
 * gathers and exchanges in recvbuf itself, nothing copied (in place, its own
 * block already sits where its gather puts it: shmcoll's in-place form). An
 * allgather in the node first would still need the bcast of the other
 * nodes' blocks: one node call more for nothing. own is this rank's block,
 * in recvbuf when in place. */
int allgather_multi(struct cstate *st, const void *own, void *recvbuf, size_t b)
{
	char *all = recvbuf, *mine = NULL;
	int rc;

	if (st->wide && st->ordered)
		return shm_done(st, C_ALLGATHER, "shmcoll_allgather",
		                shmcoll_allgather(own, recvbuf, b, SHMCOLL_UINT8, st->wide));
	if (st->lrank == 0) {
		if (!st->ordered && !(all = scratch(st, 0, (size_t)st->size * b)))
			return fail(st, C_ALLGATHER, "scratch buffer", MPI_ERR_NO_MEM);
		mine = all + (size_t)st->node_start[st->my_node] * b;
	}
	rc = shmcoll_gather(own, mine, b, SHMCOLL_UINT8, 0, st->shm);
	if (rc < 0)
		return fail(st, C_ALLGATHER, "shmcoll_gather", rc);
	if (st->lrank == 0) {
		node_counts(st, b);
		rc = PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, all, st->vc, st->vc + st->nnodes,
		                     MPI_BYTE, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_ALLGATHER, "MPI_Allgatherv among leaders", rc);
		if (!st->ordered)
			to_rank_order(st, recvbuf, all, b);
	}
	rc = shmcoll_bcast(recvbuf, (size_t)st->size * b, SHMCOLL_UINT8, 0, st->shm);
	return shm_done(st, C_ALLGATHER, "shmcoll_bcast", rc);
}

/* Reduce all of the vector to each node's leader; the leader puts its
 * blocks in node order; the leaders reduce-scatter it (MPI_Reduce_scatter,
 * each node's leader getting just its own ranks' blocks: about half the
 * traffic of an allreduce of everything, which would hand every leader
 * blocks it throws away); scatter in the node. The leader's partial (part, in rank order) and the
 * vector in node order (vec) are two buffers unless ordered, where part is
 * the vector; the result reuses whichever the vector is not. in is recvbuf
 * in place, and out is written only by the last step, so MPI's in-place
 * form needs nothing more. */
int reduce_scatter_multi(struct cstate *st, const void *in, void *out, int count, MPI_Datatype dt,
                         MPI_Op op, shmcoll_dtype sdt, shmcoll_op sop)
{
	size_t b = shmcoll_dtype_size(sdt) * (size_t)count, all = b * (size_t)st->size;
	char *part = NULL, *vec = NULL, *res = NULL;
	int n, rc;

	/* MPI's in place (the vector in out) is not shmcoll's (the result at this rank's block
	 * of the vector): there, the block moves to out after. */
	if (st->wide && st->ordered) {
		char *at = in == out ? (char *)out + (size_t)st->rank * b : out;

		rc = shmcoll_reduce_scatter(in, at, (size_t)count, sdt, sop, st->wide);
		if (rc == 0 && at != out)
			memmove(out, at, b);
		return shm_done(st, C_REDUCE_SCATTER_BLOCK, "shmcoll_reduce_scatter", rc);
	}
	if (st->lrank == 0) {
		part = scratch(st, 0, all);
		res = scratch(st, 1, st->ordered ? (size_t)node_size(st, st->my_node) * b : all);
		if (!part || !res)
			return fail(st, C_REDUCE_SCATTER_BLOCK, "scratch buffer", MPI_ERR_NO_MEM);
		vec = part;
		if (!st->ordered) {
			vec = res;
			res = part;
		}
	}
	rc = shmcoll_reduce(in, part, (size_t)count * (size_t)st->size, sdt, sop, 0, st->shm);
	if (rc < 0)
		return fail(st, C_REDUCE_SCATTER_BLOCK, "shmcoll_reduce", rc);
	if (st->lrank == 0) {
		if (!st->ordered)
			to_node_order(st, vec, part, b);
		for (n = 0; n < st->nnodes; n++)
			st->vc[n] = node_size(st, n) * count;
		rc = PMPI_Reduce_scatter(vec, res, st->vc, dt, op, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_REDUCE_SCATTER_BLOCK, "MPI_Reduce_scatter among leaders",
			            rc);
	}
	rc = shmcoll_scatter(res, out, b, SHMCOLL_UINT8, 0, st->shm);
	return shm_done(st, C_REDUCE_SCATTER_BLOCK, "shmcoll_scatter", rc);
}

/* Gather to each node's leader in node order; a gatherv of whole node blocks
 * among the leaders to the root's node's leader, which puts them in rank
 * order; if the root is not that leader, one message of all of it from the
 * leader to the root (as in reduce_multi). A root that is its node's leader
 * gathers into recvbuf itself when ordered. own is this rank's block, in
 * recvbuf at an in-place root; recvbuf is NULL off the root. Gathering the
 * root's node to the root itself would spare those blocks the round trip
 * through the leader, but the other nodes' blocks would then have to land
 * between them in rank order: a derived type per call, or a second copy at
 * the root. One path for every root is worth the bytes. */
int gather_multi(struct cstate *st, const void *own, void *recvbuf, size_t b, int root)
{
	int rnode = st->node_of[root], rlocal = st->lrank_of[root], rc = MPI_SUCCESS;
	size_t all = (size_t)st->size * b;
	char *nodes = NULL, *ranked = NULL, *mine = NULL;

	if (st->wide && st->ordered)
		return shm_done(st, C_GATHER, "shmcoll_gather",
		                shmcoll_gather(own, recvbuf, b, SHMCOLL_UINT8, root, st->wide));
	if (st->lrank == 0 && st->my_node != rnode) {
		mine = scratch(st, 0, (size_t)node_size(st, st->my_node) * b);
		if (!mine)
			return fail(st, C_GATHER, "scratch buffer", MPI_ERR_NO_MEM);
	} else if (st->lrank == 0) {
		/* Every node's blocks in node order (nodes), then in rank
		 * order (ranked): recvbuf at the root; else what goes to it. */
		nodes = rlocal == 0 && st->ordered ? recvbuf : scratch(st, 0, all);
		ranked = rlocal == 0 ? recvbuf : st->ordered ? nodes : scratch(st, 1, all);
		if (!nodes || !ranked)
			return fail(st, C_GATHER, "scratch buffer", MPI_ERR_NO_MEM);
		mine = nodes + (size_t)st->node_start[rnode] * b;
	}
	rc = shmcoll_gather(own, mine, b, SHMCOLL_UINT8, 0, st->shm);
	if (rc < 0)
		return fail(st, C_GATHER, "shmcoll_gather", rc);
	if (st->lrank == 0) {
		/* The counts on every leader: only the root's matter, but an
		 * MPI may check them anywhere. */
		node_counts(st, b);
		if (st->my_node == rnode)
			rc = PMPI_Gatherv(MPI_IN_PLACE, 0, MPI_BYTE, nodes, st->vc,
			                  st->vc + st->nnodes, MPI_BYTE, rnode, st->leaders);
		else
			rc = PMPI_Gatherv(mine, st->vc[st->my_node], MPI_BYTE, NULL, st->vc,
			                  st->vc + st->nnodes, MPI_BYTE, rnode, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_GATHER, "MPI_Gatherv among leaders", rc);
		if (st->my_node == rnode && !st->ordered)
			to_rank_order(st, ranked, nodes, b);
	}
	if (st->my_node == rnode && rlocal != 0) {
		if (st->lrank == 0)
			rc = PMPI_Send(ranked, (int)all, MPI_BYTE, rlocal, 0, st->node);
		else if (st->rank == root)
			rc = PMPI_Recv(recvbuf, (int)all, MPI_BYTE, 0, 0, st->node,
			               MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return fail(st, C_GATHER, "leader to root", rc);
	}
	return via_shm(C_GATHER);
}

/* gather_multi backwards: if the root is not its node's leader, one message
 * of all of sendbuf from it to the leader; the leader puts it in node order
 * (a root that is the leader, ordered, scatters from sendbuf itself); a
 * scatterv of whole node blocks among the leaders; scatter from each
 * leader in the node. own is where this rank's block goes: NULL at an
 * in-place root, whose block stays in sendbuf. */
int scatter_multi(struct cstate *st, const void *sendbuf, void *own, size_t b, int root)
{
	int rnode = st->node_of[root], rlocal = st->lrank_of[root], rc = MPI_SUCCESS;
	size_t all = (size_t)st->size * b;
	const char *nodes = NULL;
	char *mine = NULL, *ranked = NULL, *buf = NULL;

	/* An in-place root's block stays where shmcoll's in-place form has it. */
	if (st->wide && st->ordered)
		return shm_done(st, C_SCATTER, "shmcoll_scatter",
		                shmcoll_scatter(sendbuf,
		                                own ? own : (char *)sendbuf + (size_t)root * b, b,
		                                SHMCOLL_UINT8, root, st->wide));
	if (st->lrank == 0 && st->my_node != rnode) {
		mine = scratch(st, 0, (size_t)node_size(st, st->my_node) * b);
		if (!mine)
			return fail(st, C_SCATTER, "scratch buffer", MPI_ERR_NO_MEM);
	} else if (st->lrank == 0) {
		/* sendbuf in rank order (at the root, or received from it
		 * into ranked), then in node order (nodes, in buf). */
		if (rlocal == 0 && st->ordered) {
			nodes = sendbuf;
		} else {
			nodes = buf = scratch(st, 0, all);
			ranked = rlocal != 0 && !st->ordered ? scratch(st, 1, all) : buf;
			if (!buf || !ranked)
				return fail(st, C_SCATTER, "scratch buffer", MPI_ERR_NO_MEM);
		}
	} else if (st->rank == root && !own) {
		/* An in-place root off the leader takes its block too; it
		 * does not go into sendbuf, which the root keeps as it is. */
		own = scratch(st, 0, b);
		if (!own)
			return fail(st, C_SCATTER, "scratch buffer", MPI_ERR_NO_MEM);
	}
	if (st->my_node == rnode && rlocal != 0) {
		if (st->lrank == 0)
			rc = PMPI_Recv(ranked, (int)all, MPI_BYTE, rlocal, 0, st->node,
			               MPI_STATUS_IGNORE);
		else if (st->rank == root)
			rc = PMPI_Send(sendbuf, (int)all, MPI_BYTE, 0, 0, st->node);
		if (rc != MPI_SUCCESS)
			return fail(st, C_SCATTER, "root to leader", rc);
	}
	if (st->lrank == 0) {
		if (st->my_node == rnode && !st->ordered)
			to_node_order(st, buf, rlocal == 0 ? sendbuf : ranked, b);
		node_counts(st, b);
		if (st->my_node == rnode) {
			rc = PMPI_Scatterv(nodes, st->vc, st->vc + st->nnodes, MPI_BYTE,
			                   MPI_IN_PLACE, 0, MPI_BYTE, rnode, st->leaders);
			mine = (char *)nodes + (size_t)st->node_start[rnode] * b;
		} else {
			rc = PMPI_Scatterv(NULL, st->vc, st->vc + st->nnodes, MPI_BYTE, mine,
			                   st->vc[st->my_node], MPI_BYTE, rnode, st->leaders);
		}
		if (rc != MPI_SUCCESS)
			return fail(st, C_SCATTER, "MPI_Scatterv among leaders", rc);
		/* An in-place root that is the leader: shmcoll's in-place
		 * form, which writes nothing (mine may be sendbuf's). */
		if (!own)
			own = mine;
	}
	rc = shmcoll_scatter(mine, own, b, SHMCOLL_UINT8, 0, st->shm);
	return shm_done(st, C_SCATTER, "shmcoll_scatter", rc);
}

/* Gather every rank's whole sendbuf to its node's leader (into a: local
 * rank l's row of size blocks, one per destination in rank order); the
 * leader packs one piece per destination node (into x: for node m, [q][l],
 * the block from its local rank l to m's local rank q); an alltoallv of the
 * pieces among the leaders (into a, whose rows are packed by then); the
 * leader builds each local rank's recvbuf (into x: row q, its block from
 * each rank in rank order) and scatters the rows in the node. Packing is
 * what makes each leader's share one contiguous message (a row holds a
 * block for every node); the pieces are laid out so that a receiver whose
 * node order is rank order unpacks whole runs of a node's blocks. Two
 * buffers of node size * size blocks on each leader, like the gather it
 * starts with. in is recvbuf in place: the gather has read it before the
 * scatter writes it. */
int alltoall_multi(struct cstate *st, const void *in, void *recvbuf, size_t b)
{
	int ln = node_size(st, st->my_node), n, q, l, rc;
	int *sc = st->vc, *sd = sc + st->nnodes, *rcnt = sd + st->nnodes, *rd = rcnt + st->nnodes;
	size_t row = (size_t)st->size * b, mine = (size_t)ln * row;
	char *a = NULL, *x = NULL, *piece;

	if (st->wide && st->ordered)
		return shm_done(st, C_ALLTOALL, "shmcoll_alltoall",
		                shmcoll_alltoall(in, recvbuf, b, SHMCOLL_UINT8, st->wide));
	if (st->lrank == 0) {
		a = scratch(st, 0, mine);
		x = scratch(st, 1, mine);
		if (!a || !x)
			return fail(st, C_ALLTOALL, "scratch buffer", MPI_ERR_NO_MEM);
	}
	rc = shmcoll_gather(in, a, row, SHMCOLL_UINT8, 0, st->shm);
	if (rc < 0)
		return fail(st, C_ALLTOALL, "shmcoll_gather", rc);
	if (st->lrank == 0) {
		for (n = 0; n < st->nnodes; n++) {
			int ns = node_size(st, n), first = st->node_start[n];

			sc[n] = rcnt[n] = (int)((size_t)ln * (size_t)ns * b);
			sd[n] = rd[n] = (int)((size_t)ln * (size_t)first * b);
			piece = x + (size_t)sd[n];
			for (q = 0; q < ns; q++)
				for (l = 0; l < ln; l++)
					memcpy(piece + ((size_t)q * (size_t)ln + (size_t)l) * b,
					       a + (size_t)l * row +
					           (size_t)st->rank_at[first + q] * b,
					       b);
		}
		rc = PMPI_Alltoallv(x, sc, sd, MPI_BYTE, a, rcnt, rd, MPI_BYTE, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_ALLTOALL, "MPI_Alltoallv among leaders", rc);
		/* From node n: [q][l], to local rank q from n's local rank l. */
		for (n = 0; n < st->nnodes; n++) {
			int ns = node_size(st, n), first = st->node_start[n];

			piece = a + (size_t)rd[n];
			for (q = 0; q < ln; q++) {
				if (st->ordered) {
					memcpy(x + (size_t)q * row + (size_t)first * b,
					       piece + (size_t)q * (size_t)ns * b, (size_t)ns * b);
					continue;
				}
				for (l = 0; l < ns; l++)
					memcpy(x + (size_t)q * row +
					           (size_t)st->rank_at[first + l] * b,
					       piece + ((size_t)q * (size_t)ns + (size_t)l) * b, b);
			}
		}
	}
	rc = shmcoll_scatter(x, recvbuf, row, SHMCOLL_UINT8, 0, st->shm);
	return shm_done(st, C_ALLTOALL, "shmcoll_scatter", rc);
}

/* reduce_scatter_multi with a count per rank (c from rs_prep: counts, total, in; out is
 * recvbuf): reduce all of the vector to each node's leader; the leader puts the blocks in node
 * order; the leaders reduce-scatter it with whole node counts (vc, elements), each getting its
 * node's blocks; scatterv in the node with the node's counts. The leader's buffers are
 * reduce_scatter_multi's (part in rank order, vec in node order, res the node's blocks; one
 * of them spared when ordered). vz is c->counts in its first P, then each rank's element
 * offset in rank order, then the node's local counts and offsets for the scatterv. As there,
 * the input (recvbuf in place) has been read before the scatterv writes recvbuf. */
int reduce_scatterv_multi(struct cstate *st, const struct rcall *c, MPI_Datatype dt, MPI_Op op,
                          shmcoll_dtype sdt, shmcoll_op sop)
{
	size_t es = shmcoll_dtype_size(sdt), *cnt = c->counts, *roff = st->vz + st->size;
	size_t *lc = st->vz + 2 * (size_t)st->size, *ld = st->vz + 3 * (size_t)st->size, at = 0;
	int P = st->size, first = st->node_start[st->my_node], ln = node_size(st, st->my_node);
	int i, n, rc;
	char *part = NULL, *vec = NULL, *res = NULL;

	for (i = 0; i < P; i++) {
		roff[i] = at;
		at += cnt[i];
	}
	if (st->lrank == 0) {
		for (i = 0, at = 0; i < ln; i++) {
			lc[i] = cnt[st->rank_at[first + i]];
			ld[i] = at;
			at += lc[i];
		}
		/* at: the node's elements (a byte more: res is passed even when empty) */
		part = scratch(st, 0, c->total * es);
		res = scratch(st, 1, st->ordered ? at * es + 1 : c->total * es);
		if (!part || !res)
			return fail(st, C_REDUCE_SCATTER, "scratch buffer", MPI_ERR_NO_MEM);
		vec = part;
		if (!st->ordered) {
			vec = res;
			res = part;
		}
	}
	rc = shmcoll_reduce(c->in, part, c->total, sdt, sop, 0, st->shm);
	if (rc < 0)
		return fail(st, C_REDUCE_SCATTER, "shmcoll_reduce", rc);
	if (st->lrank == 0) {
		for (n = 0; n < st->nnodes; n++) {
			for (at = 0, i = st->node_start[n]; i < st->node_start[n + 1]; i++)
				at += cnt[st->rank_at[i]];
			st->vc[n] = (int)at;
		}
		if (!st->ordered)
			for (i = 0, at = 0; i < P; i++) {
				memcpy(vec + at * es, part + roff[st->rank_at[i]] * es,
				       cnt[st->rank_at[i]] * es);
				at += cnt[st->rank_at[i]];
			}
		rc = PMPI_Reduce_scatter(vec, res, st->vc, dt, op, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_REDUCE_SCATTER, "MPI_Reduce_scatter among leaders", rc);
	}
	rc = shmcoll_scatterv(res, st->lrank == 0 ? lc : NULL, st->lrank == 0 ? ld : NULL, c->out,
	                      cnt[st->rank], sdt, 0, st->shm);
	return shm_done(st, C_REDUCE_SCATTER, "shmcoll_scatterv", rc);
}

/* Across nodes: gatherv of the node's blocks to its leader, packed back to back in node order
 * (off, cnt: vz's first 2 * P, free in an allgatherv), into scratch buffer 0; an allgatherv of
 * whole node parts among the leaders (bytes); bcast of all of it in the node; every rank copies
 * each block to where v->out wants it, so recvbuf's gaps between blocks are never written.
 * Where v->out is laid out that way already (blocks back to back in node order: packed and
 * ordered, or a contiguous type whose displacements are so), the stages work in it and
 * nothing is copied; an in-place rank's block, at v->out then, is where its node's gather
 * wants it (shmcoll's in-place form). Unpacking, if r is packed, follows as on one node. */
int allgatherv_multi(struct cstate *st, struct vcall *v)
{
	size_t *off = v->vz, *cnt = v->vz + st->size, at = 0;
	int P = st->size, first = st->node_start[st->my_node], direct = 1, i, n, rc;
	char *buf = v->out;

	for (i = 0; i < P; i++) {
		off[i] = at;
		cnt[i] = v->r.bc[st->rank_at[i]];
		direct &= v->r.bd[st->rank_at[i]] == at;
		at += cnt[i];
	}
	if (!direct && !(buf = scratch(st, 0, at + 1)))
		return fail(st, C_ALLGATHERV, "scratch buffer", MPI_ERR_NO_MEM);
	rc = shmcoll_gatherv(v->in, v->mine, st->lrank == 0 ? buf : NULL, cnt + first, off + first,
	                     SHMCOLL_UINT8, 0, st->shm);
	if (rc < 0)
		return fail(st, C_ALLGATHERV, "shmcoll_gatherv", rc);
	if (st->lrank == 0) {
		for (n = 0; n < st->nnodes; n++) {
			size_t end = st->node_start[n + 1] < P ? off[st->node_start[n + 1]] : at;

			st->vc[st->nnodes + n] = (int)off[st->node_start[n]];
			st->vc[n] = (int)(end - off[st->node_start[n]]);
		}
		rc = PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, buf, st->vc, st->vc + st->nnodes,
		                     MPI_BYTE, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_ALLGATHERV, "MPI_Allgatherv among leaders", rc);
	}
	rc = shmcoll_bcast(buf, at, SHMCOLL_UINT8, 0, st->shm);
	if (rc < 0)
		return fail(st, C_ALLGATHERV, "shmcoll_bcast", rc);
	if (!direct)
		for (i = 0; i < P; i++)
			if (cnt[i])
				memcpy((char *)v->out + v->r.bd[st->rank_at[i]], buf + off[i],
				       cnt[i]);
	return via_shm(C_ALLGATHERV);
}

/* Gatherv and scatterv across nodes. Only the root knows the counts, so the leaders cannot
 * run PMPI's v-collectives (every leader would need every node's total); instead each node
 * other than the root's sends the root one part, and the root's node runs shmcoll's call with
 * the root itself as its root. A part is two messages on the leaders' communicator (or, when
 * the root is not its node's leader, forwarded by that leader on the node's): the node's
 * per-rank byte counts (uint64_t, in local order), then their blocks back to back, in pieces
 * of at most INT_MAX bytes, whose total both ends know from the counts. The helper
 * communicators carry nothing else, so the messages match nothing of the program's. */

/* bytes at buf sent to (send) or received from peer on comm, in pieces of at most INT_MAX. */
static int part_bytes(int send, void *buf, size_t bytes, int peer, MPI_Comm comm)
{
	size_t at, k;
	int rc = MPI_SUCCESS;

	for (at = 0; at < bytes && rc == MPI_SUCCESS; at += k) {
		k = bytes - at < INT_MAX ? bytes - at : INT_MAX;
		rc = send ? PMPI_Send((char *)buf + at, (int)k, MPI_BYTE, peer, 0, comm)
		          : PMPI_Recv((char *)buf + at, (int)k, MPI_BYTE, peer, 0, comm,
		                      MPI_STATUS_IGNORE);
	}
	return rc;
}

/* Sends (send) or receives one part of ns ranks: counts (ns uint64_t, scratch buffer 1 when
 * received), then data (its blocks, scratch buffer 0 when received); *total is their sum. */
static int part_move(struct cstate *st, int send, int ns, uint64_t **counts, char **data,
                     size_t *total, int peer, MPI_Comm comm)
{
	int i, rc;

	if (!send && !(*counts = scratch(st, 1, (size_t)ns * sizeof(uint64_t) + 1)))
		return MPI_ERR_NO_MEM;
	rc = send ? PMPI_Send(*counts, ns * (int)sizeof(uint64_t), MPI_BYTE, peer, 0, comm)
	          : PMPI_Recv(*counts, ns * (int)sizeof(uint64_t), MPI_BYTE, peer, 0, comm,
	                      MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS)
		return rc;
	for (*total = 0, i = 0; i < ns; i++)
		*total += (size_t)(*counts)[i];
	if (!send && !(*data = scratch(st, 0, *total + 1)))
		return MPI_ERR_NO_MEM;
	return part_bytes(send, *data, *total, peer, comm);
}

/* The root's node: shmcoll_gatherv to the root, which passes its recvcounts for the node's
 * ranks (in vz's first 2 * P: the root's r is in the last), so shmcoll finds a rank whose
 * count disagrees (-EPROTO). Every other node: a gather of each rank's count (8 bytes) to
 * the leader, a gatherv of the blocks to it back to back (scratch buffer 0), and the part to
 * the root; the root's node's leader, if not the root, forwards each part in node order.
 * The root takes each part's blocks to where v->out wants them, after comparing the counts
 * with its recvcounts: any that disagrees is MPI_ERR_COUNT on the root, and nothing of that
 * part or those after it is written (each is still received, so no sender waits). */
int gatherv_multi(struct cstate *st, struct vcall *v, int root)
{
	int rnode = st->node_of[root], rlocal = st->lrank_of[root], is_root = st->rank == root;
	int ns = node_size(st, st->my_node), first = st->node_start[st->my_node], bad = 0;
	int n, l, rc = MPI_SUCCESS;
	size_t *lc = v->vz, *ld = v->vz + st->size, total = 0;
	uint64_t mine = v->mine, *cnt = NULL;
	char *data = NULL;

	if (st->my_node == rnode) {
		if (is_root)
			for (l = 0; l < ns; l++) {
				lc[l] = v->r.bc[st->rank_at[first + l]];
				ld[l] = v->r.bd[st->rank_at[first + l]];
			}
		rc = shmcoll_gatherv(v->in, v->mine, is_root ? v->out : NULL, is_root ? lc : NULL,
		                     is_root ? ld : NULL, SHMCOLL_UINT8, rlocal, st->shm);
		if (rc < 0)
			return fail(st, C_GATHERV, "shmcoll_gatherv", rc);
	} else {
		if (st->lrank == 0 && !(cnt = scratch(st, 1, (size_t)ns * sizeof(uint64_t))))
			return fail(st, C_GATHERV, "scratch buffer", MPI_ERR_NO_MEM);
		rc = shmcoll_gather(&mine, cnt, 1, SHMCOLL_UINT64, 0, st->shm);
		if (rc < 0)
			return fail(st, C_GATHERV, "shmcoll_gather", rc);
		if (st->lrank == 0) {
			for (l = 0; l < ns; l++) {
				lc[l] = (size_t)cnt[l];
				ld[l] = total;
				total += lc[l];
			}
			if (!(data = scratch(st, 0, total + 1)))
				return fail(st, C_GATHERV, "scratch buffer", MPI_ERR_NO_MEM);
		}
		rc = shmcoll_gatherv(v->in, v->mine, data, lc, ld, SHMCOLL_UINT8, 0, st->shm);
		if (rc < 0)
			return fail(st, C_GATHERV, "shmcoll_gatherv", rc);
		if (st->lrank == 0 && (rc = part_move(st, 1, ns, &cnt, &data, &total, rnode,
		                                      st->leaders)) != MPI_SUCCESS)
			return fail(st, C_GATHERV, "a node's part to the root", rc);
		return via_shm(C_GATHERV);
	}
	for (n = 0; n < st->nnodes; n++) {
		if (n == rnode || (!is_root && st->lrank != 0))
			continue;
		rc = part_move(st, 0, node_size(st, n), &cnt, &data, &total,
		               rlocal && is_root ? 0 : n,
		               rlocal && is_root ? st->node : st->leaders);
		if (rc == MPI_SUCCESS && !is_root)
			rc = part_move(st, 1, node_size(st, n), &cnt, &data, &total, rlocal,
			               st->node);
		if (rc != MPI_SUCCESS)
			return fail(st, C_GATHERV, "a node's part to the root", rc);
		if (!is_root)
			continue;
		for (l = 0; l < node_size(st, n); l++)
			bad |= cnt[l] != v->r.bc[st->rank_at[st->node_start[n] + l]];
		for (l = 0, total = 0; !bad && l < node_size(st, n); l++) {
			memcpy((char *)v->out + v->r.bd[st->rank_at[st->node_start[n] + l]],
			       data + total, (size_t)cnt[l]);
			total += (size_t)cnt[l];
		}
	}
	return bad ? fail(st, C_GATHERV, "a count other than the root's recvcounts", MPI_ERR_COUNT)
	           : via_shm(C_GATHERV);
}

/* gatherv_multi backwards: the root sends every other node its part, in node order (through
 * its node's leader if it is not that leader), the blocks packed back to back from v->in into
 * scratch buffer 0; each such node's leader scatters its part in the node with the counts it
 * came with. Then the root's node scatters from the root with its sendcounts for the node's
 * ranks (in vz's last 2 * P: the root's s is in the first). shmcoll_scatterv compares every
 * rank's recvcount with its count (-EPROTO on that rank), in every node. */
int scatterv_multi(struct cstate *st, struct vcall *v, int root)
{
	int rnode = st->node_of[root], rlocal = st->lrank_of[root], is_root = st->rank == root;
	int ns = node_size(st, st->my_node), first = st->node_start[st->my_node];
	int n, l, rc = MPI_SUCCESS;
	size_t *lc = v->vz + 2 * (size_t)st->size, *ld = lc + st->size, total = 0;
	uint64_t *cnt = NULL;
	char *data = NULL;

	for (n = 0; n < st->nnodes && st->my_node == rnode; n++) {
		int nn = node_size(st, n), at = st->node_start[n];

		if (n == rnode || (!is_root && st->lrank != 0))
			continue;
		if (is_root) {
			if (!(cnt = scratch(st, 1, (size_t)nn * sizeof(uint64_t))))
				return fail(st, C_SCATTERV, "scratch buffer", MPI_ERR_NO_MEM);
			for (total = 0, l = 0; l < nn; l++)
				total += (size_t)(cnt[l] = v->s.bc[st->rank_at[at + l]]);
			if (!(data = scratch(st, 0, total + 1)))
				return fail(st, C_SCATTERV, "scratch buffer", MPI_ERR_NO_MEM);
			for (total = 0, l = 0; l < nn; l++) {
				memcpy(data + total,
				       (const char *)v->in + v->s.bd[st->rank_at[at + l]],
				       (size_t)cnt[l]);
				total += (size_t)cnt[l];
			}
			rc = part_move(st, 1, nn, &cnt, &data, &total, rlocal ? 0 : n,
			               rlocal ? st->node : st->leaders);
		} else {
			rc = part_move(st, 0, nn, &cnt, &data, &total, rlocal, st->node);
			if (rc == MPI_SUCCESS)
				rc = part_move(st, 1, nn, &cnt, &data, &total, n, st->leaders);
		}
		if (rc != MPI_SUCCESS)
			return fail(st, C_SCATTERV, "the root's part to a node", rc);
	}
	if (st->my_node == rnode) {
		if (is_root)
			for (l = 0; l < ns; l++) {
				lc[l] = v->s.bc[st->rank_at[first + l]];
				ld[l] = v->s.bd[st->rank_at[first + l]];
			}
		rc = shmcoll_scatterv(v->in, is_root ? lc : NULL, is_root ? ld : NULL, v->out,
		                      v->mine, SHMCOLL_UINT8, rlocal, st->shm);
		return shm_done(st, C_SCATTERV, "shmcoll_scatterv", rc);
	}
	if (st->lrank == 0) {
		rc = part_move(st, 0, ns, &cnt, &data, &total, rnode, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_SCATTERV, "the root's part to a node", rc);
		for (total = 0, l = 0; l < ns; l++) {
			lc[l] = (size_t)cnt[l];
			ld[l] = total;
			total += lc[l];
		}
	}
	rc = shmcoll_scatterv(data, lc, ld, v->out, v->mine, SHMCOLL_UINT8, 0, st->shm);
	return shm_done(st, C_SCATTERV, "shmcoll_scatterv", rc);
}
