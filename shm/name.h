/* name.h - the POSIX shared-memory name of a job's arena, derived from the job
 * string and the user, so the library and the launcher agree on it. */
#ifndef SHMCOLL_SHM_NAME_H
#define SHMCOLL_SHM_NAME_H

#include <stddef.h>

/* Longest name shmcoll__arena_name() writes, including the NUL. */
#define SHMCOLL_NAME_MAX 128

/* Writes "/shmcoll.<uid>.<job, sanitised, at most 48 chars>.<16 hex of a hash
 * of the whole job>" into buf. Returns 0, or -EINVAL for a NULL or empty job
 * or a buffer shorter than SHMCOLL_NAME_MAX. */
int shmcoll__arena_name(char *buf, size_t len, const char *job);

/* The prefix every arena name of this user starts with (without the leading
 * '/'), as listed in /dev/shm: "shmcoll.<uid>.". */
int shmcoll__arena_prefix(char *buf, size_t len);

#endif
