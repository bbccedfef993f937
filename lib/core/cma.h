/* cma.h - the single-copy protocol's ground: whether every rank of a node communicator may
 * read every peer's memory with process_vm_readv (cross-memory attach), which calls use it,
 * and the reads themselves. docs/ARCHITECTURE.md ("Single copy") has the protocol. */
#ifndef SHMCOLL_CORE_CMA_H
#define SHMCOLL_CORE_CMA_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/state.h"

struct shmcoll_task;

/* Before the arena: reads SHMCOLL_CMA and SHMCOLL_CMA_MIN (-EINVAL for a bad one, with a
 * message in err) and draws the nonce. */
int shmcoll__cma_offer(struct shmcoll_cma *cma, char *err, size_t errlen);
/* Before the rank counts itself attached: writes the nonce and its address into its
 * control block. */
void shmcoll__cma_show(struct shmcoll_node *n);
/* Rank 0, before it counts itself attached, with its tuning taken: whether ranks 0 and 1 are
 * to time cross-core copies at create (cma.c, the copy probe). */
int shmcoll__cma_probe_wanted(const struct shmcoll_node *n);
/* Once all are attached: probes every peer and waits for every rank's verdict, then sets
 * cma.ok alike on every rank (or returns the error of the wait). Where rank 0 asked for the
 * copy probe, ranks 0 and 1 time cross-core copies first, and every rank whose environment
 * did not set SHMCOLL_CMA_MIN takes single copies from SHMCOLL_CMA_AUTO_MIN where they were
 * slow; the tuning source (tune_source) says what was measured. */
#define SHMCOLL_CMA_AUTO_MIN ((size_t)32 << 10)
int shmcoll__cma_agree(struct shmcoll_node *n);

/* Copies len bytes at address addr of rank p's memory into dst (process_vm_readv, resumed
 * after partial reads). 0, or the communicator is broken and -EOWNERDEAD (p is gone) or -EIO
 * (the read failed: addr is not p's readable memory), with a message naming fn. */
int shmcoll__cma_read(struct shmcoll_node *n, const char *fn, int p, void *dst, uint64_t addr,
                      size_t len);

/* Copies bytes [off, off+len) of the buffer rank p published for the task's call (its desc
 * addr, or from the arena when it lies in p's symmetric heap) into dst. Only after a step
 * that waited for p. Returns 0, or breaks the communicator and returns -EOWNERDEAD (p is
 * gone) or -EIO. */
int shmcoll__cma_fetch(struct shmcoll_node *n, struct shmcoll_task *t, int p, void *dst, size_t off,
                       size_t len);

#endif
