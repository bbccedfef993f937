/* state.c - a multi-node communicator's failure state and what every file of lib/hier uses
 * below its stages: recording a message, breaking everything (the leader's connections, the
 * node communicator, the wire), entering it, a node stage's result as the communicator's,
 * the working memory and the call word. It calls nothing else in lib/hier (the wire's break
 * is lib/net's), so the files read in one order: comm.c, colls.c and vcolls.c, hier.c,
 * lead.c, p2p.c, state.c and wide.c.
 *
 * A failure anywhere breaks the whole communicator: the leader shuts its connections (the
 * other nodes' leaders fail at once and break their nodes) and breaks its node communicator
 * (its node's ranks wake and fail). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/hier/impl.h"

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

/* Breaks everything below h but the wire: the broken word (later calls fail; the wire's
 * thread looks at it), the leader's connections (the other nodes learn), the node
 * communicator (its ranks wake). */
static void break_below(struct shmcoll_hier *h, int why)
{
	atomic_store(&h->broken, why);
	if (h->net)
		shmcoll__net_shutdown(h->net);
	shmcoll__node_break(h->local, why);
}

void hier__wire_broke(void *h, int why)
{
	break_below(h, why);
}

void shmcoll__hier_break(struct shmcoll_hier *h, int why)
{
	break_below(h, why);
	shmcoll__wire_break(h->wire);
}

void shmcoll__hier_abort(struct shmcoll_hier *h)
{
	shmcoll__hier_break(h, ECANCELED);
}
