/* node.h - the node communicator: the ranks of one job on one machine, meeting in one arena
 * (shm/arena.h). Its state and how it fails are state.h's; what is here is how it is made and
 * destroyed, and, for the layers above lib/core, every part's functions in one include. */
#ifndef SHMCOLL_CORE_NODE_H
#define SHMCOLL_CORE_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/alloc.h"
#include "lib/core/cma.h"
#include "lib/core/heap.h"
#include "lib/core/live.h"
#include "lib/core/p2p.h"
#include "lib/core/state.h"
#include "lib/core/task.h"

/* How a node communicator is made. */
struct shmcoll_node_cfg {
	int rank, size;     /* 0 <= rank < size <= SHMCOLL_MAX_RANKS */
	const char *job;    /* the name every rank of the job passes */
	size_t arena_bytes; /* 0: SHMCOLL_ARENA_BYTES, else the default */
	int64_t timeout_ns; /* the bound of every wait (< 0: none): shmcoll__timeout_ns */
};

/* The wait bound of a config's timeout_ms: itself if non-zero, else SHMCOLL_TIMEOUT_MS, else
 * 5 minutes; negative means none (-1 returned). */
int64_t shmcoll__timeout_ns(int timeout_ms);

/* Makes this rank's node communicator: creates (rank 0) or attaches to the arena, waits for
 * every rank, and agrees on how to wait and on single copies. Returns 0, or a negative errno
 * with a message in err (-EINVAL for a bad tuning variable, -ENOSPC, -ETIMEDOUT, ...). */
int shmcoll__node_create(const struct shmcoll_node_cfg *cfg, struct shmcoll_node **out, char *err,
                         size_t errlen);

/* Local: marks the rank as left and releases everything. -EBUSY (and nothing changes) with
 * tasks or point-to-point operations outstanding. */
int shmcoll__node_destroy(struct shmcoll_node *n);

#endif
