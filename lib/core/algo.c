/* algo.c - the kinds and protocols by name, and the tuning variables that override the
 * measured choice of protocol (tuning.h). */
#include "lib/core/tuning.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/env.h"

static const char *const kind_names[KIND_COUNT] = {
    [KIND_BARRIER] = "barrier",     [KIND_BCAST] = "bcast",
    [KIND_REDUCE] = "reduce",       [KIND_ALLREDUCE] = "allreduce",
    [KIND_ALLGATHER] = "allgather", [KIND_REDUCE_SCATTER] = "reduce_scatter",
    [KIND_GATHER] = "gather",       [KIND_SCATTER] = "scatter",
    [KIND_ALLTOALL] = "alltoall",   [KIND_MALLOC] = "malloc",
    [KIND_FREE] = "free",           [KIND_ALLGATHERV] = "allgatherv",
    [KIND_GATHERV] = "gatherv",     [KIND_SCATTERV] = "scatterv",
    [KIND_ALLTOALLV] = "alltoallv", [KIND_REDUCE_SCATTERV] = "reduce_scatterv",
    [KIND_SCAN] = "scan",           [KIND_EXSCAN] = "exscan",
};

static const char *const algo_names[ALGO_COUNT] = {
    [ALGO_AUTO] = "auto", [ALGO_FLAT] = "flat", [ALGO_DIRECT] = "direct",
    [ALGO_TREE] = "tree", [ALGO_CMA] = "cma",   [ALGO_TOPO] = "topo",
};

/* The protocols each kind implements, as bits of (1 << algo). */
#define FLAT   (1u << ALGO_FLAT)
#define DIRECT (1u << ALGO_DIRECT)
#define TREE   (1u << ALGO_TREE)
#define CMA    (1u << ALGO_CMA)
#define TOPO   (1u << ALGO_TOPO)
static const unsigned algo_supported[KIND_COUNT] = {
    [KIND_BARRIER] = FLAT | TREE | TOPO,
    [KIND_BCAST] = FLAT | TREE | CMA | TOPO,
    [KIND_REDUCE] = FLAT | DIRECT,
    [KIND_ALLREDUCE] = FLAT | DIRECT,
    [KIND_ALLGATHER] = FLAT | CMA,
    [KIND_REDUCE_SCATTER] = FLAT,
    [KIND_GATHER] = FLAT | CMA,
    [KIND_SCATTER] = FLAT | CMA,
    [KIND_ALLTOALL] = FLAT | CMA,
    [KIND_ALLGATHERV] = FLAT,
    [KIND_ALLTOALLV] = FLAT,
    [KIND_REDUCE_SCATTERV] = FLAT,
    [KIND_SCAN] = FLAT,
    [KIND_EXSCAN] = FLAT,
};

const char *shmcoll__kind_name(uint32_t kind)
{
	return kind > 0 && kind < KIND_COUNT ? kind_names[kind] : "unknown";
}

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

int shmcoll__kind_lookup(const char *name, size_t len)
{
	int k;

	for (k = 1; k < KIND_COUNT; k++)
		if (strlen(kind_names[k]) == len && !strncmp(name, kind_names[k], len))
			return k;
	return -1;
}

/* Forces algo on kind, or on every kind that has it when kind is 0. */
static int force(uint8_t *table, int kind, int algo, char *err, size_t errlen)
{
	int k, any = 0;

	for (k = 1; k < KIND_COUNT; k++) {
		if (kind && k != kind)
			continue;
		if (algo != ALGO_AUTO && !(algo_supported[k] & 1u << algo)) {
			if (!kind)
				continue;
			snprintf(err, errlen, "SHMCOLL_ALGO: %s has no %s protocol", kind_names[k],
			         algo_names[algo]);
			return -EINVAL;
		}
		table[k] = (uint8_t)algo;
		any = 1;
	}
	if (!any) {
		snprintf(err, errlen, "SHMCOLL_ALGO: no collective has a %s protocol",
		         algo_names[algo]);
		return -EINVAL;
	}
	return 0;
}

int shmcoll__algo_parse(uint8_t *table, const char *spec, char *err, size_t errlen)
{
	const char *item = spec, *end, *colon;

	memset(table, ALGO_AUTO, KIND_COUNT);
	if (!spec || !*spec)
		return 0;
	for (; *item; item = *end ? end + 1 : end) {
		int kind = 0, algo, rc;

		end = strchr(item, ',');
		if (!end)
			end = item + strlen(item);
		colon = memchr(item, ':', (size_t)(end - item));
		if (colon) {
			kind = shmcoll__kind_lookup(item, (size_t)(colon - item));
			if (kind < 0) {
				snprintf(err, errlen, "SHMCOLL_ALGO: unknown collective '%.*s'",
				         (int)(colon - item), item);
				return -EINVAL;
			}
			item = colon + 1;
		}
		algo = algo_lookup(item, (size_t)(end - item));
		if (algo < 0) {
			snprintf(err, errlen,
			         "SHMCOLL_ALGO: unknown protocol '%.*s' (auto, flat, direct, tree, "
			         "cma, topo)",
			         (int)(end - item), item);
			return -EINVAL;
		}
		rc = force(table, kind, algo, err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int shmcoll__tuning_read(struct shmcoll_tuning *t, char *err, size_t errlen)
{
	long long chunk, nt, check;
	int rc;

	rc = shmcoll__algo_parse(t->algo, getenv("SHMCOLL_ALGO"), err, errlen);
	if (rc < 0)
		return rc;
	rc = shmcoll__env_long("SHMCOLL_CHUNK_BYTES", 64, LLONG_MAX, &chunk);
	if (rc < 0) {
		snprintf(err, errlen, "SHMCOLL_CHUNK_BYTES is not a byte count of at least 64");
		return -EINVAL;
	}
	t->chunk_bytes = rc > 0 ? (size_t)chunk : 0;
	rc = shmcoll__env_long("SHMCOLL_NT", 0, 1, &nt);
	if (rc < 0) {
		snprintf(err, errlen, "SHMCOLL_NT is not 0 or 1");
		return -EINVAL;
	}
	/* Off by default: measured on the reference machine they did not pay
	 * (docs/BENCHMARKS.md); kept for machines where they do. */
	t->nt_stores = rc > 0 ? (int)nt : 0;
	rc = shmcoll__env_long("SHMCOLL_CHECK", 0, 1, &check);
	if (rc < 0) {
		snprintf(err, errlen, "SHMCOLL_CHECK is not 0 or 1");
		return -EINVAL;
	}
	t->check = rc > 0 ? (int)check : 0;
	return 0;
}
