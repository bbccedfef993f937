/* probe.h - what the tests and benchmarks may see inside a communicator, and the few knobs
 * they may turn, so they need no other internal header to reach its state. Every function
 * takes a public communicator; on one over several nodes, the rank arguments and results
 * are this rank's node's (local ranks). Not part of the public API: nothing is exported. */
#ifndef SHMCOLL_API_PROBE_H
#define SHMCOLL_API_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"

struct shmcoll_node;

/* The last step this rank published, and the last step local rank p published. */
uint32_t shmcoll__probe_my_step(shmcoll_comm *c);
uint32_t shmcoll__probe_step(shmcoll_comm *c, int p);

/* Makes seq the last step this rank published, as if that many steps had passed: how the
 * tests reach the wrap of the 32-bit step counter. Only while no rank of the node is inside
 * a call, and every rank must jump to the same seq before any rank calls again (the caller
 * synchronizes them by other means: the communicator's steps are what it changes). */
void shmcoll__probe_jump_steps(shmcoll_comm *c, uint32_t seq);

/* The pid local rank p attached with. */
int shmcoll__probe_pid(shmcoll_comm *c, int p);

/* Forces protocols as SHMCOLL_ALGO would, on this rank only (a test of what happens when the
 * ranks' settings differ). 0 or -EINVAL. */
int shmcoll__probe_set_algo(shmcoll_comm *c, const char *spec);
/* The protocol forced on a collective ("auto" when none), and SHMCOLL_CHUNK_BYTES (0: none). */
const char *shmcoll__probe_algo(shmcoll_comm *c, const char *collective);
size_t shmcoll__probe_chunk_bytes(shmcoll_comm *c);
/* The protocol a call would run as chosen (SHMCOLL_ALGO's, else the tuning file's or the
 * built-in thresholds): an allreduce or reduce of bytes bytes of doubles, or a barrier or
 * bcast on this communicator (bytes unused); "unknown" for other names. */
const char *shmcoll__probe_choice(shmcoll_comm *c, const char *collective, size_t bytes);
/* Single copies from this block size on (SHMCOLL_CMA_MIN or the tuning file's; 0: none). */
size_t shmcoll__probe_cma_min(shmcoll_comm *c);

/* Whether calls on c may use single copies (every rank can read every peer's memory). */
int shmcoll__probe_cma(shmcoll_comm *c);

/* The symmetric heap: bytes per rank, the blocks in use, the offset of ptr in this rank's
 * partition (UINT64_MAX if outside), and the address in this process of the same offset in
 * local rank p's partition. */
size_t shmcoll__probe_heap_bytes(shmcoll_comm *c);
size_t shmcoll__probe_heap_blocks(shmcoll_comm *c);
uint64_t shmcoll__probe_heap_off(shmcoll_comm *c, const void *ptr);
void *shmcoll__probe_peer(shmcoll_comm *c, const void *mine, int p);

/* The chunk of the multi-node pipelines in bytes (lib/hier: SHMCOLL_HIER_CHUNK_BYTES), which
 * the tests size their multi-chunk cases by. */
size_t shmcoll__probe_hier_chunk_bytes(void);

/* Collectives that resume (lib/core/task.h, lib/hier), on either kind of communicator, for
 * the tests of progress without blocking: started behind the calls outstanding, tested,
 * waited for. collective is a name ("allreduce", ..., "alltoall", "barrier"); the other
 * arguments are the blocking call's, valid, count > 0 (bcast's buffer is recv). start
 * returns NULL when out of memory or for an unknown name; test sets *done and, once done,
 * returns the call's result; wait returns it. Free a call once it is done. */
struct shmcoll_probe_call;
struct shmcoll_probe_call *shmcoll__probe_start(shmcoll_comm *c, const char *collective,
                                                const void *send, void *recv, size_t count,
                                                shmcoll_dtype dt, shmcoll_op op, int root);
int shmcoll__probe_test(shmcoll_comm *c, struct shmcoll_probe_call *call, int *done);
int shmcoll__probe_wait(shmcoll_comm *c, struct shmcoll_probe_call *call);
void shmcoll__probe_free(struct shmcoll_probe_call *call);

/* The point-to-point ring parser on bytes from nowhere (the fuzz target tests/fuzz/
 * fuzz_p2p.c): a communicator of two ranks in private memory, rank 1 a fiction whose ring to
 * rank 0, head and tail words come from data; rank 0 tries the blocking receive's short cut
 * (flag 16; any tag with 32), has receives and sends outstanding (which receives, per the
 * flags byte) and progresses once. Input: a flags byte, the
 * ring's head word (4 bytes, host order; stored, not read: frames are found by their stamps,
 * whose salt is fixed in this fiction), the tail rank 1 shows for rank 0's ring to it (4),
 * then the ring's bytes. Returns 0, or the error the communicator broke with (-EPROTO for a frame
 * it refused). *ring_bytes (if not NULL) says how large the ring is. */
int shmcoll__probe_p2p_fuzz(const uint8_t *data, size_t len, size_t *ring_bytes);
/* A seed for it: what rank 1 writes for message set which (0, 1, 2, ...) through the real
 * sender, in that input form, into out (cap bytes). Its length, or 0 past the last set. */
size_t shmcoll__probe_p2p_seed(int which, uint8_t *out, size_t cap);

/* The leaders' transport on a leader ("io_uring" or "poll"), NULL elsewhere. */
const char *shmcoll__probe_transport(shmcoll_comm *c);

#endif
