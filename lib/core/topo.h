/* topo.h - where each rank is on the machine (package, L3 domain), and the tree the barrier
 * and bcast protocols run over: topology-aware where every rank's place is known and they
 * span more than one L3 domain (lib/sched/sched.h has the shape). docs/ARCHITECTURE.md,
 * "Topology-aware trees". */
#ifndef SHMCOLL_CORE_TOPO_H
#define SHMCOLL_CORE_TOPO_H

#include <stddef.h>

#include "lib/core/state.h"
#include "lib/sched/sched.h"

/* Before the arena: this rank's place, from SHMCOLL_TOPOLOGY (a pretend machine, as 2x2x4),
 * else, where SHMCOLL_ALGO asks for the topology-aware tree, from sysfs for the CPUs it may
 * run on; unknown where they span L3 domains, or nobody asked. 0, or
 * -EINVAL with a message naming SHMCOLL_TOPOLOGY in err. */
int shmcoll__topo_read(struct shmcoll_node *n, char *err, size_t errlen);
/* Before the rank counts itself attached: writes its place into its control block, where
 * every peer reads it (the first time one needs a tree). */
void shmcoll__topo_publish(struct shmcoll_node *n);
/* This rank's place in the tree rooted at root: the k-nomial tree over rank numbers, or with
 * topo (SHMCOLL_ALGO=...:topo) the topology-aware one, the same on every rank, since every
 * rank computes it from the same published places. Kept for root 0 and the last other root.
 * The topology-aware tree is not the default: by the cost model (docs/BENCHMARKS.md, "Many
 * ranks") it is 30-65% slower than the k-nomial tree over ranks numbered as the cores from
 * 64 ranks on, and no two-socket machine has measured it yet. */
void shmcoll__node_tree(struct shmcoll_node *n, int root, int topo, struct shmcoll_tree *t);

#endif
