/* state.h - the state of a node communicator, every part's grouped by the file that owns it,
 * and how the communicator fails (state.c). Its types are here rather than in each part's
 * header so that the communicator can hold them all while every part's file includes this
 * one: lib/core reads in one order, this file first (docs/ARCHITECTURE.md, "lib/core"). */
#ifndef SHMCOLL_CORE_STATE_H
#define SHMCOLL_CORE_STATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"
#include "shm/arena.h"
#include "shm/proc.h"
#include "shm/wait.h"
#include "lib/core/queue.h"
#include "lib/core/tuning.h"
#include "lib/sched/sched.h"

struct shmcoll_task;
struct shmcoll_p2p_op;

/* Owned by cma.c. */
struct shmcoll_cma {
	int ok;         /* every rank can read every peer's memory: the same on every rank */
	size_t min;     /* SHMCOLL_CMA_MIN: single copies from this block size on; 0: none */
	int probed;     /* min is the copy probe's choice (cma.c): alltoall, allgather (algo.h) */
	uint64_t nonce; /* what peers read here to prove they can */
};

/* Owned by topo.c: this rank's place on the machine and the trees over every rank's. */
struct shmcoll_topo {
	struct shmcoll_place me; /* published in this rank's control block at create */
	int hier;                /* 0: not decided yet; 1: the plain tree; 2: topology-aware */
	int root[2];             /* the roots of the trees kept: 0's, the last other's; -1: none */
	struct shmcoll_tree tree[2];
};

#define NO_OFF UINT64_MAX

/* Parts of a heap: the arena's and up to HEAP_PARTS - 1 segments. */
#define HEAP_PARTS 64

/* A heap offset names its part in its top bits: (part << HEAP_PART_SHIFT) | offset. */
#define HEAP_PART_SHIFT 48

struct heap_block {
	uint64_t off, len;
};

struct heap_part {
	uint8_t *base; /* this rank's partition, in this mapping; NULL: an unused slot */
	uint64_t bytes;
	struct heap_block *blocks; /* used, sorted by offset; the gaps are free */
	size_t nblocks, cap;
	struct shmcoll_segment seg; /* parts 1 ..: the segment */
};

/* Owned by heap.c: private bookkeeping only; nothing in the segment points anywhere. */
struct shmcoll_heap {
	uint8_t *base; /* part 0: the arena's heap partition of this rank */
	uint64_t bytes;
	size_t nblocks; /* blocks in use, over every part */
	uint32_t made;  /* segments made so far: names the next */
	int nparts;     /* parts in use (the arena's counts) */
	/* HEAP_PARTS entries, out of line: the communicator's fields every call touches stay
	 * close together. */
	struct heap_part *part;
};

/* A peer as liveness knows it (live.c). */
struct shmcoll_peer {
	struct shmcoll_proc_id id;
	int how;
	int fd;
};

/* Owned by live.c; the engine sets waiting_for and waiting_step before a wait. */
struct shmcoll_live {
	struct shmcoll_peer *peers; /* size entries */
	int waiting_for;            /* the rank the current wait is for, or -1 */
	uint32_t waiting_step;      /* and the step it waits for */
	int left_rank;              /* set before -EPROTO: the rank that left */
	int dead_rank;              /* set before -EOWNERDEAD: the rank that died */
	int next;                   /* the next rank a check looks at */
};

struct p2p_ctl;
struct p2p_unexp;

/* This rank's side of each pair. */
struct p2p_peer {
	uint32_t head;           /* ring to the peer: bytes published */
	uint32_t tail_seen;      /* the peer's tail of that ring, as last read */
	uint32_t tail;           /* ring from the peer: bytes consumed */
	uint32_t given;          /* ring from the peer: bytes handed back (tails[] word) */
	uint64_t pos, salt;      /* ring to the peer: head as 64 bits, and its stamps' salt */
	uint64_t pos_in;         /* ring from the peer: tail as 64 bits */
	uint64_t salt_in;        /* and its stamps' salt */
	int busy;                /* on the list of peers with frames waiting to go */
	struct shmcoll_list out; /* sends waiting for room, in order */
	struct p2p_ctl *ctl;     /* control frames waiting for room */
	unsigned nctl, capctl;
};

/* Owned by p2p.c. */
struct shmcoll_p2p {
	int used;               /* point-to-point has been used: collectives' waits progress it */
	uint32_t cap;           /* ring bytes (a power of two) */
	size_t eager_max;       /* larger messages go by rendezvous */
	size_t chunk;           /* bytes of data per streamed frame */
	size_t cma_min;         /* rendezvous by process_vm_readv from this size (0: never) */
	struct p2p_peer *peers; /* size entries */
	int *busy;              /* the peers with frames waiting to go */
	int nbusy;
	struct shmcoll_list posted; /* receives waiting, in the order they were posted */
	struct shmcoll_list rdv;    /* sends waiting for a clear-to-send or a finish */
	struct shmcoll_list pulls;  /* receives reading streamed data */
	struct shmcoll_list uq;     /* messages arrived unmatched (p2p_unexp), in arrival order */
	uint64_t next_id;
	uint32_t coll_seq; /* collectives on point-to-point so far: their tags */
	unsigned active;   /* operations started and not done */
	int64_t checked;   /* when a test last looked for dead peers */
};

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
	struct shmcoll_queue tasks; /* task.c: its collectives */
	struct shmcoll_tuning tune; /* algo.c */
	/* Where the thresholds came from: rank 0's tuning file or the built-in ones, and why
	 * (shmcoll_comm_tuning). */
	char tune_source[SHMCOLL_TUNED_SOURCE];
	struct shmcoll_cma cma;   /* cma.c */
	struct shmcoll_topo topo; /* topo.c */
	struct shmcoll_heap heap; /* heap.c */
	struct shmcoll_live live; /* live.c */
	struct shmcoll_p2p p2p;   /* p2p.c */
	uint8_t *work;            /* private working memory of a call (shmcoll__node_work) */
	size_t work_bytes;
	char err[SHMCOLL_ERR_LEN];   /* this rank's last failure */
	char cause[SHMCOLL_ERR_LEN]; /* the failure that broke the communicator */
};

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

/* The pid rank p attached with (0 if unknown). */
int shmcoll__peer_pid(const struct shmcoll_node *n, int p);

/* Where this rank and rank p last waited (shm/wait.h's pace), for a wait for p. */
static inline struct shmcoll_cpus shmcoll__cpus_with(struct shmcoll_node *n, int p)
{
	return (struct shmcoll_cpus){&n->st.me->cpu, &shmcoll__ctrl(&n->arena, (uint32_t)p)->cpu};
}

#endif
