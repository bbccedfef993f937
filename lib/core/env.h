/* env.h - numbers from the environment, parsed strictly. */
#ifndef SHMCOLL_CORE_ENV_H
#define SHMCOLL_CORE_ENV_H

#include <stdlib.h>

/* Whether variable name (NULL: none) is set and not empty. */
static inline int shmcoll__env_set(const char *name)
{
	const char *v = name ? getenv(name) : NULL;

	return v && *v;
}

/* Parses the whole decimal number in variable name. 1: set and valid (*out set), 0: not set
 * or empty, -1: set but not a number in [lo, hi]. */
int shmcoll__env_long(const char *name, long long lo, long long hi, long long *out);

#endif
