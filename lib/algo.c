/* algo.c - which protocol a collective runs: the measured default for
 * (collective, bytes, ranks), or the one SHMCOLL_ALGO forces. Every rank
 * decides from the same arguments, so all decide alike; the call word
 * carries the choice and a rank with another SHMCOLL_ALGO gets -EPROTO. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/internal.h"

static const char *const algo_names[ALGO_COUNT] = {
    [ALGO_AUTO] = "auto", [ALGO_FLAT] = "flat", [ALGO_DIRECT] = "direct",
    [ALGO_TREE] = "tree", [ALGO_CMA] = "cma",
};

/* The protocols each kind implements, as bits of (1 << algo). */
#define FLAT   (1u << ALGO_FLAT)
#define DIRECT (1u << ALGO_DIRECT)
#define TREE   (1u << ALGO_TREE)
#define CMA    (1u << ALGO_CMA)
static const unsigned algo_supported[KIND_COUNT] = {
    [KIND_BARRIER] = FLAT | TREE,  [KIND_BCAST] = FLAT | TREE | CMA,
    [KIND_REDUCE] = FLAT | DIRECT, [KIND_ALLREDUCE] = FLAT | DIRECT,
    [KIND_ALLGATHER] = FLAT | CMA, [KIND_REDUCE_SCATTER] = FLAT,
    [KIND_GATHER] = FLAT | CMA,    [KIND_SCATTER] = FLAT | CMA,
    [KIND_ALLTOALL] = FLAT | CMA,
};

const char *shmcoll__algo_name(uint32_t algo)
{
	return algo < ALGO_COUNT ? algo_names[algo] : "unknown";
}

static int algo_lookup(const char *name, size_t len)
{
	int a;

	for (a = 0; a < ALGO_COUNT; a++)
		if (strlen(algo_names[a]) == len && !strncmp(name, algo_names[a], len))
			return a;
	return -1;
}

static int kind_lookup(const char *name, size_t len)
{
	int k;

	for (k = 1; k < KIND_COUNT; k++)
		if (strlen(shmcoll__kind_name((uint32_t)k)) == len &&
		    !strncmp(name, shmcoll__kind_name((uint32_t)k), len))
			return k;
	return -1;
}

/* Forces algo on kind, or on every kind that has it when kind is 0. */
static int force(shmcoll_comm *c, int kind, int algo, char *err, size_t errlen)
{
	int k, any = 0;

	for (k = 1; k < KIND_COUNT; k++) {
		if (kind && k != kind)
			continue;
		if (algo != ALGO_AUTO && !(algo_supported[k] & 1u << algo)) {
			if (!kind)
				continue;
			snprintf(err, errlen, "SHMCOLL_ALGO: %s has no %s protocol",
			         shmcoll__kind_name((uint32_t)k), algo_names[algo]);
			return -EINVAL;
		}
		c->algo[k] = (uint8_t)algo;
		any = 1;
	}
	if (!any) {
		snprintf(err, errlen, "SHMCOLL_ALGO: no collective has a %s protocol",
		         algo_names[algo]);
		return -EINVAL;
	}
	return 0;
}

int shmcoll__algo_parse(shmcoll_comm *c, const char *spec, char *err, size_t errlen)
{
	const char *item = spec, *end, *colon;

	memset(c->algo, ALGO_AUTO, sizeof(c->algo));
	if (!spec || !*spec)
		return 0;
	for (; *item; item = *end ? end + 1 : end) {
		int kind = 0, algo, rc;

		end = strchr(item, ',');
		if (!end)
			end = item + strlen(item);
		colon = memchr(item, ':', (size_t)(end - item));
		if (colon) {
			kind = kind_lookup(item, (size_t)(colon - item));
			if (kind < 0) {
				snprintf(err, errlen, "SHMCOLL_ALGO: unknown collective '%.*s'",
				         (int)(colon - item), item);
				return -EINVAL;
			}
			item = colon + 1;
		}
		algo = algo_lookup(item, (size_t)(end - item));
		if (algo < 0) {
			snprintf(
			    err, errlen,
			    "SHMCOLL_ALGO: unknown protocol '%.*s' (auto, flat, direct, tree, cma)",
			    (int)(end - item), item);
			return -EINVAL;
		}
		rc = force(c, kind, algo, err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int shmcoll__algo_reduction(const shmcoll_comm *c, uint32_t kind, size_t bytes, size_t es,
                            size_t direct_min)
{
	int algo = c->algo[kind];

	if (algo == ALGO_AUTO)
		algo = bytes >= direct_min ? ALGO_DIRECT : ALGO_FLAT;
	/* One rank has nobody to split with; a tiny arena may not hold a slice
	 * per rank. Both depend only on what every rank shares. */
	if (algo == ALGO_DIRECT && !shmcoll__direct_fits(c, es))
		algo = ALGO_FLAT;
	return algo;
}
