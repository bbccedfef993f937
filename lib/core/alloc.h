/* alloc.h - shmcoll_malloc and shmcoll_free on a node communicator: the allocator of the
 * symmetric heap (heap.h), each call a collective run as a task. */
#ifndef SHMCOLL_CORE_ALLOC_H
#define SHMCOLL_CORE_ALLOC_H

#include <stddef.h>

#include "lib/core/state.h"

/* The collectives of the heap, for a node communicator entered by the caller. malloc:
 * bytes > 0; returns NULL with a message when it fails: no room anywhere (-ENOMEM in the
 * message; the communicator stays usable, on every rank alike), or the error of a step.
 * free: ptr not NULL; 0, -EINVAL (not from malloc) or the error of the step. */
void *shmcoll__node_malloc(struct shmcoll_node *n, size_t bytes);
int shmcoll__node_free(struct shmcoll_node *n, void *ptr);

#endif
