/* fuzz_arena_name.c - libFuzzer target for shmcoll__arena_name(), which turns
 * a job string from the environment (or a caller) into a shm_open name. For
 * any job the name must be one path component of safe characters under this
 * user's prefix, fit SHMCOLL_NAME_MAX, and be the same every time.
 *
 * Input: the job string (up to the first NUL). */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "shm/name.h"
#include "tests/fuzz/fuzz.h"

static int safe_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	char *job, *name, again[SHMCOLL_NAME_MAX], prefix[64];
	size_t len, i, plen;
	int rc;

	job = fuzz_string(&in);
	name = fuzz_errbuf(SHMCOLL_NAME_MAX); /* exactly the documented size */

	rc = shmcoll__arena_name(name, SHMCOLL_NAME_MAX, job);
	if (!*job) {
		FUZZ_CHECK(rc == -EINVAL, "empty job gives %d", rc);
		goto out;
	}
	FUZZ_CHECK(rc == 0, "job \"%s\" gives %d", job, rc);
	FUZZ_CHECK(fuzz_terminated(name, SHMCOLL_NAME_MAX), "name not terminated");
	len = strlen(name);
	FUZZ_CHECK(len >= 2 && len <= NAME_MAX, "name length %zu", len);
	FUZZ_CHECK(name[0] == '/', "name \"%s\" does not start with '/'", name);
	for (i = 1; i < len; i++)
		FUZZ_CHECK(safe_char(name[i]), "name \"%s\": byte %zu is 0x%02x", name, i,
		           (unsigned char)name[i]);
	FUZZ_CHECK(shmcoll__arena_prefix(prefix, sizeof(prefix)) == 0, "no prefix");
	plen = strlen(prefix);
	FUZZ_CHECK(!strncmp(name + 1, prefix, plen), "name \"%s\" lacks prefix \"%s\"", name,
	           prefix);
	/* ".<16 hex digits of the hash>" ends every name. */
	FUZZ_CHECK(len > plen + 18 && name[len - 17] == '.' &&
	               strspn(name + len - 16, "0123456789abcdef") == 16,
	           "name \"%s\" does not end in the hash", name);

	FUZZ_CHECK(shmcoll__arena_name(again, sizeof(again), job) == 0 && !strcmp(again, name),
	           "job \"%s\" named \"%s\", then \"%s\"", job, name, again);
	/* A buffer shorter than the documented size is refused, never overrun. */
	FUZZ_CHECK(shmcoll__arena_name(again, SHMCOLL_NAME_MAX - 1, job) == -EINVAL,
	           "short buffer accepted");
out:
	free(name);
	free(job);
	return 0;
}
