/* node.h - the node communicator: the ranks of one job on one machine, meeting in one arena
 * (shm/arena.h). Its state is grouped by the subsystem that owns it, each group's type and
 * functions in that subsystem's header; what is here is who the rank is, how it waits, the
 * step engine's counters (engine.h) and how the communicator fails. */
#ifndef SHMCOLL_CORE_NODE_H
#define SHMCOLL_CORE_NODE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"
#include "shm/arena.h"
#include "shm/wait.h"
#include "lib/core/cma.h"
#include "lib/core/heap.h"
#include "lib/core/live.h"
#include "lib/core/p2p.h"
#include "lib/core/task.h"
#include "lib/core/tuning.h"

#define SHMCOLL_ERR_LEN 320

/* The step engine's counters and the call being begun (engine.c owns them). */
struct shmcoll_steps {
	struct shmcoll_ctrl *me;  /* this rank's control block */
	uint32_t seq;             /* the last step this rank published */
	uint32_t clean;           /* every reader of what we wrote up to this step is done */
	struct shmcoll_call call; /* the current call's word, published by its first step */
	struct shmcoll_desc desc; /* the rest of its description, published alike */
	const void **srcs;        /* size entries: kernel sources of one chunk */
	const uint8_t **zc;       /* size entries: each rank's zero-copy source or NULL */
	const uint8_t **zr;       /* size entries: each rank's result, readable in place, or NULL */
};

struct shmcoll_node {
	int rank, size;
	struct shmcoll_arena arena;
	struct shmcoll_waiter waiter;
	_Atomic int broken;         /* non-zero once broken: later calls fail */
	struct shmcoll_steps st;    /* engine.c */
	struct shmcoll_tasks tasks; /* task.c */
	struct shmcoll_tuning tune; /* algo.c */
	struct shmcoll_cma cma;     /* cma.c */
	struct shmcoll_heap heap;   /* heap.c */
	struct shmcoll_live live;   /* live.c */
	struct shmcoll_p2p p2p;     /* p2p.c */
	uint8_t *work;              /* private working memory of a call (shmcoll__node_work) */
	size_t work_bytes;
	char err[SHMCOLL_ERR_LEN];   /* this rank's last failure */
	char cause[SHMCOLL_ERR_LEN]; /* the failure that broke the communicator */
};

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

/* Returns 0, with the last message cleared, if the communicator can be used; else the error
 * that broke it (-ECANCELED, or the mismatch or death a peer found while this rank was
 * between calls), with a message naming fn. Inline: every call begins with it. */
int shmcoll__node_enter_broken(struct shmcoll_node *n, const char *fn);
static inline int shmcoll__node_enter(struct shmcoll_node *n, const char *fn)
{
	if (load_relaxed(&n->broken) || load_relaxed(&n->arena.hdr->aborted))
		return shmcoll__node_enter_broken(n, fn);
	n->err[0] = '\0';
	return 0;
}

/* task.h's shmcoll__task_run: the blocking API's call of a task. With nothing outstanding
 * (the caller entered), one call of its advance. */
static inline int shmcoll__task_run(struct shmcoll_node *n, struct shmcoll_task *t)
{
	if (!n->tasks.head) {
		t->blocking = 1;
		return t->advance(n, t);
	}
	return shmcoll__task_run_queued(n, t);
}

/* Records a message for shmcoll_last_error() and returns rc. The first failure that breaks
 * the communicator is also kept as its cause, which every later -ECANCELED quotes. */
int shmcoll__node_fail(struct shmcoll_node *n, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Breaks the communicator for everyone: sets the shared abort word (the first cause wins:
 * why, and who - this rank, or for EOWNERDEAD the rank that died) and wakes every sleeper.
 * Async-signal-safe. */
void shmcoll__node_break(struct shmcoll_node *n, int why);
void shmcoll__node_break_by(struct shmcoll_node *n, int why, int who);

/* The shared abort word as (why, who); why 0: not broken by anyone. */
void shmcoll__node_aborted(const struct shmcoll_node *n, int *why, int *who);

/* CPUs in the union of the ranks' affinity masks (every rank wrote its own at attach). */
int shmcoll__node_cpus(const struct shmcoll_node *n);

/* At least bytes of private working memory, kept with the communicator, or NULL. */
void *shmcoll__node_work(struct shmcoll_node *n, size_t bytes);

#endif
