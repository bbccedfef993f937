/* fuzz_algo_parse.c - libFuzzer target for shmcoll__algo_parse(), the parser
 * of the SHMCOLL_ALGO environment variable. It must accept or reject any
 * string with -EINVAL and a terminated message, write nothing but the table
 * it is given (a guard on either side stays untouched), leave only known
 * protocols there, and decide the same way twice.
 *
 * Input: the error buffer's length - 1 (1 byte), then the string (up to the
 * first NUL). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "lib/core/tuning.h"
#include "tests/fuzz/fuzz.h"

#define POISON 0xa5

/* A table between two guards. */
struct guarded {
	uint8_t before[32];
	uint8_t algo[KIND_COUNT];
	uint8_t after[32];
};

static struct guarded comm, copy;

/* Every byte around the table is still POISON. */
static int rest_untouched(const struct guarded *g)
{
	size_t i;

	for (i = 0; i < sizeof(g->before); i++)
		if (g->before[i] != POISON || g->after[i] != POISON)
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	char *spec, *err, one[64];
	uint8_t errlen1;
	size_t errlen;
	int rc, rc2, k;

	fuzz_take(&in, &errlen1, sizeof(errlen1));
	spec = fuzz_string(&in);
	errlen = (size_t)errlen1 + 1;
	err = fuzz_errbuf(errlen);

	memset(&comm, POISON, sizeof(comm));
	rc = shmcoll__algo_parse(comm.algo, spec, err, errlen);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL, "returned %d for \"%s\"", rc, spec);
	FUZZ_CHECK(rest_untouched(&comm), "wrote outside the algo table for \"%s\"", spec);
	for (k = 0; k < KIND_COUNT; k++)
		FUZZ_CHECK(comm.algo[k] < ALGO_COUNT, "kind %d: protocol %u for \"%s\"", k,
		           comm.algo[k], spec);
	if (rc < 0)
		FUZZ_CHECK(fuzz_terminated(err, errlen), "message not terminated in %zu bytes",
		           errlen);

	/* The same string decides the same way. */
	memset(&copy, POISON, sizeof(copy));
	rc2 = shmcoll__algo_parse(copy.algo, spec, err, errlen);
	FUZZ_CHECK(rc2 == rc, "\"%s\": %d, then %d", spec, rc, rc2);
	if (rc == 0) {
		FUZZ_CHECK(!memcmp(comm.algo, copy.algo, sizeof(comm.algo)),
		           "\"%s\" parsed two ways", spec);
		/* Whatever it forced is a protocol that collective has: naming
		 * the pair alone must be accepted. */
		for (k = 1; k < KIND_COUNT; k++) {
			if (comm.algo[k] == ALGO_AUTO)
				continue;
			snprintf(one, sizeof(one), "%s:%s", shmcoll__kind_name((uint32_t)k),
			         shmcoll__algo_name(comm.algo[k]));
			rc2 = shmcoll__algo_parse(copy.algo, one, err, errlen);
			FUZZ_CHECK(rc2 == 0 && copy.algo[k] == comm.algo[k],
			           "\"%s\" forced %s, which alone gives %d", spec, one, rc2);
		}
	}
	free(err);
	free(spec);
	return 0;
}
