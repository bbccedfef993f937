/* env.c - numbers from the environment (env.h). */
#include "lib/core/env.h"

#include <errno.h>
#include <stdlib.h>

int shmcoll__env_long(const char *name, long long lo, long long hi, long long *out)
{
	const char *s = getenv(name);
	char *end;
	long long v;

	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 1;
}
