/* launcher_env.c - the rank, size and job name of a rank started by torchrun, Open MPI, MPICH
 * (Hydra) or Slurm, from the variables each puts in its ranks' environment.
 *
 * A launcher is present when its rank or size variable is set (Slurm: its rank and step
 * variables; an allocation's shell has SLURM_NTASKS, and a batch script's own process
 * SLURM_PROCID, without being a task of a step: each is a job of one rank). Its numbers are then
 * checked strictly, and the job is named "<tag>-<16 hex>": a 64-bit FNV-1a hash of the user and of
 * the variables that name the launcher's job, which are the same on every rank of one job
 * and differ between jobs (see each launcher's identity function). */
#include "lib/api/launcher_env.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/api/api.h"
#include "lib/core/env.h"
#include "shm/proc.h"

/* Hydra's per-node process that forks the ranks of one job: it names the job (below). */
#define HYDRA_PROXY "hydra_pmi_proxy"

struct launcher;
typedef int (*identity_fn)(const struct launcher *L, uint64_t *h);

struct launcher {
	const char *name;          /* for messages */
	const char *tag;           /* the job name's prefix */
	const char *rank, *size;   /* required */
	const char *lrank, *lsize; /* the rank on its node and the ranks there; optional */
	const char *nnodes;        /* the number of nodes; optional */
	int by_rank;               /* present only when rank is set */
	const char *also;          /* and, if not NULL, this one too */
	identity_fn identity;      /* folds the job's identity into *h; 0 or an error */
};

/* What a rank read: -1 for an optional variable that is not set. */
struct place {
	const char *seen; /* the variable that made the launcher present */
	long long rank, size, lrank, lsize, nnodes;
};

static void fnv_bytes(uint64_t *h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		*h ^= b[i];
		*h *= 0x100000001b3ull;
	}
}

/* Folds "NAME=value\0", or "NAME\0" when unset, so no two sets of values fold alike by
 * running together. */
static void fnv_var(uint64_t *h, const char *name)
{
	const char *v = getenv(name);

	fnv_bytes(h, name, strlen(name));
	if (v) {
		fnv_bytes(h, "=", 1);
		fnv_bytes(h, v, strlen(v));
	}
	fnv_bytes(h, "", 1);
}

/* A whole number from the environment: 1 read, 0 not set, or -EINVAL recorded. */
static int num(const struct launcher *L, const char *name, long long lo, long long hi, long long *v)
{
	int k = shmcoll__env_long(name, lo, hi, v);

	if (k < 0)
		return api__create_fail(-EINVAL,
		                        "shmcoll_init: %s: %s=\"%.40s\" is not a whole number from "
		                        "%lld to %lld",
		                        L->name, name, getenv(name), lo, hi);
	return k;
}

/* The same for a variable the launcher always sets with seen: not set is -EINVAL too. */
static int need(const struct launcher *L, const char *seen, const char *name, long long lo,
                long long hi, long long *v)
{
	int k = num(L, name, lo, hi, v);

	if (k == 0)
		return api__create_fail(
		    -EINVAL, "shmcoll_init: %s: %s is not set, though %s is (%s sets both)",
		    L->name, name, seen, L->name);
	return k < 0 ? k : 0;
}

/* An optional number: -1 when unset. */
static int opt(const struct launcher *L, const char *name, long long lo, long long *v)
{
	int k;

	*v = -1;
	if (!name)
		return 0;
	k = num(L, name, lo, INT_MAX, v);
	return k < 0 ? k : 0;
}

static int read_place(const struct launcher *L, struct place *p)
{
	int rc;

	p->seen = shmcoll__env_set(L->rank) ? L->rank : L->size;
	if ((rc = need(L, p->seen, L->rank, 0, INT_MAX, &p->rank)) < 0 ||
	    (rc = need(L, p->seen, L->size, 1, INT_MAX, &p->size)) < 0 ||
	    (rc = opt(L, L->lrank, 0, &p->lrank)) < 0 ||
	    (rc = opt(L, L->lsize, 1, &p->lsize)) < 0 ||
	    (rc = opt(L, L->nnodes, 1, &p->nnodes)) < 0)
		return rc;
	if (p->rank >= p->size)
		return api__create_fail(-EINVAL, "shmcoll_init: %s: %s=%lld is not below %s=%lld",
		                        L->name, L->rank, p->rank, L->size, p->size);
	if (p->lsize > p->size)
		return api__create_fail(-EINVAL, "shmcoll_init: %s: %s=%lld is more than %s=%lld",
		                        L->name, L->lsize, p->lsize, L->size, p->size);
	if (p->lsize >= 0 && p->lrank >= p->lsize)
		return api__create_fail(-EINVAL, "shmcoll_init: %s: %s=%lld is not below %s=%lld",
		                        L->name, L->lrank, p->lrank, L->lsize, p->lsize);
	return 0;
}

/* The multi-node jobs shmcoll_init can join are shmcoll-run's: it alone gives each node's
 * leader the others' addresses. A job shows it spans nodes by fewer ranks on this node than
 * in all, by its node count, or by a local rank other than the rank; without any of these
 * variables it is taken to be on one node. */
static int check_one_node(const struct launcher *L, const struct place *p)
{
	char why[96];

	why[0] = '\0';
	if (p->lsize >= 0 && p->lsize < p->size)
		snprintf(why, sizeof(why), "%s=%lld, %s=%lld", L->lsize, p->lsize, L->size,
		         p->size);
	else if (p->nnodes > 1)
		snprintf(why, sizeof(why), "%s=%lld", L->nnodes, p->nnodes);
	else if (p->lrank >= 0 && p->lsize < 0 && p->lrank != p->rank)
		snprintf(why, sizeof(why), "%s=%lld, %s=%lld", L->lrank, p->lrank, L->rank,
		         p->rank);
	if (why[0])
		return api__create_fail(
		    -ENOTSUP,
		    "shmcoll_init: %s runs this job on several nodes (%s): "
		    "shmcoll_init joins nodes only under shmcoll-run; start the "
		    "job with shmcoll-run --nnodes",
		    L->name, why);
	if (p->lrank >= 0 && p->lrank != p->rank)
		return api__create_fail(
		    -EINVAL,
		    "shmcoll_init: %s: %s=%lld differs from %s=%lld in a job of "
		    "one node",
		    L->name, L->lrank, p->lrank, L->rank, p->rank);
	if (p->size > SHMCOLL_MAX_RANKS)
		return api__create_fail(-EINVAL,
		                        "shmcoll_init: %s: %s=%lld: more than %d ranks on one node",
		                        L->name, L->size, p->size, SHMCOLL_MAX_RANKS);
	return 0;
}

/* torchrun: MASTER_ADDR:MASTER_PORT is the job's store, which one job at a time can listen
 * on; TORCHELASTIC_RUN_ID (--rdzv-id, a fresh one with --standalone) and the restart count
 * tell apart jobs that reuse the address and an agent's successive restarts. */
static int id_torchrun(const struct launcher *L, uint64_t *h)
{
	long long v;
	int rc;

	if (!shmcoll__env_set("MASTER_ADDR"))
		return api__create_fail(-EINVAL,
		                        "shmcoll_init: %s: MASTER_ADDR is not set, though RANK is "
		                        "(torchrun sets both)",
		                        L->name);
	if ((rc = need(L, L->rank, "MASTER_PORT", 1, 65535, &v)) < 0 ||
	    (rc = num(L, "TORCHELASTIC_RESTART_COUNT", 0, INT_MAX, &v)) < 0)
		return rc;
	fnv_var(h, "MASTER_ADDR");
	fnv_var(h, "MASTER_PORT");
	fnv_var(h, "TORCHELASTIC_RUN_ID");
	fnv_var(h, "TORCHELASTIC_RESTART_COUNT");
	return 0;
}

/* Open MPI: mpirun's job id (4.x: OMPI_MCA_ess_base_jobid; PMIx's namespace, which 5.x sets
 * alone), and where they are set the job's random transport key and mpirun's own address,
 * which also differ between two mpiruns whose job ids happen to match. */
static int id_ompi(const struct launcher *L, uint64_t *h)
{
	if (!shmcoll__env_set("OMPI_MCA_ess_base_jobid") && !shmcoll__env_set("PMIX_NAMESPACE"))
		return api__create_fail(
		    -EINVAL,
		    "shmcoll_init: %s: neither OMPI_MCA_ess_base_jobid nor PMIX_NAMESPACE is set, "
		    "though OMPI_COMM_WORLD_RANK is (mpirun sets them): nothing names the job",
		    L->name);
	fnv_var(h, "OMPI_MCA_ess_base_jobid");
	fnv_var(h, "PMIX_NAMESPACE");
	fnv_var(h, "OMPI_MCA_orte_precondition_transports");
	fnv_var(h, "OMPI_MCA_orte_hnp_uri");
	return 0;
}

/* MPICH's Hydra gives its ranks nothing that names the job (PMI_FD differs per rank; the
 * KVS name is only had by talking PMI on PMI_FD, which MPI_Init does later and which must
 * not be done twice). What every rank of one job on a node does share is Hydra's proxy, the
 * process that forked them: the nearest ancestor named hydra_pmi_proxy (a rank may run
 * under a wrapper script), else the parent; identified by pid, start time and pid namespace,
 * so a later job's proxy with a reused pid is another job. PMI_PORT (Hydra's PMI server, where
 * it sets that instead of PMI_FD) and PMI_JOBID (Slurm's PMI-2) name the job where set. */
static int id_mpich(const struct launcher *L, uint64_t *h)
{
	struct shmcoll_proc_id me, proxy = {.pid = (int32_t)getppid()};
	struct shmcoll_proc_stat st;
	int32_t up = proxy.pid;

	(void)L;
	for (int i = 0; i < 32 && up > 1; i++) {
		if (shmcoll__proc_stat(up, &st) < 0)
			break;
		if (i == 0)
			proxy.start = st.start;
		if (strcmp(st.comm, HYDRA_PROXY) == 0) {
			proxy.pid = up;
			proxy.start = st.start;
			break;
		}
		up = st.ppid;
	}
	shmcoll__proc_self(&me);
	fnv_bytes(h, &proxy.pid, sizeof(proxy.pid));
	fnv_bytes(h, &proxy.start, sizeof(proxy.start));
	fnv_bytes(h, &me.pidns, sizeof(me.pidns));
	fnv_var(h, "PMI_PORT");
	fnv_var(h, "PMI_JOBID");
	return 0;
}

/* Slurm: the job and the step, which every task of one srun shares and which no other srun
 * on the cluster has. (A batch script's own process, which has no SLURM_STEP_ID, is no task
 * of a step, and Slurm is not present for it.) */
static int id_slurm(const struct launcher *L, uint64_t *h)
{
	long long v;
	int rc;

	if ((rc = need(L, L->rank, "SLURM_JOB_ID", 0, UINT32_MAX, &v)) < 0 ||
	    (rc = need(L, L->rank, "SLURM_STEP_ID", 0, UINT32_MAX, &v)) < 0)
		return rc;
	fnv_var(h, "SLURM_JOB_ID");
	fnv_var(h, "SLURM_STEP_ID");
	return 0;
}

/* In the order of precedence. */
static const struct launcher launchers[] = {
    {"torchrun", "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", NULL, 0, NULL,
     id_torchrun},
    {"Open MPI", "ompi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", NULL, 0, NULL, id_ompi},
    {"MPICH", "mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", NULL, 0, NULL,
     id_mpich},
    {"Slurm", "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL,
     "SLURM_STEP_NUM_NODES", 1, "SLURM_STEP_ID", id_slurm},
};

static int read_launcher(const struct launcher *L, struct api_launch *l)
{
	uint64_t h = 0xcbf29ce484222325ull;
	unsigned uid = (unsigned)getuid();
	struct place p;
	int rc;

	if ((rc = read_place(L, &p)) < 0 || (rc = check_one_node(L, &p)) < 0)
		return rc;
	fnv_bytes(&h, L->tag, strlen(L->tag) + 1);
	fnv_bytes(&h, &uid, sizeof(uid));
	if ((rc = L->identity(L, &h)) < 0)
		return rc;
	l->launcher = L->name;
	l->rank = (int)p.rank;
	l->size = (int)p.size;
	snprintf(l->job, sizeof(l->job), "%s-%016llx", L->tag, (unsigned long long)h);
	return 1;
}

int api__launcher_env(struct api_launch *l)
{
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		const struct launcher *L = &launchers[i];

		if ((shmcoll__env_set(L->rank) || (!L->by_rank && shmcoll__env_set(L->size))) &&
		    (!L->also || shmcoll__env_set(L->also)))
			return read_launcher(L, l);
	}
	return 0;
}
