/* comm.c - one communicator over the ranks of several nodes: shared memory inside each node
 * (a node communicator of its own), and one leader per node (its local rank 0) that talks to
 * the other nodes' leaders over lib/net. This file makes and ends it (the leaders' mesh, the
 * wire's addresses, gathered here with its own collectives before the wire is set up; or,
 * hosted, a node communicator of the caller's and a transport of the host's, no wire),
 * allocates its symmetric memory and answers what it is. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/coll/coll.h"
#include "lib/core/errors.h"
#include "lib/hier/impl.h"

/* How long a leader with a CPU of its own spins on its sockets before it sleeps: a few times
 * the 14-25 us a sleeper on an idle vCPU takes to wake, which is more than a small exchange
 * over loopback costs in all. */
#define NET_SPIN_NS 50000

static void free_scratch(struct shmcoll_hier *h)
{
	int i;

	for (i = 0; i < SCR_COUNT; i++)
		free(h->scr[i]);
}

int shmcoll__hier_destroy(struct shmcoll_hier *h)
{
	if (shmcoll__queue_busy(&h->tasks))
		return hier__fail(h, -EBUSY,
		                  "shmcoll_comm_destroy: %u operation(s) still outstanding",
		                  h->tasks.outstanding);
	if (shmcoll__wire_active(h->wire))
		return hier__fail(h, -EBUSY,
		                  "shmcoll_comm_destroy: %u point-to-point operation(s) with other "
		                  "nodes still outstanding",
		                  shmcoll__wire_active(h->wire));
	shmcoll__wire_close(h->wire);
	shmcoll__net_close(h->net);
	if (!h->borrowed)
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
		shmcoll__hier_node_rc(h, rc);
		return NULL;
	}
	/* Each node allocates in its own heap. A node without room fails alone and stays
	 * usable (its ranks agreed on it); a failed step breaks it. */
	p = shmcoll__node_malloc(h->local, bytes);
	if (!p && load_relaxed(&h->local->broken)) {
		shmcoll__hier_node_rc(h, -ECANCELED);
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
			shmcoll__hier_node_rc(h, rc);
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
	return shmcoll__hier_node_rc(h, rc);
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
	l.head.blocking = 1;
	rc = hier__lead_advance(h, &l);
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

/* After the leader opened its connections (status: 0, or its error with the message in
 * err; 0 on the other ranks): the leader also looks at whether the job's ranks outnumber
 * its machine's CPUs, and every rank of the node learns both, so that all wait as an
 * oversubscribed node does or all fail. 0, or the error with a message in err (cannot:
 * what the other ranks say their leader could not do). */
static int node_learns(struct shmcoll_hier *h, int status, const char *cannot, char *err,
                       size_t errlen)
{
	int rc;

	if (h->lrank == 0 && status == 0) {
		status = colocated_oversubscribed(h, online_cpus());
		if (status < 0)
			snprintf(err, errlen, "node %d's leader (rank %d): %s", h->node, h->rank,
			         h->err);
	}
	rc = shmcoll__node_bcast(h->local, &status, 1, SHMCOLL_INT32, 0);
	if (rc < 0) {
		snprintf(err, errlen, "node %d: %s", h->node, h->local->err);
		return rc;
	}
	if (status < 0) {
		if (h->lrank != 0)
			snprintf(err, errlen, "node %d's leader %s (%s)", h->node, cannot,
			         shmcoll__strerror(status));
		return status;
	}
	if (status > 0)
		h->local->waiter.oversubscribed = 1;
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
	hier__queue_init(h);
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
	}
	rc = node_learns(h, status, "could not reach the other nodes", err, errlen);
	if (rc < 0)
		goto err_local;
	/* A leader with a CPU of its own spins on its sockets before it sleeps. */
	if (h->net && !h->local->waiter.oversubscribed)
		shmcoll__net_set_spin(h->net, NET_SPIN_NS);
	/* Every rank listens on its node's address for other nodes' ranks' messages; once all
	 * do, they exchange their addresses, which the wire takes. */
	{
		char host[SHMCOLL_ADDR_MAX], mine[SHMCOLL_ADDR_MAX] = "";
		char(*table)[SHMCOLL_ADDR_MAX];
		struct shmcoll_wire_cfg wc;
		struct shmcoll_wire *w;
		uint16_t port;

		shmcoll__addr_split(addrs[h->node], host, sizeof(host), &port);
		hier__wire_cfg(h, &wc);

		status = shmcoll__wire_open(&wc, host, cfg->token, &w, mine, sizeof(mine));
		table = calloc((size_t)h->size, sizeof(*table));
		if (status == 0 && !table)
			status = -ENOMEM;
		rc = shmcoll__hier_allreduce(h, (const uint8_t *)&status, (uint8_t *)&status, 1,
		                             SHMCOLL_INT32, SHMCOLL_MIN);
		if (rc == 0 && status == 0)
			rc = shmcoll__hier_allgather(h, (const uint8_t *)mine, (uint8_t *)table,
			                             sizeof(mine), SHMCOLL_UINT8);
		if (rc < 0 || status < 0) {
			snprintf(err, errlen, "rank %d: %s", h->rank,
			         rc < 0 ? h->err
			         : status == -ENOMEM
			             ? "out of memory for the connections between nodes' ranks"
			             : "a rank could not listen for messages from other nodes");
			shmcoll__wire_close(w);
			free(table);
			rc = rc < 0 ? rc : status;
			goto err_local;
		}
		shmcoll__wire_setup(w, table);
		h->wire = w;
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

int shmcoll__hier_create_hosted(struct shmcoll_node *local, int nnodes, int node,
                                const shmcoll_transport *t, struct shmcoll_hier **out, char *err,
                                size_t errlen)
{
	char nerr[SHMCOLL_ERR_LEN - 64];
	struct shmcoll_hier *h;
	int32_t sizes[2];
	int rc, status = 0;

	*out = NULL;
	h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	h->nnodes = nnodes;
	h->node = node;
	h->nproc = local->size;
	h->lrank = local->rank;
	h->rank = node * h->nproc + h->lrank;
	h->size = nnodes * h->nproc;
	h->local = local;
	h->borrowed = 1;
	/* The host's transport has nothing to connect: opening it fails only on arguments every
	 * leader shares, or out of a few bytes of memory, so the leaders' exchange below is
	 * reached by all of them or by none. */
	if (h->lrank == 0) {
		status = shmcoll__net_open_host(nnodes, node, t, local->waiter.timeout_ns, &h->net,
		                                nerr, sizeof(nerr));
		if (status < 0)
			snprintf(err, errlen, "node %d's leader (rank %d): %s", node, h->rank,
			         nerr);
	}
	rc = node_learns(h, status, "could not use the host's transport", err, errlen);
	if (rc < 0)
		goto err;
	/* The ranks are node-major over nodes of one size: one allreduce tells every rank
	 * whether the sizes agree (the largest of each size and of its negation). */
	sizes[0] = h->nproc;
	sizes[1] = -h->nproc;
	rc = shmcoll__hier_allreduce(h, (const uint8_t *)sizes, (uint8_t *)sizes, 2, SHMCOLL_INT32,
	                             SHMCOLL_MAX);
	if (rc < 0) {
		snprintf(err, errlen, "rank %d: %s", h->rank, h->err);
		goto err;
	}
	if (sizes[0] != -sizes[1]) {
		snprintf(err, errlen,
		         "the nodes have from %d to %d ranks: a hosted communicator "
		         "needs as many on each",
		         -sizes[1], sizes[0]);
		rc = -EINVAL;
		goto err;
	}
	*out = h;
	return 0;

err:
	shmcoll__net_close(h->net);
	free_scratch(h);
	free(h);
	return rc;
}
