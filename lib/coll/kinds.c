/* kinds.c - the non-blocking kinds: one row per collective kind, what turns a call into its
 * resumable operation. A node communicator's start calls the row's init; a multi-node
 * communicator's (lib/hier/colls.c) takes the name and whether it reduces from the same row,
 * so a kind is named and classed in one place. The rows' init functions adapt one form of
 * the arguments (struct shmcoll_args) to each collective's own. */
#include "lib/coll/coll.h"

static void barrier(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	(void)a;
	shmcoll__barrier_init(n, t);
}

static void bcast(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__bcast_init(n, t, a->recv, a->count, a->dt, a->root);
}

static void reduce(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__reduce_init(n, t, a->send, a->recv, a->count, a->dt, a->op, a->root);
}

static void allreduce(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__allreduce_init(n, t, a->send, a->recv, a->count, a->dt, a->op);
}

static void allgather(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__allgather_init(n, t, a->send, a->recv, a->count, a->dt);
}

static void reduce_scatter(struct shmcoll_node *n, struct shmcoll_task *t,
                           const struct shmcoll_args *a)
{
	shmcoll__reduce_scatter_init(n, t, a->send, a->recv, a->count, a->dt, a->op);
}

static void gather(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__gather_init(n, t, a->send, a->recv, a->count, a->dt, a->root);
}

static void scatter(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__scatter_init(n, t, a->send, a->recv, a->count, a->dt, a->root);
}

static void alltoall(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__alltoall_init(n, t, a->send, a->recv, a->count, a->dt);
}

static void allgatherv(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__allgatherv_init(n, t, a->send, a->scount, a->recv, a->rc, a->rd, a->dt);
}

static void gatherv(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__gatherv_init(n, t, a->send, a->scount, a->recv, a->rc, a->rd, a->dt, a->root);
}

static void scatterv(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__scatterv_init(n, t, a->send, a->sc, a->sd, a->recv, a->scount, a->dt, a->root);
}

static void alltoallv(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__alltoallv_init(n, t, a->send, a->sc, a->sd, a->recv, a->rc, a->rd, a->dt);
}

static void reduce_scatterv(struct shmcoll_node *n, struct shmcoll_task *t,
                            const struct shmcoll_args *a)
{
	shmcoll__reduce_scatterv_init(n, t, a->send, a->recv, a->rc, a->dt, a->op);
}

static void scan(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__scan_init(n, t, a->send, a->recv, a->count, a->dt, a->op, 0);
}

static void exscan(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a)
{
	shmcoll__scan_init(n, t, a->send, a->recv, a->count, a->dt, a->op, 1);
}

const struct shmcoll_start shmcoll__kinds[KIND_COUNT] = {
    [KIND_BARRIER] = {"shmcoll_barrier", 0, barrier},
    [KIND_BCAST] = {"shmcoll_bcast", 0, bcast},
    [KIND_REDUCE] = {"shmcoll_reduce", 1, reduce},
    [KIND_ALLREDUCE] = {"shmcoll_allreduce", 1, allreduce},
    [KIND_ALLGATHER] = {"shmcoll_allgather", 0, allgather},
    [KIND_REDUCE_SCATTER] = {"shmcoll_reduce_scatter", 1, reduce_scatter},
    [KIND_GATHER] = {"shmcoll_gather", 0, gather},
    [KIND_SCATTER] = {"shmcoll_scatter", 0, scatter},
    [KIND_ALLTOALL] = {"shmcoll_alltoall", 0, alltoall},
    [KIND_ALLGATHERV] = {"shmcoll_allgatherv", 0, allgatherv},
    [KIND_GATHERV] = {"shmcoll_gatherv", 0, gatherv},
    [KIND_SCATTERV] = {"shmcoll_scatterv", 0, scatterv},
    [KIND_ALLTOALLV] = {"shmcoll_alltoallv", 0, alltoallv},
    [KIND_REDUCE_SCATTERV] = {"shmcoll_reduce_scatterv", 1, reduce_scatterv},
    [KIND_SCAN] = {"shmcoll_scan", 1, scan},
    [KIND_EXSCAN] = {"shmcoll_exscan", 1, exscan},
};
