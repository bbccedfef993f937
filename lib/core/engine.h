/* engine.h - the step engine every node collective runs on. A call is a sequence of steps:
 * in step s a rank writes what it contributes (its half s & 1 of its staging slot, or its
 * message s % msg_ring), publishes seq = s (release), waits for the ranks it depends
 * on to publish s (acquire) and reads what it needs from theirs. The first step of a call
 * also publishes its call word, which peers check (-EPROTO on a mismatch).
 *
 * Waits are awaits (task.h): each returns 0 once its condition holds, SHMCOLL_PENDING when
 * the task advances without blocking and the condition does not hold yet, or a negative
 * errno after which the communicator is broken. An await keeps its place in the task (k), so
 * calling it again with the same arguments continues it. docs/ARCHITECTURE.md ("The step
 * engine") has the reuse rule the guards keep. */
#ifndef SHMCOLL_CORE_ENGINE_H
#define SHMCOLL_CORE_ENGINE_H

#include <stddef.h>
#include <string.h>

#include "lib/core/state.h"
#include "lib/core/task.h"

/* Staging half of rank for step. */
static inline uint8_t *shmcoll__slot(const struct shmcoll_node *n, int rank, uint32_t step)
{
	const struct shmcoll_layout *l = &n->arena.lay;

	return n->arena.base + l->slot_off + (uint64_t)rank * l->slot_stride +
	       (step & 1) * l->slot_half;
}

/* Rank's message slot for step. */
static inline struct shmcoll_msg *shmcoll__msg(const struct shmcoll_node *n, int rank,
                                               uint32_t step)
{
	return &shmcoll__ctrl(&n->arena, (uint32_t)rank)->msg[step & (n->arena.lay.msg_ring - 1)];
}

/* Rank's data slot for step in the second ring (shm/arena.h, SHMCOLL_MSG_BIG): where a
 * message's data is when msg_publish put it there (shmcoll__msg_in_big), up to the layout's
 * msg_max bytes. */
static inline uint8_t *shmcoll__msg_big(const struct shmcoll_node *n, int rank, uint32_t step)
{
	return (uint8_t *)shmcoll__ctrl(&n->arena, (uint32_t)rank) + n->arena.lay.msg_big_off +
	       (size_t)(step & (n->arena.lay.msg_ring - 1)) * n->arena.lay.msg_max;
}

/* Elements of es bytes per staging chunk when each chunk is split into parts pieces (1 for
 * whole-vector collectives, size for per-peer ones). */
static inline size_t shmcoll__chunk_elems(const struct shmcoll_node *n, size_t es, size_t parts)
{
	return (size_t)(n->arena.lay.slot_half / (es * parts));
}

/* Stages chunk [off, off+len) of each of the parts blocks of src (block q starts at
 * q * block) at position q * len of slot: the layout of the collectives that split every
 * chunk per peer. */
static inline void shmcoll__stage_split(uint8_t *slot, const uint8_t *src, size_t parts,
                                        size_t block, size_t off, size_t len)
{
	for (size_t q = 0; q < parts; q++)
		memcpy(slot + q * len, src + q * block + off, len);
}

/* Where rank q's block lies among the blocks of every rank but skip, in rank order: what a
 * writer that leaves its own block out publishes (scatter's root, alltoall, the even v-forms). */
static inline size_t shmcoll__pos_without(int q, int skip)
{
	return (size_t)(q - (q > skip));
}

/* stage_split of the parts blocks but block skip: the others in order, block q at position
 * shmcoll__pos_without(q, skip). For the collectives in which the writer keeps its own block
 * (scatter's root, alltoall): it copies that from src itself, and its readers' chunks grow by a
 * part. */
static inline void shmcoll__stage_others(uint8_t *slot, const uint8_t *src, size_t parts,
                                         size_t skip, size_t block, size_t off, size_t len)
{
	shmcoll__stage_split(slot, src, skip, block, off, len);
	shmcoll__stage_split(slot + skip * len, src + (skip + 1) * block, parts - 1 - skip, block,
	                     off, len);
}

/* Parts of a chunk of those collectives: the peers' blocks (at least one). */
static inline size_t shmcoll__peer_parts(const struct shmcoll_node *n)
{
	return n->size > 1 ? (size_t)n->size - 1 : 1;
}

/* Begins the task's call, whose first step is the next one: builds its call word and
 * descriptor from the task (kind, dtype, op, root, count, algo) and sets t->d. Both stay private
 * until that step publishes them, so the line peers poll changes once per step, not twice. Staged
 * calls also forget the zero-copy buffers of the call before (inline calls do not use them). */
void shmcoll__describe(struct shmcoll_node *n, struct shmcoll_task *t);
static inline void shmcoll__describe_inline(struct shmcoll_node *n, struct shmcoll_task *t)
{
	uint32_t step = n->st.seq + 1;
	struct shmcoll_call *k = &n->st.call;
	struct shmcoll_desc *d = &n->st.desc;

	k->step = step;
	k->kind = (uint8_t)t->kind;
	k->dtype = (uint8_t)t->dtype;
	k->op = (uint8_t)t->op;
	k->algo = (uint8_t)t->algo;
	k->root = t->root;
	k->zc = 0;
	k->count = t->count;
	d->step = step; /* the rest is published by staged calls only (shmcoll__describe) */
	t->d = d;
}

/* Before writing anything shared for step s = seq + 1 (a staging half, a call word): every
 * rank that may read what this rank wrote at s - 2 has finished - every peer published
 * s - 1, unless `clean` says so already (then it costs a comparison). */
int shmcoll__await_guard(struct shmcoll_node *n, struct shmcoll_task *t);

/* Before an inline call writes its message for step s into slot s % msg_ring: every
 * peer is done with what the slot held (written at s - msg_ring or before), i.e. has
 * published the step after it. */
int shmcoll__await_msg_guard(struct shmcoll_node *n, struct shmcoll_task *t);

/* Publishes step seq + 1 without waiting; with first (the call's descriptor) it is the
 * call's first step and publishes the call word too. */
void shmcoll__publish_next(struct shmcoll_node *n, const struct shmcoll_desc *first);

/* Rank p has published step want. */
int shmcoll__await_rank(struct shmcoll_node *n, struct shmcoll_task *t, int p, uint32_t want);

/* Every peer has published the step this rank last published (then every peer has read all
 * this rank wrote before it: `clean` advances). */
int shmcoll__await_all(struct shmcoll_node *n, struct shmcoll_task *t);

/* After publishing a step: awaits rank from alone (checking its call word if first), every
 * peer (STEP_ALL, checking every call word if first: shmcoll__check_peers), or nobody
 * (STEP_NONE): the rooted protocols, where a rank waits only for the ranks it reads. */
#define STEP_ALL  (-1)
#define STEP_NONE (-2)
int shmcoll__await_from(struct shmcoll_node *n, struct shmcoll_task *t, int from, int first,
                        uint64_t src_bytes);

/* After the first step of a call: checks every peer's call word matches ours (-EPROTO,
 * communicator broken) and fills st.zc[p] with each rank's zero-copy source (NULL where it
 * staged) and st.zr[p] with its result in place, each checked to lie inside its heap for
 * src_bytes bytes. check_rank does it for rank p alone: for protocols that wait on some
 * ranks only, each checking the ones it waited for at the call's first step, while those
 * cannot yet have begun another call. */
int shmcoll__check_peers(struct shmcoll_node *n, struct shmcoll_task *t, uint64_t src_bytes);
int shmcoll__check_rank(struct shmcoll_node *n, struct shmcoll_task *t, int p, uint64_t src_bytes);

/* The inline path of single-step calls whose contribution fits the layout's msg_max bytes
 * (struct shmcoll_msg, shm/arena.h). msg_publish writes this rank's message for the task's
 * call (len 0 for a rank with nothing to give, which still describes its call) and publishes
 * the step; msg_publish2 the same with data in two pieces, one after the other.
 * await_msg gives rank p's data for that step once it is there, having checked its call
 * word (-EPROTO for a mismatch). Blocking, it spins on the message line itself (one
 * transfer brings stamp, call word and data) before the ordinary wait on seq. */
#define SHMCOLL_MSG_SPINS 4096
void shmcoll__msg_publish2(struct shmcoll_node *n, struct shmcoll_task *t, const void *a,
                           size_t alen, const void *b, size_t blen);
static inline void shmcoll__msg_publish(struct shmcoll_node *n, struct shmcoll_task *t,
                                        const void *data, size_t len)
{
	shmcoll__msg_publish2(n, t, data, len, NULL, 0);
}
int shmcoll__await_msg(struct shmcoll_node *n, struct shmcoll_task *t, int p, const uint8_t **data);

/* msg_publish in two halves, for a message built in place rather than copied in: msg_data
 * is this rank's message data for the task's step (SHMCOLL_INLINE_MAX bytes, free once the
 * message guard returned), msg_commit publishes its first len bytes. */
static inline uint8_t *shmcoll__msg_data(struct shmcoll_node *n, const struct shmcoll_task *t)
{
	return shmcoll__msg(n, n->rank, t->d->step)->data;
}
void shmcoll__msg_commit(struct shmcoll_node *n, struct shmcoll_task *t, size_t len);

/* Whether msg_publish puts len bytes of the task's call in the second ring (shm/arena.h):
 * beyond SHMCOLL_MSG_PACKED_MAX where there is one. reduce keeps 1 KiB packed: its root folds
 * straight from the messages, and 512-640 B measured 0.88-0.91x from the second ring. */
static inline int shmcoll__msg_in_big(const struct shmcoll_node *n, const struct shmcoll_task *t,
                                      size_t len)
{
	return len > (t->kind == KIND_REDUCE ? SHMCOLL_INLINE_MAX : SHMCOLL_MSG_PACKED_MAX) &&
	       n->arena.lay.msg_max > SHMCOLL_INLINE_MAX;
}

/* The data of this rank's own message for the task's step, of len bytes, where msg_publish put
 * it. From len, not the message: a peer may be taking that line just then. */
static inline const uint8_t *shmcoll__msg_mine(const struct shmcoll_node *n,
                                               const struct shmcoll_task *t, size_t len)
{
	return shmcoll__msg_in_big(n, t, len) ? shmcoll__msg_big(n, n->rank, t->d->step)
	                                      : shmcoll__msg(n, n->rank, t->d->step)->data;
}

/* This rank's own data space for the task's step, for len bytes (at most msg_max): its
 * message's data, or beyond SHMCOLL_INLINE_MAX its slot of the second ring. Scratch for a
 * rank that published its message with no data: nobody reads data a message does not carry,
 * and the message guard freed it. */
static inline uint8_t *shmcoll__msg_scratch(struct shmcoll_node *n, const struct shmcoll_task *t,
                                            size_t len)
{
	return len > SHMCOLL_INLINE_MAX ? shmcoll__msg_big(n, n->rank, t->d->step)
	                                : shmcoll__msg_data(n, t);
}

/* The len rank p committed with its message for the task's step (without SHMCOLL_MSG_BIG:
 * where the data is, await_msg's pointer says). */
static inline uint32_t shmcoll__msg_len(const struct shmcoll_node *n, const struct shmcoll_task *t,
                                        int p)
{
	return shmcoll__msg(n, p, t->d->step)->len & ~(uint32_t)SHMCOLL_MSG_BIG;
}

/* memcpy of a length the compiler can bound (checked against SHMCOLL_INLINE_MAX just
 * before): gcc would expand it inline as `rep movsq`, whose start-up cost made 128-512 byte
 * blocks 1.3-1.5x slower than libc's memcpy (measured on scatterv's message at P=2).
 * Hiding the bound keeps the call. */
static inline void *shmcoll__memcpy_call(void *dst, const void *src, size_t n)
{
	__asm__("" : "+r"(n));
	return memcpy(dst, src, n);
}

/* Before reading message data at an offset the message itself gives (a table entry), or
 * whose length it checks first (gatherv's root): starts the transfer of [off, off + len) of
 * data m, off and len a guess the caller makes from its own counts (right when the blocks
 * are even). The read of the entry and the transfer of the
 * block then overlap instead of following each other: measured, a cross-core hop less per
 * call once the block leaves the message's first line. A wrong guess costs nothing but the
 * prefetch. */
static inline void shmcoll__msg_prefetch(const uint8_t *m, size_t off, size_t len)
{
	uintptr_t a, end;

	if (len && off + len <= SHMCOLL_INLINE_MAX)
		for (a = shmcoll__lines(m + off, len, &end); a < end; a += 64)
			__builtin_prefetch((const void *)a);
}

/* How much of the next message bcast's, scatter's and reduce's readers prefetch
 * (shmcoll__msg_prefetch_next): data to the end of its fourth line. Prefetching all of it
 * made a bcast of 256 B 0.83x and a reduce of 512 B-1 KiB 0.70-0.73x, and with this bound
 * neither was slower (P=2, 60 ns hop, docs/BENCHMARKS.md); their readers are not always the
 * slower side, and a prefetch of a message still being written takes its lines from under
 * the writer. A gather root, always behind its writers, prefetches the whole block. */
#define SHMCOLL_MSG_PREFETCH_MAX (4 * 64 - offsetof(struct shmcoll_msg, data))

/* A rooted call's reader, done with writer p's message of this call, of which it read the
 * len bytes at off: starts the transfer of the same range of p's next message, from its
 * second line and up to data offset upto. A rooted writer runs ahead of its readers by up to
 * the ring (16 calls), so where the reader is the slower side (a gather's or reduce's root,
 * and often a bcast's or scatter's readers) that message is there already, and its lines
 * arrive while the reader finishes this call. The first line, with the stamp, is left out:
 * the reader loads it once a call at the ring's fixed stride, which the CPU's own prefetcher
 * follows; the lines after it are read by memcpy or a kernel at no stride it can see, so each
 * was a cross-core transfer on the call's path (a gather root with 64 bytes a rank: 0.12-0.16
 * against 0.05 us a call with 32). Where the next message is not written yet, the prefetch
 * fetches lines its writer takes back when it writes them, as it would have anyway. Data in
 * the second ring is read in longer copies, which the CPU's streamer follows: not here. */
static inline void shmcoll__msg_prefetch_next(const struct shmcoll_node *n,
                                              const struct shmcoll_task *t, int p, size_t off,
                                              size_t len, size_t upto)
{
	const size_t second = 64 - offsetof(struct shmcoll_msg, data); /* the data's 2nd line */
	size_t from = off > second ? off : second, to = off + len < upto ? off + len : upto;

	if (to > from && !(shmcoll__msg(n, p, t->d->step)->len & SHMCOLL_MSG_BIG))
		shmcoll__msg_prefetch(shmcoll__msg(n, p, t->d->step + 1)->data, from, to - from);
}

/* After publishing its message: puts every rank's block of bytes bytes, in rank order, into
 * recv - this rank's from send unless it is there already (in place), every peer's from its
 * message. (gather's root, allgather.) */
int shmcoll__await_msg_gather(struct shmcoll_node *n, struct shmcoll_task *t, const uint8_t *send,
                              uint8_t *recv, size_t bytes);

/* After this rank read the message of the task's call from every peer it has: each of them
 * has begun that call, so has read all this rank wrote before it. Said only where that is
 * one peer (P = 2), which spares the next inline call's guard a look at it; the collectives
 * that read every peer's message say it themselves. */
static inline void shmcoll__msg_seen(struct shmcoll_node *n, const struct shmcoll_task *t)
{
	if (n->size == 2)
		n->st.clean = t->d->step - 1;
}

/* Whether a rank other than skip (-1: none) let peers read its buffer in place in this call:
 * then the call ends with one more step (publish, await_all), so nobody returns - and lets
 * its caller reuse the buffer - while a peer still reads it. */
int shmcoll__zc_any(const struct shmcoll_node *n, int skip);

#endif
