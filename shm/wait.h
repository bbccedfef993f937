/* wait.h - the one bounded wait of shmcoll and its partner, publish: a waiter
 * spins, yields, then sleeps on a futex on the shared word; a publisher wakes
 * sleepers only when there are any. */
#ifndef SHMCOLL_SHM_WAIT_H
#define SHMCOLL_SHM_WAIT_H

#include <stdatomic.h>
#include <stdint.h>

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
 * Pairs with the fetch-add of sleepers in futex_sleep() (wait.c). */
void shmcoll__publish(_Atomic uint32_t *word, _Atomic uint32_t *sleepers, uint32_t val);

/* Waits until *word has reached want (wrap-safe). Returns 0 with acquire
 * ordering, -ETIMEDOUT once the waiter's timeout has passed since the wait
 * entered its slow path, -ECANCELED when *abort_word became non-zero, or
 * what the waiter's check returned when that was negative.
 * The fast path costs one relaxed load per spin and no system call. */
int shmcoll__wait_geq(const struct shmcoll_waiter *w, _Atomic uint32_t *word,
                      _Atomic uint32_t *sleepers, uint32_t want);

/* Wakes every sleeper on word without changing it (abort uses this). */
void shmcoll__wake_all(_Atomic uint32_t *word);

/* Sleeps on word while it holds val, at most ns (a shared futex: peers are other
 * processes). Returns at once if it holds another value; may return early. */
void shmcoll__futex_wait(_Atomic uint32_t *word, uint32_t val, int64_t ns);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t shmcoll__now_ns(void);

#endif
