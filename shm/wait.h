/* wait.h - the one bounded wait of shmcoll and its partner, publish: a waiter
 * spins, yields, then sleeps on a futex on the shared word; a publisher wakes
 * sleepers only when there are any. */
#ifndef SHMCOLL_SHM_WAIT_H
#define SHMCOLL_SHM_WAIT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/atomics.h"

/* How one rank waits. Filled once per communicator. */
struct shmcoll_waiter {
	int64_t timeout_ns;                 /* < 0: wait forever */
	const _Atomic uint32_t *abort_word; /* non-zero: give up with -ECANCELED */
	int oversubscribed;                 /* more ranks than CPUs: never spin, yield at once */
	/* Optional, on the slow path only: called at most every
	 * SHMCOLL_CHECK_NS while a wait lasts; a negative return (say
	 * -EOWNERDEAD from a liveness check) ends the wait with that code. */
	int (*check)(void *ctx);
	void *check_ctx;
	/* Optional: called every SHMCOLL_POLL_SPINS spins (slow 0) and at every
	 * turn of the slow path (slow 1), to move other work along while this wait
	 * lasts (a node communicator's point-to-point messages; on the slow path
	 * also every other communicator of the process). While it returns non-zero
	 * (there is such work), sleeps last at most SHMCOLL_POLL_SLICE_NS. */
	int (*poll)(void *ctx, int slow);
	void *poll_ctx;
};

#define SHMCOLL_POLL_SPINS    256
#define SHMCOLL_POLL_SLICE_NS 1000000

/* How often a long wait runs its check: dead peers are found within this
 * plus one sleep slice (wait.c), far inside the 1 s promised. */
#define SHMCOLL_CHECK_NS 10000000

/* Sets *word = val and wakes whoever sleeps on it. val must be later than the
 * current value (sequence numbers only grow). The store is a release: data
 * written before it is visible to a waiter that returns 0 from wait_geq.
 * Pairs with the fetch-add of sleepers in futex_sleep() (wait.c): no fence
 * on this side, a bounded first sleep on that one. */
void shmcoll__publish(_Atomic uint32_t *word, _Atomic uint32_t *sleepers, uint32_t val);
/* The same with a sequentially consistent store: the caller waits until the store is
 * visible to every CPU, which costs a hop when a peer holds word's line and next to
 * nothing when nobody polls it. */
void shmcoll__publish_fenced(_Atomic uint32_t *word, _Atomic uint32_t *sleepers, uint32_t val);

/* Where the waiter and the rank it waits for last waited (1 + the CPU
 * number, 0 before any, in their control lines): a wait that finds the other
 * last ran on its own CPU stops spinning, since that rank cannot run while
 * it spins. */
struct shmcoll_cpus {
	_Atomic int32_t *mine;         /* the waiter writes its CPU here */
	const _Atomic int32_t *theirs; /* the other's, as it last wrote it */
};

/* Waits until *word has reached want (wrap-safe). Returns 0 with acquire
 * ordering, -ETIMEDOUT once the waiter's timeout has passed since the wait
 * entered its slow path, -ECANCELED when *abort_word became non-zero, or
 * what the waiter's check returned when that was negative.
 * The fast path costs one relaxed load per spin and no system call. cpus
 * (may be NULL) tells the spin where the rank that publishes word runs. */
int shmcoll__wait_geq_on(const struct shmcoll_waiter *w, _Atomic uint32_t *word,
                         _Atomic uint32_t *sleepers, uint32_t want,
                         const struct shmcoll_cpus *cpus);
static inline int shmcoll__wait_geq(const struct shmcoll_waiter *w, _Atomic uint32_t *word,
                                    _Atomic uint32_t *sleepers, uint32_t want)
{
	return shmcoll__wait_geq_on(w, word, sleepers, want, NULL);
}

/* How a wait spins and yields (docs/ARCHITECTURE.md, "Waiting"), for the
 * waits written elsewhere (a spin on a message line, point-to-point's wait):
 *   spins  none with more ranks than CPUs; else at spin SHMCOLL_PACE_LOOK a
 *          wait asks shmcoll__pace_peer_here, which writes the waiter's CPU
 *          and says whether the other last waited on it: then the wait stops
 *          spinning. A peer on another CPU is spun for whether or not the
 *          machine is busy: if it runs, it answers within the spin; if not,
 *          the spin costs only this rank's own time.
 *   yield  one turn of the slow path: 1 after a sched_yield, or 0 when the
 *          turn should sleep on a futex instead: the wait began waited_ns
 *          ago, past the yielding time, or the CPU is contended. A yield that
 *          took longer than SHMCOLL_PACE_SLOW_YIELD_NS gave the CPU to work
 *          outside the waits; when two did within 50 ms and the machine has
 *          more runnable threads than the job has ranks (a busy machine),
 *          yields only lose time slices, so for SHMCOLL_PACE_CONTENDED_NS
 *          every wait of the process sleeps at once and is woken by the
 *          publish it waits for; then yields are tried again. */
#define SHMCOLL_PACE_LOOK          64
#define SHMCOLL_PACE_SLOW_YIELD_NS 1000000
#define SHMCOLL_PACE_CONTENDED_NS  100000000
int shmcoll__pace_peer_here(const struct shmcoll_cpus *cpus);
/* The spin at which a wait looks where its peer runs: SHMCOLL_PACE_LOOK, or the
 * first (0) when the process's last look found the peer on its CPU. Where the
 * scheduler keeps two unpinned ranks on one CPU, every wait would otherwise
 * spin SHMCOLL_PACE_LOOK times for a peer that cannot run: ~1 us a hand-off,
 * half the call (P=2 allreduce of 8 B beside two busy processes on the other
 * CPU: 4.5 us p50 against 1.7 this way). A wait that finds its word at the
 * first spin never looks; ranks on two CPUs never find each other on one, so
 * their waits look at spin SHMCOLL_PACE_LOOK as before. */
extern _Atomic int shmcoll__pace_peer_was_here;
static inline int shmcoll__pace_look(void)
{
	return load_relaxed(&shmcoll__pace_peer_was_here) ? 0 : SHMCOLL_PACE_LOOK;
}
int shmcoll__pace_yield(int64_t waited_ns, int64_t now);
/* Tells the pace how many ranks of a job share this node (the largest told
 * counts): slow yields mark the CPU contended only while the machine has more
 * runnable threads than that. */
void shmcoll__pace_job(unsigned ranks);
/* Whether this process found its CPU contended within SHMCOLL_PACE_CONTENDED_NS. */
int shmcoll__pace_contended(int64_t now);

/* Wakes every sleeper on word without changing it (abort uses this). */
void shmcoll__wake_all(_Atomic uint32_t *word);

/* Sleeps on word while it holds val, at most ns (a shared futex: peers are other
 * processes). Returns at once if it holds another value; may return early. */
void shmcoll__futex_wait(_Atomic uint32_t *word, uint32_t val, int64_t ns);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t shmcoll__now_ns(void);

#endif
