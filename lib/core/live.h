/* live.h - liveness of a node communicator's peers: a dead peer process, or a rank that
 * destroyed its communicator while this one waits for it, ends the wait. */
#ifndef SHMCOLL_CORE_LIVE_H
#define SHMCOLL_CORE_LIVE_H

#include <stdint.h>

#include "lib/core/state.h"

/* Once every rank has attached: opens what the checks need and installs shmcoll__live_check
 * as the waiter's slow-path check. 0 or -ENOMEM. */
int shmcoll__live_init(struct shmcoll_node *n);
void shmcoll__live_fini(struct shmcoll_node *n);

/* The waiter's check (ctx: the node): -EOWNERDEAD, with dead_rank set, once a peer process
 * has exited; -EPROTO, with left_rank set, when the rank waited for destroyed its
 * communicator without publishing the step (it made fewer calls); else 0. */
int shmcoll__live_check(void *ctx);

/* Whether rank p's process is known to have exited without destroying its communicator
 * (never for this rank, nor for ranks that are threads of this process: those are found by
 * their left flag). */
int shmcoll__live_dead(struct shmcoll_node *n, int p);

#endif
