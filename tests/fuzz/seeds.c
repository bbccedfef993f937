/* seeds.c - writes the seed inputs of fuzz_arena_validate: the headers
 * shmcoll__arena_create() writes (into a real arena, removed at once) for
 * several rank counts and arena sizes, in that target's input form. Made at
 * run time so the seeds follow the header's layout and version as they change.
 *
 * usage: fuzz_seeds DIR */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shm/arena.h"

static int write_seed(const char *dir, uint32_t nranks, size_t arena_bytes)
{
	struct shmcoll_arena a;
	struct shmcoll_arena_hdr h;
	uint64_t file_bytes;
	uint8_t errlen1 = 127;
	char path[4096], job[64], err[256];
	FILE *f;
	int ok, rc;

	/* The header exactly as the library writes it: create a real arena. */
	snprintf(job, sizeof(job), "fuzz-seeds-%d", (int)getpid());
	rc = shmcoll__arena_create(&a, job, nranks, arena_bytes, err, sizeof(err));
	if (rc == -EINVAL)
		return 0; /* too small for this many ranks: no seed */
	if (rc < 0) {
		fprintf(stderr, "fuzz_seeds: %u ranks, %zu bytes: %s\n", nranks, arena_bytes, err);
		return -1;
	}
	memcpy(&h, a.hdr, sizeof(h));
	file_bytes = a.bytes;
	shmcoll__arena_release(&a, 1);

	snprintf(path, sizeof(path), "%s/header-n%u-%zu", dir, nranks, arena_bytes);
	f = fopen(path, "wb");
	if (!f) {
		fprintf(stderr, "fuzz_seeds: %s: %s\n", path, strerror(errno));
		return -1;
	}
	ok = fwrite(&file_bytes, sizeof(file_bytes), 1, f) == 1 &&
	     fwrite(&nranks, sizeof(nranks), 1, f) == 1 &&
	     fwrite(&errlen1, sizeof(errlen1), 1, f) == 1 && fwrite(&h, sizeof(h), 1, f) == 1;
	if (fclose(f) != 0 || !ok) {
		fprintf(stderr, "fuzz_seeds: cannot write %s\n", path);
		return -1;
	}
	return 1;
}

int main(int argc, char **argv)
{
	/* (ranks, arena bytes; 0: the default size) */
	static const struct {
		uint32_t nranks;
		size_t bytes;
	} seeds[] = {
	    {1, 0},         {2, 0},
	    {4, 0},         {1, 65536},
	    {3, 65536},     {7, 65536},
	    {2, 1u << 20},  {8, 1u << 20},
	    {64, 4u << 20}, {SHMCOLL_MAX_RANKS, 24u << 20},
	};
	size_t i;
	int n = 0, rc;

	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_seeds DIR\n");
		return 2;
	}
	for (i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		rc = write_seed(argv[1], seeds[i].nranks, seeds[i].bytes);
		if (rc < 0)
			return 1;
		n += rc;
	}
	printf("fuzz_seeds: %d headers in %s\n", n, argv[1]);
	return n > 0 ? 0 : 1;
}
