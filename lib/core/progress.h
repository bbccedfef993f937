/* progress.h - the progress of the whole process (MPI's progress rule: while a rank waits
 * on anything, or tests, every operation it has outstanding moves): a registry of the
 * communicators with operations outstanding, the one function that advances every one of
 * them no thread holds, and the background thread that runs it (SHMCOLL_PROGRESS_THREAD).
 * A leaf of lib/core: it knows communicators only by the advance function they register.
 * docs/ARCHITECTURE.md ("Progress") has the rules. */
#ifndef SHMCOLL_CORE_PROGRESS_H
#define SHMCOLL_CORE_PROGRESS_H

#include <stdatomic.h>
#include <stdint.h>

#include "shm/list.h"

#include "shm/atomics.h"

struct shmcoll_prog;

/* One pass over a communicator's outstanding operations that never waits: whether any of
 * them still needs moving (one merely complete and not yet waited for does not). */
typedef int (*shmcoll__prog_fn)(struct shmcoll_prog *p);

/* A communicator's place in the registry and its hold (embedded in it). Only a listed
 * communicator is ever passed over, and a pass never enters one its owner thread is inside
 * a call on. How that is kept depends on who passes over it:
 *   private  only the thread that listed it (its owner), between its own calls: the owner's
 *            call counts itself in depth (plain stores, no atomic operation) and the
 *            owner's own passes skip it while depth is not 0;
 *   shared   other threads too (the progress thread, other threads that list
 *            communicators, or a thread the communicator moved to): every call takes the
 *            hold, an atomic word (0 free, 1 the caller, 2 a pass), and passes take it
 *            with compare-and-swap and skip it when taken.
 * A communicator becomes shared, for good, at the start of its owner's next call once the
 * process has such a thread, or at a call from a thread other than its owner; until then
 * other threads skip it. Every pass, its owner's too, takes the hold: a thread it moved to
 * may be entering it. */
struct shmcoll_prog {
	struct shmcoll_link link; /* the registry's list: under its mutex */
	shmcoll__prog_fn advance; /* set once, before it is first listed */
	const void *owner;        /* the listing thread's token: set under the mutex */
	_Atomic uint32_t hold;
	_Atomic int shared;
	_Atomic unsigned depth; /* the caller's nested calls: written by the caller only */
	int listed;             /* on the list: the caller's (it lists and unlists) */
	unsigned epoch; /* the registry's epoch it was listed in (a fork begins a new one) */
};

/* The calling thread's token, and whether the process has a thread that passes over other
 * threads' communicators (progress.c owns it). The token is the thread pointer where the
 * compiler reads it (one load of %fs:0 on x86-64, of tpidr_el0 on arm64), unique among live
 * threads like any thread-local address; elsewhere a thread-local variable's address. Not the
 * variable everywhere: in a shared library its address is a __tls_get_addr call (dlopen
 * forbids the cheaper models), paid by every public call through shmcoll__prog_hold. */
extern _Thread_local char shmcoll__prog_me;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
#define SHMCOLL_PROG_ME ((const void *)__builtin_thread_pointer())
#else
#define SHMCOLL_PROG_ME ((const void *)&shmcoll__prog_me)
#endif
extern _Atomic int shmcoll__prog_shared;

/* The caller's hold of a listed p for the length of a call, as above: waits while another
 * thread's pass has it; nested holds count. Inline: a private communicator's costs plain
 * loads and stores (hold_slow takes the atomic hold). outermost: whether the caller's call
 * is the outermost one. */
void shmcoll__prog_hold_slow(struct shmcoll_prog *p);
static inline void shmcoll__prog_hold(struct shmcoll_prog *p)
{
	unsigned d = load_relaxed(&p->depth);

	store_relaxed(&p->depth, d + 1);
	if (!d && (load_relaxed(&p->shared) || p->owner != SHMCOLL_PROG_ME ||
	           load_relaxed(&shmcoll__prog_shared)))
		shmcoll__prog_hold_slow(p);
}
static inline void shmcoll__prog_unhold(struct shmcoll_prog *p)
{
	unsigned d = load_relaxed(&p->depth) - 1;

	store_relaxed(&p->depth, d);
	/* Release: what the call did is visible to the next pass that takes the hold. Shared
	 * is set only by an outermost call, which then took the hold. */
	if (!d && load_relaxed(&p->shared))
		store_release(&p->hold, 0);
}
static inline int shmcoll__prog_outermost(struct shmcoll_prog *p)
{
	return load_relaxed(&p->depth) == 1;
}

/* The owner lists p when it has operations outstanding (not holding it: nobody else can
 * touch an unlisted one), and unlists it, holding it, when it has none. */
void shmcoll__prog_list(struct shmcoll_prog *p);
void shmcoll__prog_unlist(struct shmcoll_prog *p);

/* Advances every listed communicator that no thread holds, each by one pass that never
 * waits; skips the ones held (their holder moves them) and returns at once while another
 * thread is at it (its pass covers them). Whether any it passed over (or might have) still
 * has work: a waiter then sleeps in short slices, as nobody wakes it for that work. Costs an
 * atomic load when nothing is listed. Any thread, any time (not from an advance function). */
int shmcoll__progress_all(void);

/* The background thread that runs the same passes while the callers compute, one for the
 * process however many communicators and rank threads it has. get takes a reference,
 * making the thread at the first (0, or a negative errno and no reference); put drops one,
 * and the last stops and joins it. kick wakes it after a start (it sleeps while nothing
 * listed needs moving); without a thread it is an atomic load, inline. */
int shmcoll__progress_thread_get(void);
void shmcoll__progress_thread_put(void);
extern _Atomic int shmcoll__progress_on; /* a thread runs: kick has someone to wake */
void shmcoll__progress_kick_slow(void);
static inline void shmcoll__progress_kick(void)
{
	if (load_relaxed(&shmcoll__progress_on))
		shmcoll__progress_kick_slow();
}

#endif
