/* module.c - the interposer as a whole: its environment, the counts of
 * SHMCOLL_MPI_STATS, the list of live communicator states and their release
 * (the attribute's delete callback, MPI_Finalize), and how a failed call
 * ends. The lowest of mpi/'s files: it calls none of the others. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/shmcoll_mpi.h"

/* Process-wide by nature: an interposer has no handle of its own to hang
 * state on. list_lock guards the keyval's creation and the list of live
 * states, which several threads may set up or free at once. */
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cstate *live;
static atomic_int keyval = MPI_KEYVAL_INVALID;
atomic_int finalized;
atomic_uint generation; /* bumped whenever a state is deleted */
static atomic_ullong n_shm[C_COUNT], n_pmpi[C_COUNT];

struct env env;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static int env_flag(const char *name)
{
	const char *s = getenv(name);

	return s && *s && strcmp(s, "0") != 0;
}

static void read_env(void)
{
	const char *s = getenv("SHMCOLL_MPI");
	char *end;
	long k;

	env.off = s && strcmp(s, "0") == 0;
	env.stats = env_flag("SHMCOLL_MPI_STATS");
	env.debug = env_flag("SHMCOLL_MPI_DEBUG");
	s = getenv("SHMCOLL_MPI_NODE_SPLIT");
	if (!s || !*s)
		return;
	if (strncmp(s, "cyclic:", 7) == 0) {
		env.cyclic = 1;
		s += 7;
	}
	errno = 0;
	k = strtol(s, &end, 10);
	if (errno || end == s || *end || k < 1 || k > INT_MAX) {
		fprintf(stderr,
		        "shmcoll-mpi: SHMCOLL_MPI_NODE_SPLIT=%s is not k or cyclic:k with "
		        "k >= 1; ignored\n",
		        getenv("SHMCOLL_MPI_NODE_SPLIT"));
		env.cyclic = 0;
		return;
	}
	env.split = (int)k;
}

void load_env(void)
{
	pthread_once(&env_once, read_env);
}

/* One write per line, so that the ranks' lines do not interleave. */
__attribute__((format(printf, 1, 2))) void debug(const char *fmt, ...)
{
	char line[256];
	va_list ap;

	if (!env.debug)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "shmcoll-mpi: %s\n", line);
}

/* Counts a call that went to PMPI and passes its return code on. */
int pmpi(enum coll c, int rc)
{
	atomic_fetch_add_explicit(&n_pmpi[c], 1, memory_order_relaxed);
	return rc;
}

int via_shm(enum coll c)
{
	atomic_fetch_add_explicit(&n_shm[c], 1, memory_order_relaxed);
	return MPI_SUCCESS;
}

/* Releases what st holds; local, so the order in which ranks do it does
 * not matter. */
void release(struct cstate *st)
{
	/* The wide communicator borrows shm: it goes first. */
	wide_destroy(st);
	if (st->shm)
		shmcoll_comm_destroy(st->shm);
	if (st->node != MPI_COMM_NULL)
		PMPI_Comm_free(&st->node);
	if (st->leaders != MPI_COMM_NULL)
		PMPI_Comm_free(&st->leaders);
	free(st->node_of);
	free(st->lrank_of);
	free(st->node_start);
	free(st->rank_at);
	free(st->vc);
	free(st->vz);
	for (size_t i = 0; i < ARRAY_SIZE(st->scratch); i++)
		free(st->scratch[i]);
	free(st);
}

static void unlink_state(struct cstate *st)
{
	pthread_mutex_lock(&list_lock);
	if (st->prev)
		st->prev->next = st->next;
	else if (live == st)
		live = st->next;
	if (st->next)
		st->next->prev = st->prev;
	st->prev = st->next = NULL;
	pthread_mutex_unlock(&list_lock);
}

void link_state(struct cstate *st)
{
	pthread_mutex_lock(&list_lock);
	st->next = live;
	if (live)
		live->prev = st;
	live = st;
	pthread_mutex_unlock(&list_lock);
}

/* Drops a reference to st: the last releases it. */
void put_state(struct cstate *st)
{
	if (atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) == 1)
		release(st);
}

/* The attribute's delete callback: MPI_Comm_free, MPI_Comm_disconnect,
 * MPI_Comm_delete_attr in our MPI_Finalize. Calling PMPI_Comm_free here is
 * allowed: our node and leader communicators carry no attributes. */
static int delete_state(MPI_Comm comm, int kv, void *attr, void *extra)
{
	struct cstate *st = attr;

	/* Before the state goes: no thread's cached lookup (state_of) matches
	 * from now on, though the handle may come back for a new communicator. */
	atomic_fetch_add_explicit(&generation, 1, memory_order_release);
	unlink_state(st);
	/* Calls still running unpack at completion, which names a communicator only for its
	 * data representation: the handle is the caller's no more. */
	st->comm = MPI_COMM_SELF;
	put_state(st);
	return MPI_SUCCESS;
}

int get_keyval(void)
{
	int kv = atomic_load_explicit(&keyval, memory_order_acquire);

	if (kv != MPI_KEYVAL_INVALID)
		return kv;
	pthread_mutex_lock(&list_lock);
	kv = atomic_load_explicit(&keyval, memory_order_relaxed);
	if (kv == MPI_KEYVAL_INVALID &&
	    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &kv, NULL) == MPI_SUCCESS)
		/* Pairs with the acquire above: a thread that sees the keyval
		 * sees it created. */
		atomic_store_explicit(&keyval, kv, memory_order_release);
	pthread_mutex_unlock(&list_lock);
	return kv;
}

/* A collective failed part way: see mpi/shmcoll_mpi.h's opening comment. rc is
 * shmcoll's (< 0) or PMPI's (> 0). */
int fail(struct cstate *st, enum coll c, const char *what, int rc)
{
	char msg[MPI_MAX_ERROR_STRING];
	/* A call through the wide communicator has its message there. */
	shmcoll_comm *sc = st->wide && *shmcoll_last_error(st->wide) ? st->wide : st->shm;
	int len = 0;

	if (rc < 0) {
		/* shmcoll's own message names the function. */
		if (*shmcoll_last_error(sc))
			fprintf(stderr, "shmcoll-mpi: %s on rank %d: %s\n", coll_names[c], st->rank,
			        shmcoll_last_error(sc));
		else
			fprintf(stderr, "shmcoll-mpi: %s on rank %d: %s: %s\n", coll_names[c],
			        st->rank, what, shmcoll_strerror(rc));
		rc = MPI_ERR_OTHER;
	} else {
		PMPI_Error_string(rc, msg, &len);
		fprintf(stderr, "shmcoll-mpi: %s on rank %d: %s: %s\n", coll_names[c], st->rank,
		        what, msg);
	}
	if (st->wide)
		shmcoll_comm_abort(st->wide);
	shmcoll_comm_abort(st->shm);
	st->usable = 0;
	PMPI_Comm_call_errhandler(st->comm, rc);
	return rc;
}

/* The end of a collective that went to shmcoll. */
int shm_done(struct cstate *st, enum coll c, const char *fn, int rc)
{
	return rc < 0 ? fail(st, c, fn, rc) : via_shm(c);
}

/* A blocking call whose preparation failed with rc (an MPI code, or -ENOMEM): see fail(). */
int prep_failed(struct cstate *st, enum coll c, const char *what, int rc)
{
	int mrc = fail(st, c, what, rc);

	return rc == -ENOMEM ? MPI_ERR_NO_MEM : mrc;
}

/* Rank 0 of MPI_COMM_WORLD prints the counts summed over all ranks. */
static void print_stats(void)
{
	unsigned long long mine[2 * C_COUNT], sum[2 * C_COUNT];
	int c, rank = -1;

	for (c = 0; c < C_COUNT; c++) {
		mine[c] = atomic_load_explicit(&n_shm[c], memory_order_relaxed);
		mine[C_COUNT + c] = atomic_load_explicit(&n_pmpi[c], memory_order_relaxed);
	}
	if (PMPI_Reduce(mine, sum, 2 * C_COUNT, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
	                MPI_COMM_WORLD) != MPI_SUCCESS ||
	    PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || rank != 0)
		return;
	if (env.off)
		fprintf(stderr, "shmcoll-mpi: off (SHMCOLL_MPI=0): every call went to PMPI\n");
	for (c = 0; c < C_COUNT; c++)
		fprintf(stderr, "shmcoll-mpi: %s %llu via shmcoll, %llu fallback\n", coll_names[c],
		        sum[c], sum[C_COUNT + c]);
}

/* The first state still cached, NULL when none is. */
static struct cstate *first_live(void)
{
	struct cstate *st;

	pthread_mutex_lock(&list_lock);
	st = live;
	pthread_mutex_unlock(&list_lock);
	return st;
}

/* Deletes the attribute of every communicator still cached (its callback
 * unlinks and releases the state), then the keyval. */
static void release_all(void)
{
	int kv = atomic_load_explicit(&keyval, memory_order_acquire);
	struct cstate *st;

	if (kv == MPI_KEYVAL_INVALID)
		return;
	for (st = first_live(); st; st = first_live()) {
		if (PMPI_Comm_delete_attr(st->comm, kv) == MPI_SUCCESS && first_live() != st)
			continue;
		/* The callback did not run: release the state here. */
		unlink_state(st);
		release(st);
	}
	atomic_store_explicit(&keyval, MPI_KEYVAL_INVALID, memory_order_relaxed);
	PMPI_Comm_free_keyval(&kv);
}

EXPORT int MPI_Finalize(void)
{
	load_env();
	if (env.stats)
		print_stats();
	atomic_store_explicit(&finalized, 1, memory_order_relaxed);
	release_all();
	return PMPI_Finalize();
}
