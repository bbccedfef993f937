/* name.c - arena names: one per (user, job), safe for shm_open whatever the
 * job string holds. */
#include "shm/name.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* FNV-1a: the sanitised part may lose characters, the hash keeps jobs apart. */
static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

int shmcoll__arena_prefix(char *buf, size_t len)
{
	int n = snprintf(buf, len, "shmcoll.%u.", (unsigned)getuid());

	return n < 0 || (size_t)n >= len ? -EINVAL : 0;
}

int shmcoll__arena_name(char *buf, size_t len, const char *job)
{
	char safe[49];
	size_t i, n = 0;

	if (!buf || len < SHMCOLL_NAME_MAX || !job || !*job)
		return -EINVAL;
	for (i = 0; job[i] && n < sizeof(safe) - 1; i++) {
		char c = job[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		         (c >= '0' && c <= '9') || c == '-' || c == '_';
		safe[n++] = ok ? c : '_';
	}
	safe[n] = '\0';
	snprintf(buf, len, "/shmcoll.%u.%s.%016llx", (unsigned)getuid(), safe,
	         (unsigned long long)fnv1a(job));
	return 0;
}
