/* hier.c - one communicator over the ranks of several nodes: shared memory inside each node
 * (a node communicator of its own), and one leader per node (its local rank 0) that talks to
 * the other nodes' leaders over lib/net. This file makes and ends it, enters it, fails it,
 * and runs the two kinds of stage its collectives (colls.c) are made of: node collectives
 * and the leaders' exchanges.
 *
 * A failure anywhere breaks the whole communicator: the leader shuts its connections (the
 * other nodes' leaders fail at once and break their nodes) and breaks its node communicator
 * (its node's ranks wake and fail). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/coll/coll.h"
#include "lib/core/errors.h"
#include "lib/hier/impl.h"
#include "lib/sched/sched.h"

/* How long a leader with a CPU of its own spins on its sockets before it sleeps: a few times
 * the 14-25 us a sleeper on an idle vCPU takes to wake, which is more than a small exchange
 * over loopback costs in all. */
#define NET_SPIN_NS 50000

int hier__fail(struct shmcoll_hier *h, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(h->err, sizeof(h->err), fmt, ap);
	va_end(ap);
	return rc;
}

int hier__broken(struct shmcoll_hier *h, int rc)
{
	int why = rc == -ENOMEM ? ECANCELED : -rc;
	char err[64];

	atomic_store(&h->broken, why);
	if (h->net) {
		shmcoll__net_shutdown(h->net);
		/* An exchange in flight writes into working memory: reap it. */
		shmcoll__net_wait(h->net, err, sizeof(err));
	}
	shmcoll__node_break(h->local, why);
	shmcoll__wire_break(h->wire);
	if (!h->cause[0])
		snprintf(h->cause, sizeof(h->cause), "%s", h->err);
	return rc;
}

int hier__oom(struct shmcoll_hier *h, const char *fn, size_t bytes)
{
	hier__fail(h, -ENOMEM, "%s: out of memory for %zu bytes of working memory", fn, bytes);
	return hier__broken(h, -ENOMEM);
}

void *hier__scratch(struct shmcoll_hier *h, int i, size_t bytes)
{
	void *p;

	if (bytes <= h->cap[i])
		return h->scr[i];
	p = realloc(h->scr[i], bytes);
	if (!p)
		return NULL;
	h->scr[i] = p;
	h->cap[i] = bytes;
	return p;
}

uint64_t hier__call_word(uint32_t kind, shmcoll_dtype dt, shmcoll_op op, int root, size_t count)
{
	return (uint64_t)kind | (uint64_t)dt << 8 | (uint64_t)op << 16 |
	       (uint64_t)((uint32_t)(root + 1) & 0xffffff) << 24 | (uint64_t)(count & 0xffff) << 48;
}

/* Whether a node broken for a dead peer was broken by its leader, alive: then it was the
 * other nodes that failed (the leader breaks its node when its connections do; a rank of the
 * node that dies is named instead), and the node's own message ("rank 0 died") would
 * mislead. */
static int broken_by_live_leader(const struct shmcoll_hier *h)
{
	int why, who;
	pid_t pid;

	shmcoll__node_aborted(h->local, &why, &who);
	if (h->lrank == 0 || who != 0)
		return 0;
	pid = shmcoll__peer_pid(h->local, 0);
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* A node-stage result: rc, with the node communicator's message as ours. */
static int local_rc(struct shmcoll_hier *h, int rc)
{
	if (rc >= 0)
		return rc;
	if (rc == -EOWNERDEAD && broken_by_live_leader(h))
		hier__fail(
		    h, rc,
		    "node %d: its leader (rank %d) lost its connection to another node: a rank "
		    "or the leader there died or aborted",
		    h->node, h->node * h->nproc);
	else
		hier__fail(h, rc, "node %d: %s", h->node, h->local->err);
	return hier__broken(h, rc);
}

int shmcoll__hier_node_rc(struct shmcoll_hier *h, int rc)
{
	return local_rc(h, rc);
}

int hier__await_node(struct shmcoll_hier *h, struct hier_task *t)
{
	int rc, done;

	/* A node stage enters the node communicator first, as a call of its own would: a rank
	 * of the node that failed meanwhile is found before anything is written. */
	if (!t->node_on) {
		if (t->blocking) {
			rc = shmcoll__node_enter(h->local, t->node.fn);
			if (rc == 0)
				rc = shmcoll__task_run(h->local, &t->node);
			return local_rc(h, rc);
		}
		/* Queued, the task enters when it reaches the head of the node's queue. */
		t->node_on = 1;
		shmcoll__task_start(h->local, &t->node);
	}
	if (t->blocking) {
		rc = shmcoll__task_wait(h->local, &t->node);
	} else {
		shmcoll__task_test(h->local, &t->node, &done);
		if (!done)
			return SHMCOLL_PENDING;
		rc = t->node.rc;
	}
	t->node_on = 0;
	return local_rc(h, rc);
}

int hier__await_lead(struct shmcoll_hier *h, struct hier_task *t)
{
	return hier__lead_advance(h, &t->lead, t->blocking);
}

static void finish(struct shmcoll_hier *h, struct hier_task *t, int rc)
{
	t->rc = rc;
	t->done = 1;
	h->tasks.head = t->next;
	if (!h->tasks.head)
		h->tasks.tail = NULL;
	h->tasks.outstanding--;
}

/* Advances the head call once; one that reaches the head after an earlier call broke the
 * communicator fails as a call entering it does. */
static int advance_head(struct shmcoll_hier *h, int blocking)
{
	struct hier_task *t = h->tasks.head;
	int rc;

	t->blocking = blocking;
	rc = t->at == 0 ? shmcoll__hier_enter(h, t->fn) : 0;
	if (rc == 0)
		rc = t->advance(h, t);
	if (rc != SHMCOLL_PENDING)
		finish(h, t, rc);
	return rc;
}

static void enqueue(struct shmcoll_hier *h, struct hier_task *t)
{
	t->next = NULL;
	t->at = t->done = t->node_on = t->lead_on = 0;
	if (h->tasks.tail)
		h->tasks.tail->next = t;
	else
		h->tasks.head = t;
	h->tasks.tail = t;
	h->tasks.outstanding++;
}

int shmcoll__hier_wait(struct shmcoll_hier *h, struct hier_task *t)
{
	/* The calls before t first, each to its end: their stages come before t's on every
	 * rank of every node. */
	while (!t->done)
		advance_head(h, 1);
	return t->rc;
}

int hier__task_run(struct shmcoll_hier *h, struct hier_task *t)
{
	if (!h->tasks.head) {
		t->next = NULL;
		t->at = t->done = t->node_on = t->lead_on = 0;
		t->blocking = 1;
		return t->advance(h, t);
	}
	enqueue(h, t);
	return shmcoll__hier_wait(h, t);
}

void shmcoll__hier_start(struct shmcoll_hier *h, struct hier_task *t)
{
	enqueue(h, t);
	while (h->tasks.head && advance_head(h, 0) != SHMCOLL_PENDING)
		;
}

int shmcoll__hier_progress(struct shmcoll_hier *h)
{
	while (h->tasks.head && advance_head(h, 0) != SHMCOLL_PENDING)
		;
	return h->tasks.head != NULL;
}

void shmcoll__hier_test(struct shmcoll_hier *h, struct hier_task *t, int *done)
{
	while (h->tasks.head && advance_head(h, 0) != SHMCOLL_PENDING)
		;
	*done = t->done;
}

int shmcoll__hier_result(const struct hier_task *t)
{
	return t->rc;
}

int shmcoll__hier_done(const struct hier_task *t)
{
	return t->done;
}

void shmcoll__hier_call_free(struct hier_task *t)
{
	if (t) {
		free(t->sub);
		free(t->vbuf);
	}
	free(t);
}

int shmcoll__hier_enter(struct shmcoll_hier *h, const char *fn)
{
	int rc;

	if (load_relaxed(&h->broken))
		return hier__fail(h, -ECANCELED, "%s: the communicator was aborted earlier%s%s", fn,
		                  h->cause[0] ? ": " : " (by a peer or shmcoll_comm_abort)",
		                  h->cause);
	/* A rank of this node failed between calls. */
	rc = shmcoll__node_enter(h->local, fn);
	if (rc < 0)
		return local_rc(h, rc);
	h->err[0] = '\0';
	return 0;
}

char *shmcoll__hier_err(struct shmcoll_hier *h)
{
	return h->err;
}

void shmcoll__hier_break(struct shmcoll_hier *h, int why)
{
	atomic_store(&h->broken, why);
	if (h->net)
		shmcoll__net_shutdown(h->net);
	shmcoll__node_break(h->local, why);
	shmcoll__wire_break(h->wire);
}

void shmcoll__hier_abort(struct shmcoll_hier *h)
{
	shmcoll__hier_break(h, ECANCELED);
}

static void free_scratch(struct shmcoll_hier *h)
{
	int i;

	for (i = 0; i < SCR_COUNT; i++)
		free(h->scr[i]);
}

int shmcoll__hier_destroy(struct shmcoll_hier *h)
{
	if (h->tasks.head)
		return hier__fail(h, -EBUSY,
		                  "shmcoll_comm_destroy: %u operation(s) still outstanding",
		                  h->tasks.outstanding);
	if (shmcoll__wire_active(h))
		return hier__fail(h, -EBUSY,
		                  "shmcoll_comm_destroy: %u point-to-point operation(s) with other "
		                  "nodes still outstanding",
		                  shmcoll__wire_active(h));
	shmcoll__wire_close(h->wire);
	shmcoll__net_close(h->net);
	shmcoll__node_destroy(h->local);
	free_scratch(h);
	free(h);
	return 0;
}

void *shmcoll__hier_malloc(struct shmcoll_hier *h, size_t bytes)
{
	int rc = shmcoll__node_enter(h->local, "shmcoll_malloc");
	uint8_t ok, all = 0;
	char why[SHMCOLL_ERR_LEN];
	void *p;

	if (rc < 0) {
		local_rc(h, rc);
		return NULL;
	}
	/* Each node allocates in its own heap. A node without room fails alone and stays
	 * usable (its ranks agreed on it); a failed step breaks it. */
	p = shmcoll__node_malloc(h->local, bytes);
	if (!p && load_relaxed(&h->local->broken)) {
		local_rc(h, -ECANCELED);
		return NULL;
	}
	/* Then every node learns whether all had room: the buffer exists on every rank or on
	 * none, and a node that had room gives it back. */
	ok = p != NULL;
	snprintf(why, sizeof(why), "%s", h->local->err);
	rc = shmcoll__hier_allreduce(h, &ok, &all, 1, SHMCOLL_UINT8, SHMCOLL_MIN);
	if (rc < 0)
		return NULL;
	if (all)
		return p;
	if (p) {
		rc = shmcoll__node_free(h->local, p);
		if (rc < 0) {
			local_rc(h, rc);
			return NULL;
		}
		hier__fail(h, -ENOMEM, "shmcoll_malloc: %zu bytes: another node had no room",
		           bytes);
	} else {
		hier__fail(h, -ENOMEM, "node %d: %s", h->node, why);
	}
	return NULL;
}

int shmcoll__hier_free(struct shmcoll_hier *h, void *ptr)
{
	int rc = shmcoll__node_enter(h->local, "shmcoll_free");

	if (rc == 0)
		rc = shmcoll__node_free(h->local, ptr);
	/* A pointer that did not come from malloc is refused before any step, on this rank
	 * alone: an argument error, which breaks nothing. */
	if (rc == -EINVAL && !load_relaxed(&h->local->broken))
		return hier__fail(h, rc, "node %d: %s", h->node, h->local->err);
	return local_rc(h, rc);
}

int shmcoll__hier_rank(const struct shmcoll_hier *h)
{
	return h->rank;
}

int shmcoll__hier_size(const struct shmcoll_hier *h)
{
	return h->size;
}

struct shmcoll_node *shmcoll__hier_local(const struct shmcoll_hier *h)
{
	return h->local;
}

int shmcoll__hier_nproc(const struct shmcoll_hier *h)
{
	return h->nproc;
}

const char *shmcoll__hier_transport(const struct shmcoll_hier *h)
{
	return h->net ? shmcoll__net_kind_name(h->net) : NULL;
}

/* The node's ranks may spin while they wait only if nothing else needs their
 * CPUs. On a machine of its own a node knows (the node communicator counts
 * its ranks against their CPUs); but several nodes of one job may share a
 * machine (tests, benchmarks, a node carved in two), and then a rank spinning
 * on its leader takes the CPU another node's rank needs: at 2 nodes x 2 ranks
 * on 2 CPUs, 396 us per small allreduce instead of 29.5. So the leaders
 * compare machines (the kernel's boot id) and count the ranks of the job on
 * this one. Returns 1 if they outnumber this node's CPUs, 0 if not, or the
 * error of the exchange. */
static int colocated_oversubscribed(struct shmcoll_hier *h, int ncpus)
{
	char id[40] = "", *all;
	size_t idn = sizeof(id);
	struct lead l;
	int fd, n, same = 0, rc;

	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, id, sizeof(id) - 1) < 0)
			id[0] = '\0';
		close(fd);
	}
	if (!id[0])
		return 0; /* cannot tell: assume machines of their own */
	all = hier__scratch(h, SCR_NET, idn * (size_t)h->nnodes);
	if (!all)
		return hier__oom(h, "shmcoll_init", idn * (size_t)h->nnodes);
	memcpy(all + idn * (size_t)h->node, id, idn);
	hier__lead_ag(&l, "shmcoll_init", hier__call_word(KIND_BARRIER, 0, 0, -1, 0),
	              (uint8_t *)all, (size_t)h->nnodes, idn, 1);
	rc = hier__lead_advance(h, &l, 1);
	if (rc < 0)
		return rc;
	for (n = 0; n < h->nnodes; n++)
		same += !memcmp(all + idn * (size_t)n, id, idn);
	return (long)same * h->nproc > ncpus;
}

/* The machine's CPUs: not this process's affinity, which the launcher may have
 * narrowed to one CPU per rank. */
static int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

/* Parses the leaders' addresses "h:p,h:p,..." into n entries. */
static int parse_nodes(const char *s, int n, char (*addrs)[SHMCOLL_ADDR_MAX])
{
	char host[SHMCOLL_ADDR_MAX];
	uint16_t port;
	int i;

	for (i = 0; i < n; i++) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);

		if (len == 0 || len >= SHMCOLL_ADDR_MAX || (i == n - 1) != !end)
			return -EINVAL;
		memcpy(addrs[i], s, len);
		addrs[i][len] = '\0';
		if (shmcoll__addr_split(addrs[i], host, sizeof(host), &port) < 0 || port == 0)
			return -EINVAL;
		s = end ? end + 1 : s + len;
	}
	return 0;
}

int shmcoll__hier_create(const struct shmcoll_hier_cfg *cfg, struct shmcoll_hier **out, char *err,
                         size_t errlen)
{
	char nerr[SHMCOLL_ERR_LEN - 64];
	char(*addrs)[SHMCOLL_ADDR_MAX] = NULL;
	struct shmcoll_node_cfg lc = {0};
	struct shmcoll_hier *h;
	int rc, status;

	*out = NULL;
	h = calloc(1, sizeof(*h));
	addrs = calloc((size_t)cfg->nnodes, sizeof(*addrs));
	if (!h || !addrs) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto err_free;
	}
	if (parse_nodes(cfg->nodes, cfg->nnodes, addrs) < 0) {
		snprintf(err, errlen, "SHMCOLL_NODES is not %d comma-separated host:port addresses",
		         cfg->nnodes);
		rc = -EINVAL;
		goto err_free;
	}
	h->rank = cfg->node * cfg->nproc + cfg->lrank;
	h->size = cfg->nnodes * cfg->nproc;
	h->nnodes = cfg->nnodes;
	h->node = cfg->node;
	h->nproc = cfg->nproc;
	h->lrank = cfg->lrank;

	lc.rank = cfg->lrank;
	lc.size = cfg->nproc;
	lc.job = cfg->job;
	lc.timeout_ns = cfg->timeout_ns;
	rc = shmcoll__node_create(&lc, &h->local, nerr, sizeof(nerr));
	if (rc < 0) {
		snprintf(err, errlen, "node %d: %s", cfg->node, nerr);
		goto err_free;
	}
	status = 0;
	if (h->lrank == 0) {
		struct shmcoll_net_cfg nc = {
		    .nnodes = cfg->nnodes,
		    .node = cfg->node,
		    .nproc = cfg->nproc,
		    .token = cfg->token,
		    .addrs = (const char(*)[SHMCOLL_ADDR_MAX])addrs,
		    .listen_fd = cfg->listen_fd,
		    .timeout_ns = cfg->timeout_ns,
		    .kind = NET_AUTO,
		    .log = cfg->log,
		};

		status = shmcoll__net_open(&nc, &h->net, nerr, sizeof(nerr));
		if (status < 0)
			snprintf(err, errlen, "node %d's leader (rank %d): %s", cfg->node, h->rank,
			         nerr);
		if (status == 0) {
			status = colocated_oversubscribed(h, online_cpus());
			if (status < 0)
				snprintf(err, errlen, "node %d's leader (rank %d): %s", cfg->node,
				         h->rank, h->err);
		}
	}
	/* Every rank of the node learns whether its leader got through, and whether to wait as
	 * an oversubscribed node does. */
	rc = shmcoll__node_bcast(h->local, &status, 1, SHMCOLL_INT32, 0);
	if (rc < 0) {
		snprintf(err, errlen, "node %d: %s", cfg->node, h->local->err);
		goto err_local;
	}
	if (status < 0) {
		if (h->lrank != 0)
			snprintf(err, errlen,
			         "node %d's leader could not reach the other nodes (%s)", cfg->node,
			         shmcoll__strerror(status));
		rc = status;
		goto err_local;
	}
	if (status > 0)
		h->local->waiter.oversubscribed = 1;
	/* A leader with a CPU of its own spins on its sockets before it sleeps. */
	if (h->net && !h->local->waiter.oversubscribed)
		shmcoll__net_set_spin(h->net, NET_SPIN_NS);
	/* Every rank listens on its node's address for other nodes' ranks' messages. */
	{
		char host[SHMCOLL_ADDR_MAX];
		uint16_t port;

		shmcoll__addr_split(addrs[h->node], host, sizeof(host), &port);
		rc = shmcoll__wire_setup(h, host, cfg->token, nerr, sizeof(nerr));
		if (rc < 0) {
			snprintf(err, errlen, "rank %d: %s", h->rank, nerr);
			goto err_local;
		}
	}
	free(addrs);
	*out = h;
	return 0;

err_local:
	shmcoll__net_close(h->net);
	shmcoll__node_destroy(h->local);
err_free:
	free(addrs);
	free_scratch(h); /* the leader's probe of the CPUs may have used one */
	free(h);
	return rc;
}
