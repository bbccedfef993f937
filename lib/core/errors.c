/* errors.c - the error codes of shmcoll and their texts, in one table. */
#include <errno.h>
#include <limits.h>

#include "lib/core/errors.h"

#define SHMCOLL_ERRORS(X)                                                                          \
	X(0, "success")                                                                            \
	X(EINVAL, "invalid argument")                                                              \
	X(ENOMEM, "out of memory")                                                                 \
	X(ENOSPC, "no room in the shared-memory filesystem for the arena")                         \
	X(ETIMEDOUT, "a peer did not arrive within the timeout")                                   \
	X(EOWNERDEAD, "a peer process died")                                                       \
	X(EPROTO, "ranks called mismatched collectives, or the arena is not valid")                \
	X(ECANCELED, "the communicator was aborted")                                               \
	X(EEXIST, "an arena for this job already exists")                                          \
	X(EACCES, "permission denied on the shared-memory filesystem")                             \
	X(EMFILE, "too many open files")                                                           \
	X(ENOTSUP, "not supported by this build of shmcoll or on this communicator")               \
	X(EIO, "the host's out-of-band exchange failed")                                           \
	X(EBUSY, "the communicator has operations outstanding")                                    \
	X(EMSGSIZE, "a message was longer than the receive buffer")

const char *shmcoll__strerror(int err)
{
	/* INT_MIN has no positive counterpart: it is simply unknown. */
	if (err < 0 && err != INT_MIN)
		err = -err;
	switch (err) {
#define CASE(code, text)                                                                           \
	case code:                                                                                 \
		return text;
		SHMCOLL_ERRORS(CASE)
#undef CASE
	default:
		return "unknown error";
	}
}
