/* shmcoll.h - the public API of shmcoll: collective operations for processes (or threads) of
 * one machine that meet in a POSIX shared-memory arena. docs/API.md is the guide to it; the
 * comments here are the contract, and the rules below hold for every function.
 *
 * Results. Every int function returns 0 or a negative errno value; shmcoll_strerror() names
 * a code, shmcoll_last_error() gives this rank's detailed message. The library never prints,
 * exits or aborts on a caller's error, and a failed call writes no buffer it was not asked
 * to write.
 *
 * Collective and local. A collective call must be made by every rank of the communicator,
 * and the collective calls on one communicator (the collectives, shmcoll_malloc,
 * shmcoll_free, shmcoll_comm_split and shmcoll_comm_dup) must be made in the same order on
 * every rank, with the same count, dtype, op and root. A local call involves no other rank.
 *
 * Blocking. Every call returns when this rank's part of it is complete: its output is
 * written and all its buffers may be reused or freed. That says nothing of the other ranks:
 * the root of a small bcast may return before the others have received its data (copied out
 * first); only shmcoll_barrier returns after every rank has entered it.
 *
 * Buffers. count is in elements of dtype and per rank, as in NCCL: a buffer that holds one
 * block per rank holds size * count elements. Any count is valid, 0 included (the call then
 * checks its arguments and returns without waiting for any peer); a buffer may be NULL only
 * when it has no bytes to move or the call ignores it on this rank. sendbuf == recvbuf is the
 * in-place form where a function names it; send and receive buffers that overlap in any
 * other way are -EINVAL. Buffers stay the caller's: the library uses them only during the
 * call and keeps no pointer to them. Ranks that are threads of one process pass buffers of
 * their own.
 *
 * Failure of the communicator. Arguments are checked before any rank waits for another, so
 * -EINVAL comes at once, on the caller alone, and leaves the communicator usable. A wait
 * that fails breaks the communicator for every rank: -ETIMEDOUT (a peer did not arrive
 * within the timeout), -EOWNERDEAD (a peer process died), -EPROTO (the ranks' calls do not
 * match, or a peer destroyed its communicator while this rank waits for it). So do -EIO (a
 * direct read of a peer's buffer failed: a buffer shorter than its count) and -ENOMEM inside
 * a collective. After that every call on the communicator returns -ECANCELED, on every
 * rank, until it is destroyed. Any collective call may return these, on top of its own
 * -EINVAL cases.
 *
 * Threads. A communicator is used by one thread at a time, except shmcoll_comm_abort.
 * Different communicators may be used by different threads at once, and the ranks of one
 * communicator may be threads of one process (each with its own shmcoll_comm). */
#ifndef SHMCOLL_H
#define SHMCOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the library's exported functions: it is built with hidden visibility, so only these
 * are visible. Define SHMCOLL_STATIC_BUILD to drop the attribute. */
#if defined(__GNUC__) && !defined(SHMCOLL_STATIC_BUILD)
#define SHMCOLL_API __attribute__((visibility("default")))
#else
#define SHMCOLL_API
#endif

/* The version of this header and its library: the one place it is written (meson.build
 * reads it from here). */
#define SHMCOLL_VERSION_MAJOR 0
#define SHMCOLL_VERSION_MINOR 1
#define SHMCOLL_VERSION_PATCH 0

/* One rank's handle on a communicator: a group of ranks 0 .. size-1 that run collectives
 * together. Opaque; made by shmcoll_init, shmcoll_comm_create, shmcoll_comm_create_oob,
 * shmcoll_comm_split or shmcoll_comm_dup, and released by shmcoll_comm_destroy. */
typedef struct shmcoll_comm shmcoll_comm; /* opaque */

/* Element types, in host byte order. float16 and bfloat16 travel as 16-bit storage
 * (uint16_t) holding the bit pattern. An unknown value is -EINVAL. */
typedef enum shmcoll_dtype {
	SHMCOLL_INT8,       /* int8_t */
	SHMCOLL_UINT8,      /* uint8_t */
	SHMCOLL_INT32,      /* int32_t */
	SHMCOLL_UINT32,     /* uint32_t */
	SHMCOLL_INT64,      /* int64_t */
	SHMCOLL_UINT64,     /* uint64_t */
	SHMCOLL_FLOAT16,    /* IEEE 754 binary16 */
	SHMCOLL_BFLOAT16,   /* bfloat16 */
	SHMCOLL_FLOAT32,    /* float, IEEE 754 binary32 */
	SHMCOLL_FLOAT64,    /* double, IEEE 754 binary64 */
	SHMCOLL_DTYPE_COUNT /* the number of types; not a type */
} shmcoll_dtype;

/* Element-wise reductions. Every rank receives the same bits, whatever the protocol or the
 * instruction set (on one node the ranks' values are folded in rank order). Integer SUM and
 * PROD wrap modulo 2^bits. float32 and float64 accumulate in their own type; float16 and
 * bfloat16 are widened to float32, folded there and rounded once, to nearest even. NaNs
 * propagate (docs/KERNELS.md has the exact rule). AVG divides the sum by the communicator's
 * size: for integers the exact sum (it does not wrap), truncated toward zero; for the 16-bit
 * floats in float32, before the one rounding. BAND, BOR and BXOR are bitwise and, or, xor.
 * An unknown value, or a bitwise op on a floating type, is -EINVAL. */
typedef enum shmcoll_op {
	SHMCOLL_SUM,
	SHMCOLL_PROD,
	SHMCOLL_MIN,
	SHMCOLL_MAX,
	SHMCOLL_AVG, /* sum / size; integers truncate toward zero */
	SHMCOLL_BAND,
	SHMCOLL_BOR,
	SHMCOLL_BXOR,    /* integer types only */
	SHMCOLL_OP_COUNT /* the number of ops; not an op */
} shmcoll_op;

/* What shmcoll_comm_create needs to know. Every rank of the job passes the same size, job,
 * arena_bytes and timeout_ms, and a rank of its own; the struct and the job string are read
 * during the call only.
 * rank         this caller's rank; no two callers of one job share one.
 * size         1 .. 1024.
 * job          a non-empty string. It names the job's arena, so no live job of the same user
 *              on this machine may be using it (rank 0 then fails with -EEXIST).
 * arena_bytes  the size of the whole shared arena; rank 0's value decides. 0: the
 *              environment's SHMCOLL_ARENA_BYTES, else the default: 256 KiB of staging and a
 *              4 MiB symmetric heap (shmcoll_malloc) per rank, shrunk to fit the free space
 *              of /dev/shm and of the memory cgroup. A size of the caller's is split between
 *              staging and the heaps; too small for size ranks is -EINVAL, more than
 *              /dev/shm has room for -ENOSPC.
 * timeout_ms   the bound on every wait for a peer, this call's wait for the others included.
 *              0: SHMCOLL_TIMEOUT_MS from the environment, else 300000 (5 minutes); < 0: no
 *              bound. */
typedef struct shmcoll_config {
	int rank;           /* 0 .. size-1 */
	int size;           /* ranks in the communicator, >= 1 */
	const char *job;    /* name shared by every rank of one job; ranks with the same job meet */
	size_t arena_bytes; /* 0: the library's default */
	int timeout_ms;     /* 0: the default (SHMCOLL_TIMEOUT_MS or the library's own); <0: wait
	                       forever */
} shmcoll_config;

/* The fixed text for an error code, negative or positive ("success" for 0, "unknown error"
 * for a code shmcoll does not return). Local; never NULL; the string is static. */
SHMCOLL_API const char *shmcoll_strerror(int err);

/* Detailed message of this rank's last failure on comm: the function and what went wrong
 * (which argument, which peer, which step); "" if no call failed, or a collective call on
 * comm has succeeded since. With comm == NULL (an addition to the contract): the message of
 * the calling thread's last shmcoll_init, shmcoll_comm_create or shmcoll_comm_create_oob,
 * "" if it succeeded. Local; never NULL. The string belongs to comm (or to the thread) and
 * may change at the next call on comm (or the thread's next create). */
SHMCOLL_API const char *shmcoll_last_error(const shmcoll_comm *comm);

/* Where comm's protocol thresholds come from (an addition to the contract): "tuning file
 * PATH" (the file shmcoll-tune wrote, as rank 0 of the node read it at create; every rank
 * of the node takes rank 0's), "built-in (...)" with the reason when there is none, or
 * "built-in: tuning file PATH rejected: line N: why" when the file was there but not valid
 * (the create succeeds; the built-in thresholds are used), followed by what the copy probe
 * measured where it ran at create ("; 256 KiB across cores at create: ..."). SHMCOLL_TUNE
 * names the file ("none": no file, and no probe); the default is <sysconfdir>/shmcoll/tune of
 * the installation. Local;
 * never NULL; the string belongs to comm. On a communicator over several nodes: this rank's
 * node's. */
SHMCOLL_API const char *shmcoll_comm_tuning(const shmcoll_comm *comm);

/* Communicators. */

/* Collective over the job the launcher started, read from the environment; the first
 * launcher present wins:
 * 1. shmcoll-run: SHMCOLL_RANK, SHMCOLL_SIZE and SHMCOLL_JOB, which must be set all three or
 *    none. With SHMCOLL_NNODES > 1 (shmcoll-run --nnodes) the communicator spans nodes: the
 *    ranks of each node share memory and one rank per node talks to the other nodes over
 *    TCP; every call keeps its meaning.
 * 2. torchrun: RANK, WORLD_SIZE (LOCAL_RANK, LOCAL_WORLD_SIZE if set), MASTER_ADDR,
 *    MASTER_PORT; the job is named by those two, TORCHELASTIC_RUN_ID and
 *    TORCHELASTIC_RESTART_COUNT.
 * 3. Open MPI: OMPI_COMM_WORLD_RANK, _SIZE (_LOCAL_RANK, _LOCAL_SIZE); named by
 *    OMPI_MCA_ess_base_jobid and/or PMIX_NAMESPACE (one is required), with mpirun's transport
 *    key and address where set.
 * 4. MPICH (Hydra): PMI_RANK, PMI_SIZE (MPI_LOCALRANKID, MPI_LOCALNRANKS); Hydra names the job
 *    in no variable, so it is named by the process that forked the ranks: the nearest
 *    ancestor called hydra_pmi_proxy, else the parent (pid, start time, pid namespace), and
 *    PMI_PORT / PMI_JOBID where set.
 * 5. Slurm, for a task of an srun step: SLURM_PROCID, SLURM_NTASKS (SLURM_LOCALID,
 *    SLURM_STEP_NUM_NODES); named by SLURM_JOB_ID and SLURM_STEP_ID, both required.
 * 6. None of these: the caller is a job of one rank of its own.
 * A launcher is present when its rank or size variable is set (Slurm: SLURM_PROCID and
 * SLURM_STEP_ID). For 2-5 the job name is "<launcher>-<64-bit hash of the user and those
 * variables>": the same on every rank of one job, different between concurrent jobs, successive
 * steps or restarts of one, and users. Under 2-5 a job must lie on one node: a local size below the
 * size, a node count above 1, or (with no local size) a local rank other than the rank is -ENOTSUP;
 * use shmcoll-run --nnodes for such jobs. Then as shmcoll_comm_create with {rank, size, job},
 * arena_bytes = 0 and timeout_ms = 0.
 * Waits until every rank has arrived. On success *comm is the caller's to destroy; on
 * failure *comm = NULL (if comm is not NULL) and shmcoll_last_error(NULL) says why, naming
 * the variable at fault.
 * Errors: -EINVAL: comm is NULL; the launcher's variables are missing (one set without its
 * partners), not whole numbers, out of range (rank >= size, local rank >= local size, more
 * than 1024 ranks) or disagree; in a multi-node job, SHMCOLL_NET or SHMCOLL_NET_ZC_MIN has a
 * bad value. -ENOTSUP: a multi-node job in a build without liburing, or a job over several
 * nodes under another launcher than shmcoll-run. Otherwise what shmcoll_comm_create returns,
 * and in a multi-node job the failures of its connections (-ETIMEDOUT, -EOWNERDEAD,
 * -EPROTO). */
SHMCOLL_API int shmcoll_init(shmcoll_comm **comm);

/* Collective over the ranks that pass the same cfg->job: makes one communicator of
 * cfg->size ranks, for embedding shmcoll in a program or library that knows its ranks
 * (processes or threads of this machine, run by the same user). Rank 0 creates the job's
 * arena, the others attach to it; the call waits until every rank has attached, within the
 * timeout. On success *comm is the caller's to destroy; on failure *comm = NULL (if comm is
 * not NULL) and shmcoll_last_error(NULL) says why.
 * Errors: -EINVAL: comm or cfg is NULL, size out of 1 .. 1024, rank out of range, job NULL or
 * empty, arena_bytes too small for size ranks, or a bad value in one of the environment
 * variables that tune the library (SHMCOLL_ARENA_BYTES, SHMCOLL_ALGO, SHMCOLL_CHUNK_BYTES,
 * SHMCOLL_NT, SHMCOLL_CMA, SHMCOLL_CMA_MIN).
 * -ENOMEM: out of memory. -ENOSPC: /dev/shm (or the memory cgroup) has no room for the arena.
 * -ETIMEDOUT: rank 0 did not create the arena, or not every rank attached, within the
 * timeout. -EEXIST: a live job already uses this job name. -EPROTO: what is there under that
 * name is not a valid arena for size ranks. Or another negative errno of the shared-memory
 * system calls (-EACCES, -EMFILE). */
SHMCOLL_API int shmcoll_comm_create(const shmcoll_config *cfg, shmcoll_comm **comm);

/* Every rank calls it once, when it is done with comm, even after comm broke: it releases
 * this rank's memory, mapping and symmetric buffers, and comm is invalid afterwards. It
 * waits for no peer (every collective already waited for whoever reads this rank's data); a
 * peer still waiting for this rank in a collective then fails with -EPROTO. The arena's name
 * is gone from /dev/shm once every rank has attached; its memory goes with the last rank.
 * Returns 0; -EINVAL if comm is NULL; -EBUSY, changing nothing, if operations are still
 * outstanding on comm: non-blocking operations started and not yet returned by
 * shmcoll_wait, shmcoll_test or shmcoll_waitall (even if finished in the background). A rank that
 * exits without destroying comm is seen by its peers as dead (-EOWNERDEAD). */
SHMCOLL_API int shmcoll_comm_destroy(shmcoll_comm *comm);

/* Local: breaks comm for every rank. Each rank's pending call and every later call return
 * -ECANCELED (on other nodes of a multi-node communicator, a pending call may see the lost
 * connection first: -EOWNERDEAD). Returns at once with 0, or -EINVAL if comm is NULL. May be
 * called from another thread while this rank is inside a call on comm, or from a signal
 * handler (async-signal-safe on a communicator within one node: atomics and futex wake-ups
 * only). comm must still be destroyed. */
SHMCOLL_API int shmcoll_comm_abort(shmcoll_comm *comm);

/* Local: this rank's rank in comm (0 .. size-1), and the number of ranks in comm; -EINVAL if
 * comm is NULL. Valid on a broken communicator too. */
SHMCOLL_API int shmcoll_comm_rank(const shmcoll_comm *comm);
SHMCOLL_API int shmcoll_comm_size(const shmcoll_comm *comm);

/* Symmetric memory (zero copy). */

/* Collective, with the same bytes on every rank: returns a buffer of bytes inside this
 * rank's part of the shared memory (its symmetric heap), at the same offset on every rank,
 * aligned to 128 bytes, contents unspecified. A collective whose send buffer lies in it is
 * read by the peers where it is, with no staging copy (an in-place call still stages: the
 * caller overwrites the buffer while peers would read it). It is ordinary memory otherwise,
 * and any collective takes it or any other buffer. It stays valid until shmcoll_free or
 * shmcoll_comm_destroy. The heap starts in the arena (4 MiB per rank by default: see
 * arena_bytes) and grows on demand: a call it cannot hold makes a new shared segment of at
 * least the request and at least the heap so far (per rank), which every rank maps and
 * whose name is removed at once, as the arena's is. Returns NULL on failure, with
 * shmcoll_last_error(comm) saying why, and comm usable: bytes is 0, or there is no room for
 * the segment in /dev/shm or the memory cgroup (every rank learns it alike). Or comm is NULL
 * or broken, or ranks passed different sizes (-EPROTO: comm is broken). On a communicator
 * over several nodes the heap is per node; a node without room makes every rank return
 * NULL, and comm stays usable. */
SHMCOLL_API void *shmcoll_malloc(shmcoll_comm *comm, size_t bytes);

/* Collective: releases ptr, which shmcoll_malloc returned on comm; every rank frees its own
 * pointer of the same allocation, in the same order. ptr == NULL is a local no-op that
 * returns 0. Errors: -EINVAL: comm is NULL, or ptr did not come from shmcoll_malloc on comm
 * (found locally, before any wait; on a communicator over several nodes it breaks comm).
 * Otherwise the failures of any collective. */
SHMCOLL_API int shmcoll_free(shmcoll_comm *comm, void *ptr);

/* Collectives. count is in elements of dtype, per rank as in NCCL. */

/* Every rank's recvbuf (count elements) receives op over all ranks' sendbuf (count
 * elements). In place: sendbuf == recvbuf. Errors: -EINVAL: comm is NULL, unknown dtype or
 * op, op not defined on dtype, count * elemsize overflows, a NULL buffer with count > 0, or
 * buffers that partly overlap. */
SHMCOLL_API int shmcoll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                  shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *comm);

/* The root's recvbuf (count elements) receives op over all ranks' sendbuf (count elements).
 * recvbuf is used on the root only (it may be NULL elsewhere); every rank, the root
 * included, passes sendbuf. In place, on the root: sendbuf == recvbuf. Errors: -EINVAL: as
 * shmcoll_allreduce, or root out of 0 .. size-1. */
SHMCOLL_API int shmcoll_reduce(const void *sendbuf, void *recvbuf, size_t count,
                               shmcoll_dtype dtype, shmcoll_op op, int root, shmcoll_comm *comm);

/* The root's buf (count elements) is copied into every other rank's buf. Errors: -EINVAL:
 * comm is NULL, unknown dtype, count * elemsize overflows, buf NULL with count > 0, or root
 * out of 0 .. size-1. */
SHMCOLL_API int shmcoll_bcast(void *buf, size_t count, shmcoll_dtype dtype, int root,
                              shmcoll_comm *comm);

/* Every rank's recvbuf (size * sendcount elements) receives all ranks' sendbuf (sendcount
 * elements each), in rank order: rank r's block at element r * sendcount. In place: sendbuf
 * == recvbuf + rank * sendcount * elemsize (this rank's block already in place). Errors:
 * -EINVAL: comm is NULL, unknown dtype, size * sendcount * elemsize overflows, a NULL buffer
 * with sendcount > 0, or buffers that partly overlap. */
SHMCOLL_API int shmcoll_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                  shmcoll_dtype dtype, shmcoll_comm *comm);

/* op over all ranks' sendbuf (size * recvcount elements each), of which rank r's recvbuf
 * (recvcount elements) receives block r, elements r * recvcount .. (r + 1) * recvcount - 1.
 * In place: recvbuf == sendbuf + rank * recvcount * elemsize. Errors: -EINVAL: as
 * shmcoll_allreduce, with size * recvcount * elemsize for the overflow. */
SHMCOLL_API int shmcoll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                       shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *comm);

/* The root's recvbuf (size * sendcount elements) receives all ranks' sendbuf (sendcount
 * elements each) in rank order. recvbuf is used on the root only (it may be NULL
 * elsewhere). In place, on the root: sendbuf == recvbuf + root * sendcount * elemsize (an
 * addition to the contract). Errors: -EINVAL: as shmcoll_allgather, or root out of
 * 0 .. size-1. */
SHMCOLL_API int shmcoll_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                               shmcoll_dtype dtype, int root, shmcoll_comm *comm);

/* Rank r's recvbuf (recvcount elements) receives block r of the root's sendbuf (size *
 * recvcount elements). sendbuf is used on the root only (it may be NULL elsewhere). In
 * place, on the root: recvbuf == sendbuf + root * recvcount * elemsize (an addition to the
 * contract). Errors: -EINVAL: comm is NULL, unknown dtype, size * recvcount * elemsize
 * overflows, a NULL buffer with recvcount > 0, buffers that partly overlap, or root out of
 * 0 .. size-1. */
SHMCOLL_API int shmcoll_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                shmcoll_dtype dtype, int root, shmcoll_comm *comm);

/* Block q of rank r's sendbuf lands as block r of rank q's recvbuf; a block is count
 * elements, and both buffers hold size * count. In place: sendbuf == recvbuf. Errors:
 * -EINVAL: as shmcoll_allgather, with size * count elements in each buffer. */
SHMCOLL_API int shmcoll_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                                 shmcoll_dtype dtype, shmcoll_comm *comm);

/* Returns once every rank has entered it. Errors: -EINVAL: comm is NULL. */
SHMCOLL_API int shmcoll_barrier(shmcoll_comm *comm);

/* Point-to-point. Messages between two ranks of one communicator, on every kind of
 * communicator. A message is bytes: count elements of dtype; the receive's dtype gives the
 * element size of its capacity and of status->count. Messages of one sender to one
 * receiver with the same tag arrive in the order they were sent (MPI's non-overtaking
 * rule); different tags are independent streams. A receive with SHMCOLL_ANY_SOURCE or
 * SHMCOLL_ANY_TAG takes, among one sender's matching messages, the earliest sent. A rank
 * may send to itself. Point-to-point and collectives on one communicator never match each
 * other. Errors of every call below: -EINVAL: comm is NULL, unknown dtype, count * elemsize
 * overflows, a NULL buffer with count > 0, a rank out of range (SHMCOLL_ANY_SOURCE only as
 * a source), a tag out of 0 .. SHMCOLL_TAG_MAX (SHMCOLL_ANY_TAG only as a receive's tag);
 * -EMSGSIZE (receives only, the communicator stays usable): the message was longer than
 * count elements; the first count elements are written, status says what arrived, the rest
 * is dropped and the sender's call succeeds. Otherwise the failures of any call
 * (-ETIMEDOUT, -EOWNERDEAD, -EPROTO, -ECANCELED), which break the communicator. */
#define SHMCOLL_ANY_SOURCE (-1)       /* recv: from whichever rank's message matches first */
#define SHMCOLL_ANY_TAG    (-1)       /* recv: any tag */
#define SHMCOLL_TAG_MAX    0x7fffffff /* the largest tag */

/* What a receive got. The fields after count are additions to the contract. */
typedef struct shmcoll_status {
	int source;   /* the sender's rank */
	int tag;      /* the message's tag */
	size_t count; /* elements of the receive dtype that arrived (written) */
	size_t bytes; /* bytes written (count * elemsize, unless the message's bytes were not
	               * whole elements of the receive dtype) */
	size_t total; /* bytes the message had: more than bytes when it was truncated */
	int error;    /* the operation's result (shmcoll_waitall fills every entry) */
} shmcoll_status;

/* Returns when buf may be reused. Messages up to the eager size (16 KiB by default, less with
 * many ranks: docs/API.md) are copied out at once; a larger one may wait for the matching
 * receive, so two ranks that both send a large message to each other before receiving may
 * wait until the timeout, as in MPI; shmcoll_sendrecv and the non-blocking forms never
 * do. */
SHMCOLL_API int shmcoll_send(const void *buf, size_t count, shmcoll_dtype dtype, int dest, int tag,
                             shmcoll_comm *comm);
/* An addition: the synchronous send (MPI_Ssend): returns once a receive has matched the
 * message (however small it is), so a program may take its return as the receiver's
 * having started to take it. Across nodes it is shmcoll_send. */
SHMCOLL_API int shmcoll_ssend(const void *buf, size_t count, shmcoll_dtype dtype, int dest, int tag,
                              shmcoll_comm *comm);
/* Receives into buf (capacity count elements) the earliest matching message; status may be
 * NULL. */
SHMCOLL_API int shmcoll_recv(void *buf, size_t count, shmcoll_dtype dtype, int source, int tag,
                             shmcoll_comm *comm, shmcoll_status *status);
/* A send and a receive that proceed together (no deadlock between two ranks that both
 * call it); the two buffers must not overlap (-EINVAL). */
SHMCOLL_API int shmcoll_sendrecv(const void *sendbuf, size_t sendcount, shmcoll_dtype sendtype,
                                 int dest, int sendtag, void *recvbuf, size_t recvcount,
                                 shmcoll_dtype recvtype, int source, int recvtag,
                                 shmcoll_comm *comm, shmcoll_status *status);
/* Additions: whether a message matching (source, tag) has arrived, without receiving it;
 * status (may be NULL) says its source, tag and size (count in elements of dtype). iprobe
 * sets *flag and returns at once; probe waits for one. */
SHMCOLL_API int shmcoll_iprobe(int source, int tag, shmcoll_dtype dtype, shmcoll_comm *comm,
                               int *flag, shmcoll_status *status);
SHMCOLL_API int shmcoll_probe(int source, int tag, shmcoll_dtype dtype, shmcoll_comm *comm,
                              shmcoll_status *status);

/* Non-blocking operations. Each starts its operation and returns 0 with *req set, or an
 * error with *req = NULL (its blocking form's -EINVAL cases, or the communicator's failure),
 * having started nothing. A started operation owns its buffers until it completes: the
 * caller must not write them (nor read a receive buffer) before then. It advances whenever
 * this rank is inside any shmcoll call on its communicator, whenever this process waits or
 * tests on anything (a request of any communicator, or a blocking call waiting for a peer:
 * MPI's progress rule), and in the background with SHMCOLL_PROGRESS_THREAD=1 (docs/API.md).
 * Collectives, blocking and non-blocking, must be started in the same order on every rank;
 * they may complete in any order. Any number may be outstanding per communicator. After
 * -ETIMEDOUT, -EOWNERDEAD, -EPROTO or an abort every outstanding operation completes with
 * that error or -ECANCELED. */
typedef struct shmcoll_request shmcoll_request; /* opaque */

SHMCOLL_API int shmcoll_isend(const void *buf, size_t count, shmcoll_dtype dtype, int dest, int tag,
                              shmcoll_comm *comm, shmcoll_request **req);
SHMCOLL_API int shmcoll_irecv(void *buf, size_t count, shmcoll_dtype dtype, int source, int tag,
                              shmcoll_comm *comm, shmcoll_request **req);
/* An addition: shmcoll_ssend's start (MPI_Issend): the request completes once a receive has
 * matched the message. */
SHMCOLL_API int shmcoll_issend(const void *buf, size_t count, shmcoll_dtype dtype, int dest,
                               int tag, shmcoll_comm *comm, shmcoll_request **req);

/* One for every collective: the blocking form's arguments, then req. */
SHMCOLL_API int shmcoll_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                                   shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *comm,
                                   shmcoll_request **req);
SHMCOLL_API int shmcoll_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                                shmcoll_dtype dtype, shmcoll_op op, int root, shmcoll_comm *comm,
                                shmcoll_request **req);
SHMCOLL_API int shmcoll_ibcast(void *buf, size_t count, shmcoll_dtype dtype, int root,
                               shmcoll_comm *comm, shmcoll_request **req);
SHMCOLL_API int shmcoll_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                   shmcoll_dtype dtype, shmcoll_comm *comm, shmcoll_request **req);
SHMCOLL_API int shmcoll_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                        shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *comm,
                                        shmcoll_request **req);
SHMCOLL_API int shmcoll_igather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                shmcoll_dtype dtype, int root, shmcoll_comm *comm,
                                shmcoll_request **req);
SHMCOLL_API int shmcoll_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                 shmcoll_dtype dtype, int root, shmcoll_comm *comm,
                                 shmcoll_request **req);
SHMCOLL_API int shmcoll_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                                  shmcoll_dtype dtype, shmcoll_comm *comm, shmcoll_request **req);
SHMCOLL_API int shmcoll_ibarrier(shmcoll_comm *comm, shmcoll_request **req);

/* Variable counts and prefix reductions. Counts and displacements are in elements of dtype,
 * arrays of size entries; any count may be 0, and blocks may lie anywhere in a buffer, in any
 * order, but must not overlap each other in a receive buffer (-EINVAL where this rank can
 * see it). Bytes of a receive buffer outside the blocks are never written. Counts that
 * disagree between ranks (rank r sends sendcount elements but the receiver's recvcounts[r]
 * differs) return -EPROTO where detected - always with SHMCOLL_CHECK=1 in the environment -
 * and the communicator is then aborted (ranks that did not detect it return -EPROTO or
 * -ECANCELED). The arrays are read during the call (a non-blocking call's until it
 * completes). Errors besides: -EINVAL as the equal-count forms', a NULL counts or
 * displacements array where the call reads it, or an element count whose bytes overflow. */

/* Every rank's recvbuf receives rank p's sendbuf (sendcount elements, which must equal
 * recvcounts[rank]) at element displs[p], for every p. In place: sendbuf == recvbuf +
 * displs[rank] * elemsize. recvcounts must be the same on every rank. */
SHMCOLL_API int shmcoll_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                   const size_t *recvcounts, const size_t *displs,
                                   shmcoll_dtype dtype, shmcoll_comm *comm);
/* The root's recvbuf receives rank p's sendbuf (sendcount elements on p, recvcounts[p] on the
 * root) at element displs[p]. recvbuf, recvcounts and displs are read on the root only (may be
 * NULL elsewhere). In place, on the root: sendbuf == recvbuf + displs[root] * elemsize (an
 * addition). */
SHMCOLL_API int shmcoll_gatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                const size_t *recvcounts, const size_t *displs, shmcoll_dtype dtype,
                                int root, shmcoll_comm *comm);
/* Rank p's recvbuf (recvcount elements, which must equal sendcounts[p] on the root) receives
 * sendcounts[p] elements of the root's sendbuf from element displs[p]. sendbuf, sendcounts
 * and displs are read on the root only. In place, on the root: recvbuf == sendbuf +
 * displs[root] * elemsize (an addition). */
SHMCOLL_API int shmcoll_scatterv(const void *sendbuf, const size_t *sendcounts,
                                 const size_t *displs, void *recvbuf, size_t recvcount,
                                 shmcoll_dtype dtype, int root, shmcoll_comm *comm);
/* Rank r sends sendcounts[q] elements from element sdispls[q] of its sendbuf to rank q, which
 * receives them (recvcounts[r] elements there) at element rdispls[r] of its recvbuf. No
 * in-place form: the two buffers must not overlap. */
SHMCOLL_API int shmcoll_alltoallv(const void *sendbuf, const size_t *sendcounts,
                                  const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                  const size_t *rdispls, shmcoll_dtype dtype, shmcoll_comm *comm);
/* op over every rank's sendbuf (the sum of recvcounts elements, blocks in rank order), of
 * which rank r's recvbuf receives block r (recvcounts[r] elements). recvcounts must be the
 * same on every rank. In place: recvbuf == sendbuf + (recvcounts[0] + ... +
 * recvcounts[rank-1]) * elemsize. */
SHMCOLL_API int shmcoll_reduce_scatterv(const void *sendbuf, void *recvbuf,
                                        const size_t *recvcounts, shmcoll_dtype dtype,
                                        shmcoll_op op, shmcoll_comm *comm);
/* Rank r's recvbuf (count elements) receives op over the sendbufs of ranks 0 .. r (scan), or
 * of ranks 0 .. r-1 (exscan; rank 0's recvbuf is left unchanged), folded in rank order. In
 * place: sendbuf == recvbuf. Every op but SHMCOLL_AVG (-EINVAL). */
SHMCOLL_API int shmcoll_scan(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                             shmcoll_op op, shmcoll_comm *comm);
SHMCOLL_API int shmcoll_exscan(const void *sendbuf, void *recvbuf, size_t count,
                               shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *comm);

/* Their non-blocking forms. */
SHMCOLL_API int shmcoll_iallgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                    const size_t *recvcounts, const size_t *displs,
                                    shmcoll_dtype dtype, shmcoll_comm *comm, shmcoll_request **req);
SHMCOLL_API int shmcoll_igatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                 const size_t *recvcounts, const size_t *displs,
                                 shmcoll_dtype dtype, int root, shmcoll_comm *comm,
                                 shmcoll_request **req);
SHMCOLL_API int shmcoll_iscatterv(const void *sendbuf, const size_t *sendcounts,
                                  const size_t *displs, void *recvbuf, size_t recvcount,
                                  shmcoll_dtype dtype, int root, shmcoll_comm *comm,
                                  shmcoll_request **req);
SHMCOLL_API int shmcoll_ialltoallv(const void *sendbuf, const size_t *sendcounts,
                                   const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                   const size_t *rdispls, shmcoll_dtype dtype, shmcoll_comm *comm,
                                   shmcoll_request **req);
SHMCOLL_API int shmcoll_ireduce_scatterv(const void *sendbuf, void *recvbuf,
                                         const size_t *recvcounts, shmcoll_dtype dtype,
                                         shmcoll_op op, shmcoll_comm *comm, shmcoll_request **req);
SHMCOLL_API int shmcoll_iscan(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                              shmcoll_op op, shmcoll_comm *comm, shmcoll_request **req);
SHMCOLL_API int shmcoll_iexscan(const void *sendbuf, void *recvbuf, size_t count,
                                shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *comm,
                                shmcoll_request **req);

/* Blocks until *req completes, returns the operation's result (0 or what its blocking form
 * would return), fills status for a receive (status may be NULL; a send's is left alone),
 * frees the request and sets *req = NULL. *req == NULL: returns 0 at once. -EINVAL: req is
 * NULL. */
SHMCOLL_API int shmcoll_wait(shmcoll_request **req, shmcoll_status *status);
/* Sets *done to 0 or 1 without blocking; when 1, does what shmcoll_wait does (and returns
 * its result). *req == NULL: *done = 1, returns 0. -EINVAL: req or done is NULL. */
SHMCOLL_API int shmcoll_test(shmcoll_request **req, int *done, shmcoll_status *status);
/* Waits for all n (NULL entries are skipped), sets each to NULL, fills statuses (NULL, or n
 * entries; each entry's error field is its operation's result) and returns 0 or the first
 * error in array order. -EINVAL: reqs is NULL with n > 0. */
SHMCOLL_API int shmcoll_waitall(size_t n, shmcoll_request **reqs, shmcoll_status *statuses);
/* Additions. testall: *done = 1 and what waitall does if all n are complete, else *done = 0
 * and nothing changes. waitany: waits until one of the non-NULL requests completes, sets
 * *index to it and does for it what shmcoll_wait does; with no non-NULL request, *index =
 * SIZE_MAX and returns 0. */
SHMCOLL_API int shmcoll_testall(size_t n, shmcoll_request **reqs, int *done,
                                shmcoll_status *statuses);
SHMCOLL_API int shmcoll_waitany(size_t n, shmcoll_request **reqs, size_t *index,
                                shmcoll_status *status);

/* Additions to the contract. */
/* Size in bytes of one element of dtype (the elemsize of the in-place forms above); 0 for an
 * unknown dtype. Local. */
SHMCOLL_API size_t shmcoll_dtype_size(shmcoll_dtype dtype);

/* Embedding: communicators made by a host library over any group of its ranks on this machine
 * (processes or threads), several alive at once.
 *
 * The host's out-of-band allgather: every rank of the group calls it with len bytes at in; it
 * fills out with size * len bytes, rank r's at out + r * len, and returns 0, or non-zero if
 * it failed. shmcoll calls it once per shmcoll_comm_create_oob, on the calling thread, with
 * buffers of its own, and keeps no pointer to them. */
typedef int (*shmcoll_oob_allgather_fn)(const void *in, void *out, size_t len, void *ctx);

/* The group as the host sees it; read during shmcoll_comm_create_oob only. */
typedef struct shmcoll_oob {
	shmcoll_oob_allgather_fn allgather;
	void *ctx;          /* passed to allgather as is */
	int rank;           /* the caller's rank in the group, 0 .. size-1 */
	int size;           /* ranks in the group, >= 1 */
	size_t arena_bytes; /* as in shmcoll_config (0: the default) */
	int timeout_ms;     /* as in shmcoll_config (0: the default; < 0: forever) */
} shmcoll_oob;

/* Collective over the group: the ranks agree, through one call of the host's allgather, on a
 * job name of their own, check that they are one group on one machine and one user, then
 * meet as shmcoll_comm_create's ranks do. Each call makes a new communicator with an arena
 * of its own, independent of every other. On failure *comm = NULL (if comm is not NULL) and
 * shmcoll_last_error(NULL) says why. Errors: -EINVAL: comm, oob or oob->allgather is NULL;
 * size out of 1 .. 1024 or rank out of range; an entry of the allgather's output that is not
 * the record of the rank it should be (the host misplaced it, or the ranks disagree on the
 * group or run different shmcoll versions); a rank on another machine or of another user.
 * -EIO: the allgather returned non-zero. -ENOMEM. Or what shmcoll_comm_create returns. */
SHMCOLL_API int shmcoll_comm_create_oob(const shmcoll_oob *oob, shmcoll_comm **comm);

/* The color of a rank that wants no communicator from shmcoll_comm_split. */
#define SHMCOLL_UNDEFINED (-1)

/* Collective over comm: the ranks that pass the same color (>= 0) get a new communicator of
 * their own, ranked by key, then by their rank in comm; a rank passing SHMCOLL_UNDEFINED gets
 * *newcomm = NULL. comm stays usable, and the new communicators are independent of it and of
 * each other: each has an arena of its own (of the default size) and comm's timeout, and is
 * destroyed on its own, before or after comm. On a communicator that spans nodes, every new
 * group must lie within one node (-ENOTSUP otherwise, on every rank). On failure *newcomm =
 * NULL (if newcomm is not NULL), with the message on comm. Errors: -EINVAL: comm or newcomm
 * is NULL, or color is negative and not SHMCOLL_UNDEFINED. -ENOMEM. -ENOTSUP (comm stays
 * usable). What shmcoll_comm_create returns, if making the new communicator fails (comm stays
 * usable). Otherwise the failures of any collective on comm. */
SHMCOLL_API int shmcoll_comm_split(shmcoll_comm *comm, int color, int key, shmcoll_comm **newcomm);
/* Collective: a new communicator over the same ranks in the same order (shmcoll_comm_split
 * with one color, keys the ranks). Errors as shmcoll_comm_split's; on a communicator that
 * spans nodes always -ENOTSUP. */
SHMCOLL_API int shmcoll_comm_dup(shmcoll_comm *comm, shmcoll_comm **newcomm);

/* Advanced: the leaders' transport of shmcoll_comm_create_hosted, supplied by a host that
 * already connects the nodes (an MPI library: its point-to-point among the node leaders).
 * Only each node's leader (rank 0 of its node communicator) calls it, and only on the thread
 * that is in a call on the communicator: never the progress thread. A transfer moves len
 * bytes at buf to (send != 0) or from peer's leader (a node index, never the caller's own);
 * slot (0 .. 2 * nnodes - 1: 2 * peer, + 1 for a receive) names it from start until test
 * said done, wait returned or cancel was called. At most one send and one receive per peer
 * are in flight, and the k-th send to a peer must meet the peer's k-th receive from this
 * node (the host keeps its messages ordered per pair and apart from any other traffic:
 * its own tag or connection); an empty transfer (len 0) may have buf NULL. Each returns 0
 * (test: 1 done, 0 not yet) or a negative errno; a receive of another length than len is
 * -EPROTO. */
typedef struct shmcoll_transport {
	void *ctx;
	int (*start)(void *ctx, int slot, int peer, int send, void *buf, size_t len);
	int (*test)(void *ctx, int slot);
	int (*wait)(void *ctx, int slot);
	/* Abandons a transfer in flight after a failure: its buffer is the caller's again once
	 * this returns. */
	void (*cancel)(void *ctx, int slot);
} shmcoll_transport;

/* Advanced, collective over every rank of every node: a communicator over nnodes nodes,
 * each node's ranks being node (a communicator from shmcoll_comm_create, which must have
 * the same size on every node), this rank's node being node_index (0 .. nnodes - 1), and
 * the leaders moving data between nodes through t (copied; t->ctx must outlive the new
 * communicator). Its ranks are node-major: rank = node_index * size of node + rank in
 * node. The new communicator borrows node (destroy it first; node stays usable
 * between its calls) and runs the blocking collectives, the variable-count ones, the
 * prefix reductions and shmcoll_malloc/free; its non-blocking collectives and all its
 * point-to-point calls return -ENOTSUP, as no progress may call t off the caller's
 * thread. Errors: -EINVAL: a NULL argument or function, nnodes out of 2 .. 1024,
 * node_index out of range, node not a communicator of one node, or (on every rank) nodes
 * of different sizes. -ENOMEM. Otherwise the failure of t or of node, on every rank. */
SHMCOLL_API int shmcoll_comm_create_hosted(shmcoll_comm *node, int nnodes, int node_index,
                                           const shmcoll_transport *t, shmcoll_comm **newcomm);

#ifdef __cplusplus
}
#endif

#endif /* SHMCOLL_H */
