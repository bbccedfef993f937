/* api.h - what the files of the entry layer share: the public communicator, a tagged union
 * of the two kinds a communicator can be, and the argument checks every public function
 * runs once, before anything else. Private to lib/api. */
#ifndef SHMCOLL_API_H
#define SHMCOLL_API_H

#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"

struct shmcoll_node;
struct shmcoll_hier;

enum shmcoll_comm_kind {
	COMM_NODE, /* the ranks of one node: lib/core, lib/coll */
	COMM_HIER, /* ranks on several nodes: lib/hier */
};

struct shmcoll_comm {
	int rank, size;
	enum shmcoll_comm_kind kind;
	union {
		struct shmcoll_node *node;
		struct shmcoll_hier *hier;
	} u;
	char *err;       /* this rank's last message: the node's or the hier's buffer */
	uint32_t splits; /* shmcoll_comm_split/dup calls so far: names their jobs */
};

/* Wraps a node or hier communicator in a public one. NULL when out of memory. */
shmcoll_comm *api__wrap_node(struct shmcoll_node *n);
shmcoll_comm *api__wrap_hier(struct shmcoll_hier *h);

/* shmcoll_comm_create without clearing the calling thread's create message first. */
int api__create(const shmcoll_config *cfg, shmcoll_comm **out);

/* Records the message of a failed create for shmcoll_last_error(NULL) (the calling thread's)
 * and returns rc. */
int api__create_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records a message for shmcoll_last_error(c) and returns rc. */
int api__fail(shmcoll_comm *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Enters c for a call of fn: 0, or the error that broke it (with a message). */
int api__enter(shmcoll_comm *c, const char *fn);

/* The argument checks, each 0 or -EINVAL with a message naming the argument. type: a known
 * dtype whose count * mult elements fit size_t bytes (*bytes set). */
int api__check_type(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, size_t count, size_t mult,
                    size_t *bytes);
int api__check_op(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, shmcoll_op op);
int api__check_root(shmcoll_comm *c, const char *fn, int root);
int api__check_buf(shmcoll_comm *c, const char *fn, const char *name, const void *buf,
                   size_t bytes);
/* Fails unless [a, a+na) and [b, b+nb) are disjoint or a == inplace_a. */
int api__check_overlap(shmcoll_comm *c, const char *fn, const void *a, size_t na, const void *b,
                       size_t nb, const void *inplace_a);

/* The collectives of c after their checks, for the entry layer's own use (split's
 * allgather): node or hier as c is. */
int api__allgather(shmcoll_comm *c, const void *send, void *recv, size_t sendcount,
                   shmcoll_dtype dt);

#endif
