/* shmcoll.h - the public API of shmcoll: collective operations for processes
 * (or threads) of one node that meet in a POSIX shared-memory arena.
 * The contract is ../shared/spec/api.md; this header adds nothing it renames. */
#ifndef SHMCOLL_H
#define SHMCOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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

typedef struct shmcoll_comm shmcoll_comm; /* opaque */

typedef enum shmcoll_dtype {
	SHMCOLL_INT8,
	SHMCOLL_UINT8,
	SHMCOLL_INT32,
	SHMCOLL_UINT32,
	SHMCOLL_INT64,
	SHMCOLL_UINT64,
	SHMCOLL_FLOAT16,  /* IEEE 754 binary16 */
	SHMCOLL_BFLOAT16, /* bfloat16 */
	SHMCOLL_FLOAT32,
	SHMCOLL_FLOAT64,
	SHMCOLL_DTYPE_COUNT
} shmcoll_dtype;

typedef enum shmcoll_op {
	SHMCOLL_SUM,
	SHMCOLL_PROD,
	SHMCOLL_MIN,
	SHMCOLL_MAX,
	SHMCOLL_AVG, /* sum / size; integers truncate toward zero */
	SHMCOLL_BAND,
	SHMCOLL_BOR,
	SHMCOLL_BXOR, /* integer types only */
	SHMCOLL_OP_COUNT
} shmcoll_op;

typedef struct shmcoll_config {
	int rank;           /* 0 .. size-1 */
	int size;           /* ranks in the communicator, >= 1 */
	const char *job;    /* name shared by every rank of one job; ranks with the same job meet */
	size_t arena_bytes; /* 0: the library's default */
	int timeout_ms;     /* 0: the default (SHMCOLL_TIMEOUT_MS or the library's own); <0: wait
	                       forever */
} shmcoll_config;

/* Errors: every int function returns 0 or a negative errno value. */
SHMCOLL_API const char *shmcoll_strerror(int err);
/* Detailed message of this rank's last failure on comm, "" if none. With
 * comm == NULL: the calling thread's last failed shmcoll_init or
 * shmcoll_comm_create (an addition to the contract). */
SHMCOLL_API const char *shmcoll_last_error(const shmcoll_comm *comm);

/* Communicators. */
SHMCOLL_API int shmcoll_init(shmcoll_comm **comm);
SHMCOLL_API int shmcoll_comm_create(const shmcoll_config *cfg, shmcoll_comm **comm);
SHMCOLL_API int shmcoll_comm_destroy(shmcoll_comm *comm);
SHMCOLL_API int shmcoll_comm_abort(shmcoll_comm *comm);
SHMCOLL_API int shmcoll_comm_rank(const shmcoll_comm *comm);
SHMCOLL_API int shmcoll_comm_size(const shmcoll_comm *comm);

/* Symmetric memory (zero copy). */
SHMCOLL_API void *shmcoll_malloc(shmcoll_comm *comm, size_t bytes);
SHMCOLL_API int shmcoll_free(shmcoll_comm *comm, void *ptr);

/* Collectives. count is in elements of dtype, per rank as in NCCL. */
SHMCOLL_API int shmcoll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                  shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *comm);
SHMCOLL_API int shmcoll_reduce(const void *sendbuf, void *recvbuf, size_t count,
                               shmcoll_dtype dtype, shmcoll_op op, int root, shmcoll_comm *comm);
SHMCOLL_API int shmcoll_bcast(void *buf, size_t count, shmcoll_dtype dtype, int root,
                              shmcoll_comm *comm);
SHMCOLL_API int shmcoll_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                  shmcoll_dtype dtype, shmcoll_comm *comm);
SHMCOLL_API int shmcoll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                       shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *comm);
SHMCOLL_API int shmcoll_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                               shmcoll_dtype dtype, int root, shmcoll_comm *comm);
SHMCOLL_API int shmcoll_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                shmcoll_dtype dtype, int root, shmcoll_comm *comm);
SHMCOLL_API int shmcoll_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                                 shmcoll_dtype dtype, shmcoll_comm *comm);
SHMCOLL_API int shmcoll_barrier(shmcoll_comm *comm);

/* Additions to the contract. */
/* Size in bytes of one element of dtype; 0 for an unknown dtype. */
SHMCOLL_API size_t shmcoll_dtype_size(shmcoll_dtype dtype);

/* Embedding: communicators made by a host library over any group of its
 * ranks on this machine (processes or threads), several alive at once.
 *
 * The host's out-of-band allgather: every rank of the group calls it with len
 * bytes at in; it fills out with size * len bytes, rank r's at out + r * len,
 * and returns 0, or non-zero if it failed. */
typedef int (*shmcoll_oob_allgather_fn)(const void *in, void *out, size_t len, void *ctx);

typedef struct shmcoll_oob {
	shmcoll_oob_allgather_fn allgather;
	void *ctx;          /* passed to allgather as is */
	int rank;           /* the caller's rank in the group, 0 .. size-1 */
	int size;           /* ranks in the group, >= 1 */
	size_t arena_bytes; /* as in shmcoll_config (0: the default) */
	int timeout_ms;     /* as in shmcoll_config (0: the default; < 0: forever) */
} shmcoll_oob;

/* Collective over the group: the ranks agree, through one call of the host's
 * allgather, on a job name of their own, then meet as shmcoll_comm_create's
 * ranks do. Fails with -EINVAL (bad arguments, or ranks that disagree on the
 * group or sit on different machines), -EIO (the allgather failed), or what
 * shmcoll_comm_create returns. */
SHMCOLL_API int shmcoll_comm_create_oob(const shmcoll_oob *oob, shmcoll_comm **comm);

/* The color of a rank that wants no communicator from shmcoll_comm_split. */
#define SHMCOLL_UNDEFINED (-1)

/* Collective over comm: the ranks that pass the same color (>= 0) get a new
 * communicator of their own, ranked by key, then by their rank in comm; a
 * rank passing SHMCOLL_UNDEFINED gets *newcomm = NULL. comm stays usable, and
 * the new communicators are independent of it and of each other. On a
 * communicator that spans nodes, every new group must lie within one node
 * (-ENOTSUP otherwise, on every rank). */
SHMCOLL_API int shmcoll_comm_split(shmcoll_comm *comm, int color, int key, shmcoll_comm **newcomm);
/* Collective: a new communicator over the same ranks in the same order
 * (shmcoll_comm_split with one color, keys the ranks). */
SHMCOLL_API int shmcoll_comm_dup(shmcoll_comm *comm, shmcoll_comm **newcomm);

#ifdef __cplusplus
}
#endif

#endif /* SHMCOLL_H */
